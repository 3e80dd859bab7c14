"""The ``sft`` job kind of the experience model service (run by a ``LocalJobRunner``)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from dreamgym.jobs import JobCancelled, JobContext
from experience_model.training.sft import SFTConfig, train_experience_model

__all__ = ["SFT_CONFIG", "run", "validate"]

SFT_CONFIG = TypeAdapter(SFTConfig)


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Validate an SFT job config (raises pydantic ValidationError naming the field)."""
    SFT_CONFIG.validate_python(config)
    return config


def _tasks(cfg: SFTConfig) -> list[Any]:
    if not cfg.task_generator_url or cfg.task_synthesis_pairs == 0:
        return []
    from dreamgym.clients.task_generator import TaskGeneratorClient  # noqa: PLC0415

    with TaskGeneratorClient(cfg.task_generator_url, api_key=cfg.api_key) as client:
        page = client.list_tasks(
            split="train", origin="seed", environment=cfg.environment, limit=1000
        )
    return list(page.data)


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Train and return the summary (checkpoint path under ``result.checkpoint``)."""
    cfg = SFT_CONFIG.validate_python(config)
    try:
        summary = train_experience_model(
            cfg,
            tasks=_tasks(cfg),
            progress=lambda p, msg, metrics: ctx.report(p, msg, metrics),
            should_stop=ctx.cancelled,
        )
    except InterruptedError:
        raise JobCancelled(ctx.job_id) from None
    ctx.report(checkpoint=summary["checkpoint"])
    return summary
