"""``fidelity`` job: score the experience model on held-out real transitions.

With a ``judge`` section, a seeded sample of the predictions is also scored by an LLM judge with
the paper's rubric (arXiv 2511.03773, Appendix C.4), reported under ``judge`` in the result.
"""

from __future__ import annotations

from typing import Any

from agent_trainer.fidelity import Judge, measure_fidelity
from agent_trainer.jobs.schemas import FidelityJobConfig, JudgeConfig
from agent_trainer.judge import judge_fidelity
from agent_trainer.judge_client import ChatJudge
from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.experience_types import Prediction, PredictQuery
from dreamgym.jobs import JobContext
from dreamgym.types import Transition

__all__ = ["run"]


def _judge(cfg: JudgeConfig, seed: int, ctx: JobContext) -> Judge:
    """The judge step of the job: sample, ask the endpoint, aggregate."""

    def judge(
        queries: list[PredictQuery], predictions: list[Prediction], labels: list[Transition]
    ) -> dict[str, Any]:
        ctx.report(0.8, f"judging up to {cfg.max_transitions} transitions with {cfg.model}")
        with ChatJudge(
            cfg.base_url,
            cfg.model,
            api_key=cfg.api_key,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            max_tokens=cfg.max_tokens,
        ) as ask:
            return judge_fidelity(
                queries,
                predictions,
                labels,
                ask=ask,
                model=cfg.model,
                max_transitions=cfg.max_transitions,
                seed=seed,
                concurrency=cfg.concurrency,
            )

    return judge


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
            judge=_judge(cfg.judge, cfg.seed, ctx) if cfg.judge is not None else None,
        )
