"""``grpo`` job: train the policy with GRPO in the imagined environment.

The job body (services, resume, checkpoints, real-interaction count) is shared with ``ppo`` in
:mod:`agent_trainer.jobs.training`.
"""

from __future__ import annotations

from typing import Any

from agent_trainer.jobs.schemas import GRPOJobConfig, grpo_config
from agent_trainer.jobs.training import (
    RestReplaySink,
    RestTaskSource,
    load_job_policy,
    run_training,
)
from agent_trainer.trainer import GRPOTrainer
from dreamgym.jobs import JobContext

__all__ = ["RestReplaySink", "RestTaskSource", "run"]


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Train; returns final metrics, checkpoint paths and the real-interaction count (0)."""
    job = GRPOJobConfig.model_validate(config)
    cfg = grpo_config(config)
    policy, resumed_from = load_job_policy(cfg.policy, ctx.workdir / "run", job.resume)
    return run_training(
        job.services,
        cfg,
        ctx,
        lambda **kwargs: GRPOTrainer(cfg, **kwargs),
        policy=policy,
        resumed_from=resumed_from,
    )
