"""``evaluate`` job: a policy (or the random baseline) on held-out real games."""

from __future__ import annotations

from typing import Any

from agent_trainer.evaluation import UniformRandomPolicy, evaluate_policy
from agent_trainer.jobs.schemas import evaluate_config
from agent_trainer.policy import LMPolicy
from agent_trainer.policy_io import load_policy_model
from dreamgym.jobs import JobContext

__all__ = ["run"]


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Evaluate; returns success rate, Wilson 95% CI, mean reward and real steps."""
    cfg = evaluate_config(config)
    if cfg.policy == "random":
        policy: LMPolicy | UniformRandomPolicy = UniformRandomPolicy(cfg.seed)
    else:
        model, tokenizer = load_policy_model(cfg.policy)  # full or LoRA checkpoint
        policy = LMPolicy(model, tokenizer, history_length=cfg.history_length)
    ctx.report(0.05, f"evaluating {cfg.policy} on {cfg.episodes} held-out games")
    result = evaluate_policy(
        policy,
        environment=cfg.environment,
        episodes=cfg.episodes,
        max_steps=cfg.max_steps,
        first_seed_index=cfg.first_seed_index,
        greedy=cfg.greedy,
        concurrency=cfg.concurrency,
        seed=cfg.seed,
    )
    return {"policy": cfg.policy, **result.as_dict()}
