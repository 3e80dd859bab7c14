"""``fidelity`` job: score the experience model on held-out real transitions."""

from __future__ import annotations

from typing import Any

from agent_trainer.fidelity import measure_fidelity
from agent_trainer.jobs.schemas import FidelityJobConfig
from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.jobs import JobContext

__all__ = ["run"]


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Play held-out real episodes and compare the experience model's predictions."""
    cfg = FidelityJobConfig.model_validate(config)
    ctx.report(0.1, "playing held-out real episodes")
    with ExperienceModelClient(
        cfg.services.experience_model or "", timeout_s=600, api_key=cfg.services.api_key
    ) as client:
        return measure_fidelity(
            client,
            environment=cfg.environment,
            episodes=cfg.episodes,
            max_steps=cfg.max_steps,
            seed=cfg.seed,
        )
