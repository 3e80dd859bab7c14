"""Evaluation in the real environment on held-out games, with 95% confidence intervals.

Held-out means the eval split: game seeds from :func:`dreamgym.envs.splits.seeds` ``("eval")``
(disjoint from every seed used for seed data or training; TextWorldExpress also switches to its
``test`` game fold). The same seeds are used for every policy compared, so the comparison is
paired. Success rate intervals are Wilson intervals; mean-reward intervals are Student-t.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agent_trainer.env_pools import RealEnvPool
from agent_trainer.policy import Decision, HistoryItem, LMPolicy
from agent_trainer.rollout import collect_rollouts
from dreamgym.envs import make_env
from dreamgym.envs.splits import seeds as split_seeds
from dreamgym.stats import summarize_episodes
from dreamgym.types import AbstractState, Task

__all__ = ["EvaluationResult", "UniformRandomPolicy", "eval_tasks", "evaluate_policy"]


class UniformRandomPolicy:
    """Picks an admissible action uniformly at random (the paper's random baseline)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def act(
        self, states: Sequence[AbstractState], histories: Sequence[Sequence[HistoryItem]], **_: Any
    ) -> list[Decision]:
        """One uniformly random admissible action per state."""
        del histories
        return [
            Decision(
                action=self.rng.choice(list(s.admissible_actions)),
                prompt_ids=[],
                completion_ids=[],
                sampled_log_probs=[],
            )
            for s in states
        ]


@dataclass
class EvaluationResult:
    """Success rate and mean reward over held-out real episodes.

    Attributes:
        success_rate / ci95_low / ci95_high: fraction of episodes won and its Wilson interval.
        mean_reward / mean_reward_ci95: mean undiscounted return and its t-interval.
        episodes: number of episodes.
        mean_length: mean steps per episode.
        real_steps: real environment steps taken by this evaluation.
        game_seeds: the held-out seeds played (same list for every compared policy).
    """

    success_rate: float
    ci95_low: float
    ci95_high: float
    mean_reward: float
    mean_reward_ci95: tuple[float, float]
    episodes: int
    mean_length: float
    real_steps: int
    game_seeds: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the report's ``policies`` entries)."""
        return {
            "success_rate": self.success_rate,
            "ci95_low": self.ci95_low,
            "ci95_high": self.ci95_high,
            "mean_reward": self.mean_reward,
            "mean_reward_ci95": list(self.mean_reward_ci95),
            "episodes": self.episodes,
            "mean_length": self.mean_length,
            "real_steps": self.real_steps,
        }


def eval_tasks(environment: str, episodes: int, first_seed_index: int = 0) -> list[Task]:
    """Task stubs for held-out real games (the real env supplies instruction and state)."""
    seeds = split_seeds("eval", episodes, start=first_seed_index)
    return [
        Task(
            task_id=f"{environment}/eval/{s}",
            environment=environment,
            instruction="(real environment)",
            initial_observation="",
            game_seed=s,
            split="eval",
        )
        for s in seeds
    ]


def evaluate_policy(
    policy: LMPolicy | UniformRandomPolicy,
    *,
    environment: str,
    episodes: int,
    max_steps: int,
    first_seed_index: int = 0,
    greedy: bool = False,
    concurrency: int = 8,
    seed: int = 0,
) -> EvaluationResult:
    """Play ``episodes`` held-out real games with ``policy``.

    Args:
        policy: an :class:`LMPolicy` or the random baseline.
        environment: real environment id (see :func:`dreamgym.envs.make_env`).
        episodes: number of held-out games (one episode each).
        max_steps: step limit per episode.
        first_seed_index: offset into the eval seed list.
        greedy: temperature 0 instead of sampling.
        concurrency: real environment instances played in lockstep.
        seed: policy sampling seed.
    """
    tasks = eval_tasks(environment, episodes, first_seed_index)
    pool = RealEnvPool(
        lambda: make_env(environment, max_steps=max_steps), max_concurrency=concurrency
    )
    try:
        rollouts = asyncio.run(
            collect_rollouts(
                policy,
                pool,
                tasks,
                group_size=1,
                max_steps=max_steps,  # type: ignore[arg-type]
                temperature=0.0 if greedy else 1.0,
                generator=torch.Generator().manual_seed(seed),
            )
        )
    finally:
        pool.shutdown()
    failed = [r.error for r in rollouts if not r.valid]
    if failed:
        raise RuntimeError(f"{len(failed)} real episodes failed, e.g. {failed[0]}")
    summary = summarize_episodes([r.won for r in rollouts], [r.episode_return for r in rollouts])
    return EvaluationResult(
        success_rate=float(summary["success_rate"]),
        ci95_low=float(summary["ci95_low"]),
        ci95_high=float(summary["ci95_high"]),
        mean_reward=float(summary["mean_reward"]),
        mean_reward_ci95=tuple(summary["mean_reward_ci95"]),  # type: ignore[arg-type]
        episodes=len(rollouts),
        mean_length=sum(len(r.transitions) for r in rollouts) / len(rollouts),
        real_steps=pool.real_steps,
        game_seeds=[t.game_seed or 0 for t in tasks],
    )
