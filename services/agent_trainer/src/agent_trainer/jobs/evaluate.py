"""``evaluate`` job: policies (or the random baseline) on held-out real games."""

from __future__ import annotations

from typing import Any

from agent_trainer.config import EvaluateConfig
from agent_trainer.evaluation import UniformRandomPolicy, evaluate_policy
from agent_trainer.jobs.schemas import evaluate_config
from agent_trainer.policy import LMPolicy
from agent_trainer.policy_io import load_policy_model
from dreamgym.jobs import JobContext
from dreamgym.usage import UsageMeter

__all__ = ["run"]


def _evaluate_one(cfg: EvaluateConfig, spec: str) -> dict[str, Any]:
    if spec == "random":
        policy: LMPolicy | UniformRandomPolicy = UniformRandomPolicy(cfg.seed)
    else:
        model, tokenizer = load_policy_model(spec, device=cfg.device)  # full or LoRA
        policy = LMPolicy(model, tokenizer, history_length=cfg.history_length)
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
    return {"policy": spec, **result.as_dict()}


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Evaluate; returns success rate, Wilson 95% CI, mean reward and real steps.

    With ``evaluate.policies`` the result is ``{"results": [...]}``, one entry per policy in
    order, each with its own ``usage`` (wall and CPU seconds of that policy's evaluation).
    """
    cfg = evaluate_config(config)
    if not cfg.policies:
        ctx.report(0.05, f"evaluating {cfg.policy} on {cfg.episodes} held-out games")
        return _evaluate_one(cfg, cfg.policy)
    results = []
    for i, spec in enumerate(cfg.policies):
        ctx.raise_if_cancelled()
        ctx.report(
            0.05 + 0.95 * i / len(cfg.policies),
            f"evaluating policy {i + 1}/{len(cfg.policies)} on {cfg.episodes} held-out games",
        )
        meter = UsageMeter()
        results.append({**_evaluate_one(cfg, spec), "usage": meter.read()})
    return {"results": results}
