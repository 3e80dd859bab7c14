"""Job kinds the trainer runs (each ``run(config: dict, ctx: JobContext) -> dict``).

- ``collect``  — seed data: real expert/random/ε-greedy episodes → replay store; tasks → /tasks
- ``fidelity`` — experience-model fidelity on held-out real transitions
- ``grpo``     — GRPO in the imagined environment (0 real interactions)
- ``ppo``      — PPO (value head, turn-level GAE) in the imagined environment
- ``evaluate`` — a policy (or the random baseline) on held-out real games, with 95% CIs

With the Celery backend, :func:`job_queue` routes each job to a worker queue.
"""

from typing import Any

JOB_KINDS = {
    "collect": "agent_trainer.jobs.collect:run",
    "fidelity": "agent_trainer.jobs.fidelity:run",
    "grpo": "agent_trainer.jobs.grpo:run",
    "ppo": "agent_trainer.jobs.ppo:run",
    "evaluate": "agent_trainer.jobs.evaluate:run",
}


def job_queue(kind: str, config: dict[str, Any]) -> str:
    """The Celery queue of a job: ``"gpu"`` for model work (GRPO, fidelity, evaluating a model
    policy), ``"cpu"`` for real-environment collection and the random-policy baseline."""
    if kind == "collect":
        return "cpu"
    if kind == "evaluate" and (config.get("evaluate") or {}).get("policy", "random") == "random":
        return "cpu"
    return "gpu"
