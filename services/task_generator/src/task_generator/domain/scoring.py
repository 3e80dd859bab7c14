"""Which group a task's curriculum score is computed over: its rollout groups, or its cluster.

- ``"group"`` (GRPO, default): V_τ over the task's own recent outcome groups (Eq. 7,
  :func:`~task_generator.domain.curriculum.score_tasks`).
- ``"cluster"`` (PPO, arXiv 2511.03773 §4.2): PPO has no rollout groups, so tasks are clustered by
  a semantic embedding of their text (instruction + initial observation), separately per
  environment, into ``min(clusters, tasks)`` clusters (:func:`dreamgym.curriculum.kmeans_cosine`),
  and each task scores the reward variance of every recent reward of its cluster
  (:func:`dreamgym.curriculum.cluster_reward_variance`). A task's cluster score depends on the
  other scored tasks, so it is always computed over all of the team's scored tasks.

With single-rollout reports, set ``score_window`` > 1 so each task contributes several rewards.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from dreamgym.curriculum.clusters import (
    cluster_reward_variance,
    hashed_text_embeddings,
    kmeans_cosine,
)
from dreamgym.types import Task
from task_generator.domain.curriculum import score_tasks
from task_generator.domain.ports import TaskOutcomes, TaskRepository

__all__ = ["Embed", "ScoreGrouping", "ScoringConfig", "TaskScorer", "cluster_scores", "task_text"]

ScoreGrouping = Literal["group", "cluster"]
Embed = Callable[[list[str]], npt.NDArray[np.floating]]
"""Texts → (n, D) embeddings (rows need not be normalised)."""


@dataclass(frozen=True, kw_only=True)
class ScoringConfig:
    """How tasks are grouped for their score.

    Attributes:
        grouping: ``"group"`` or ``"cluster"`` (see the module docstring).
        clusters: K, clusters per environment under ``"cluster"`` (>= 1; fewer when an
            environment has fewer scored tasks).
    """

    grouping: ScoreGrouping = "group"
    clusters: int = 8

    def __post_init__(self) -> None:
        if self.clusters < 1:
            raise ValueError(f"clusters must be >= 1, got {self.clusters}")


def task_text(task: Task) -> str:
    """The text a task is embedded by: its instruction and initial observation."""
    return f"{task.instruction}\n{task.initial_observation}"


def cluster_scores(
    outcomes: Sequence[TaskOutcomes],
    tasks: Mapping[str, Task],
    *,
    clusters: int,
    embed: Embed = hashed_text_embeddings,
) -> dict[str, float]:
    """Cluster scores of every task with outcome groups (and a known task), per environment.

    Args:
        outcomes: tasks with their recent groups (their rewards are pooled per task).
        tasks: ``task_id → task`` for the text and environment.
        clusters: K per environment.
        embed: the text encoder.

    Returns:
        ``task_id → V`` of its cluster.
    """
    by_env: dict[str, list[TaskOutcomes]] = defaultdict(list)
    for o in outcomes:
        if o.recent_groups and o.task_id in tasks:
            by_env[tasks[o.task_id].environment].append(o)
    scores: dict[str, float] = {}
    for members in by_env.values():
        x = embed([task_text(tasks[o.task_id]) for o in members])  # (B, D)
        labels = kmeans_cosine(x, min(clusters, len(members)))  # (B,)
        rewards = [[r for g in o.recent_groups for r in g] for o in members]
        values = cluster_reward_variance(rewards, labels)  # (B,)
        scores.update({o.task_id: float(v) for o, v in zip(members, values, strict=True)})
    return scores


class TaskScorer:
    """Curriculum scores of a team's tasks under the configured grouping.

    Args:
        repository: tasks and outcome groups.
        config: grouping and cluster count.
        window: W, the recent groups per task (as the curriculum's ``score_window``).
        embed: text encoder for ``"cluster"`` (default: feature hashing).
    """

    def __init__(
        self,
        repository: TaskRepository,
        config: ScoringConfig | None = None,
        *,
        window: int = 1,
        embed: Embed = hashed_text_embeddings,
    ) -> None:
        self.repository = repository
        self.config = config or ScoringConfig()
        self.window = window
        self.embed = embed

    def scores(self, team: str, outcomes: Sequence[TaskOutcomes]) -> dict[str, float]:
        """``task_id → score`` for every task of ``outcomes`` that has outcome groups."""
        if self.config.grouping == "group":
            return score_tasks(outcomes)
        wanted = {o.task_id for o in outcomes if o.recent_groups}
        if not wanted:
            return {}
        everything = self.repository.task_outcomes(team, window=self.window)
        ids = [o.task_id for o in everything if o.recent_groups]
        tasks = {t.task_id: t for t in self.repository.get_tasks(team, ids)}
        scored = cluster_scores(everything, tasks, clusters=self.config.clusters, embed=self.embed)
        return {t: s for t, s in scored.items() if t in wanted}
