"""Job kinds the trainer runs (each ``run(config: dict, ctx: JobContext) -> dict``).

- ``collect``  — seed data: real expert/random/ε-greedy episodes → replay store; tasks → /tasks
- ``fidelity`` — experience-model fidelity on held-out real transitions
- ``grpo``     — GRPO in the imagined environment (0 real interactions)
- ``ppo``      — PPO (value head, turn-level GAE) in the imagined environment
- ``evaluate`` — a policy (or the random baseline) on held-out real games, with 95% CIs
"""

JOB_KINDS = {
    "collect": "agent_trainer.jobs.collect:run",
    "fidelity": "agent_trainer.jobs.fidelity:run",
    "grpo": "agent_trainer.jobs.grpo:run",
    "ppo": "agent_trainer.jobs.ppo:run",
    "evaluate": "agent_trainer.jobs.evaluate:run",
}
