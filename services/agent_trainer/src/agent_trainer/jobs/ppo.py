"""``ppo`` job: train the policy and a value head with PPO in the imagined environment.

Same services, resume and checkpoint layout as ``grpo`` (:mod:`agent_trainer.jobs.training`);
checkpoints also hold ``value_head.safetensors``. When ``ppo.policy.model`` is a checkpoint that
has a value head (e.g. a DreamGym PPO policy continued in the real environment), the head is
loaded with it; otherwise it starts at zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_trainer.jobs.schemas import PPOJobConfig, ppo_config
from agent_trainer.jobs.training import load_job_policy, run_training
from agent_trainer.ppo_trainer import PPOTrainer
from agent_trainer.value_head import VALUE_HEAD_FILE, ValueHead
from dreamgym.jobs import JobContext

__all__ = ["run"]


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Train; returns final metrics, checkpoint paths and the real-interaction count (0)."""
    job = PPOJobConfig.model_validate(config)
    cfg = ppo_config(config)
    policy, resumed_from = load_job_policy(cfg.policy, ctx.workdir / "run", job.resume)
    source = Path(cfg.policy.model)
    value_head = (
        ValueHead.load(source, device=policy.device)
        if resumed_from is None and (source / VALUE_HEAD_FILE).exists()
        else None
    )  # on resume, load_checkpoint restores the run's own head
    return run_training(
        job.services,
        cfg,
        ctx,
        lambda **kwargs: PPOTrainer(cfg, value_head=value_head, **kwargs),
        policy=policy,
        resumed_from=resumed_from,
    )
