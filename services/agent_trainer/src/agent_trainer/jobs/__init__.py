"""Job kinds the trainer runs (each ``run(config: dict, ctx: JobContext) -> dict``).

- ``collect``  — seed data: real expert/random/ε-greedy episodes → replay store; tasks → /tasks
- ``fidelity`` — experience-model fidelity on held-out real transitions
- ``grpo``     — GRPO in the imagined environment (0 real interactions)
- ``ppo``      — PPO (value head, turn-level GAE) in the imagined environment
- ``evaluate`` — a policy (or the random baseline) on held-out real games, with 95% CIs
- ``bc``       — behaviour cloning of the policy on stored real expert trajectories (SFT row)

``grpo`` and ``ppo`` run in the real environment with ``environment_mode="real"`` (real-env
baseline, sim-to-real), within ``real_step_budget`` real steps.

With the Celery backend, :func:`job_queue` routes each job to a worker queue.
"""

from typing import Any

JOB_KINDS = {
    "collect": "agent_trainer.jobs.collect:run",
    "fidelity": "agent_trainer.jobs.fidelity:run",
    "grpo": "agent_trainer.jobs.grpo:run",
    "ppo": "agent_trainer.jobs.ppo:run",
    "evaluate": "agent_trainer.jobs.evaluate:run",
    "bc": "agent_trainer.jobs.bc:run",
}


def job_queue(kind: str, config: dict[str, Any]) -> str:
    """The Celery queue of a job: ``"gpu"`` for model work (GRPO, PPO, BC, fidelity, evaluating a
    model policy), ``"cpu"`` for real-environment collection and the random-policy baseline."""
    if kind == "collect":
        return "cpu"
    if kind == "evaluate":
        section = config.get("evaluate") or {}
        specs = section.get("policies") or [section.get("policy", "random")]
        if all(spec == "random" for spec in specs):
            return "cpu"
    return "gpu"
