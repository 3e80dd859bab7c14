"""Curriculum: task scores from outcome groups, λ-capped batch sampling, registration rules.

Composes the pure math of :mod:`dreamgym.curriculum.scoring` with the
:class:`~task_generator.domain.ports.TaskRepository` port (DreamGym, arXiv 2511.03773, §3.3):

- **Score** of a task (Eq. 7): V_τ = (1/n) Σ_i (r_i − r̄)² over the n rewards of its most recent
  outcome group. With ``score_window = W > 1`` the score is the mean of V_τ over the W most
  recent groups (each group's variance is computed on its own, then averaged; groups are never
  pooled). Tasks without outcome groups have no score (``None``).
- **Train batches**: seed vs generated train tasks are mixed by ``sample_task_batch`` with
  at most floor(λ·B) generated tasks (λ = ``max_generated_fraction``, not reported by the paper).
  With ``sample_weighting="score"`` every candidate is drawn with weight ``floor + V_τ``, and a
  task never scored counts as ``unscored_task_score`` (default 0.25 = V_τ of a binary task at
  success rate 0.5, i.e. unexplored tasks are treated optimistically). ``"uniform"`` (default)
  draws uniformly within each pool.
- **Eval batches**: uniform over eval *seed* tasks; generated tasks are never returned.

Every public method takes the caller's ``team`` (keyword-only): registration, scores, pools and
samples only ever involve that team's tasks and outcome groups.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from dreamgym.curriculum.scoring import reward_variance, sample_task_batch
from dreamgym.errors import InvalidRequestError
from dreamgym.task_types import (
    TaskDetailResponse,
    TaskListResponse,
    TaskOutcomeResponse,
    TaskRegisterResponse,
    TaskSampleRequest,
    TaskSampleResponse,
    TaskScore,
    TaskScoreListResponse,
)
from dreamgym.types import Split, Task, TaskOrigin
from task_generator.domain.errors import NoTasksAvailableError, TaskNotFoundError
from task_generator.domain.ports import QuotaReachedError, TaskOutcomes, TaskRepository
from task_generator.domain.quota import TaskQuota

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "GroupScorer",
    "Scorer",
    "check_registration",
    "sample_eval_task_ids",
    "score_tasks",
    "score_weights",
    "task_content_hash",
]

SampleWeighting = Literal["uniform", "score"]


@dataclass(frozen=True, kw_only=True)
class CurriculumConfig:
    """Curriculum hyperparameters.

    Attributes:
        max_generated_fraction: λ, the largest share of generated tasks per train batch, in [0, 1].
        score_window: W >= 1, the number of most recent outcome groups averaged into a score.
        sample_weighting: ``"uniform"`` or ``"score"`` (weight ``floor + V_τ``, see module doc).
        sample_weight_floor: > 0, keeps zero-variance tasks drawable under ``"score"``.
        unscored_task_score: V_τ assumed for tasks without outcomes under ``"score"``.
    """

    max_generated_fraction: float = 0.25
    score_window: int = 1
    sample_weighting: SampleWeighting = "uniform"
    sample_weight_floor: float = 0.05
    unscored_task_score: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_generated_fraction <= 1.0:
            raise ValueError(
                f"max_generated_fraction (λ) must be in [0, 1], got {self.max_generated_fraction}"
            )
        if self.score_window < 1:
            raise ValueError(f"score_window must be >= 1, got {self.score_window}")
        if self.sample_weight_floor <= 0 or self.unscored_task_score < 0:
            raise ValueError(
                "sample_weight_floor must be > 0 and unscored_task_score >= 0, got "
                f"{self.sample_weight_floor} and {self.unscored_task_score}"
            )


def task_content_hash(task: Task) -> str:
    """SHA-256 hex digest of a task's canonical JSON (all fields, keys sorted).

    Two registrations of one ``task_id`` are the same task exactly when their hashes match.
    """
    payload = json.dumps(task.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def score_tasks(outcomes: Sequence[TaskOutcomes]) -> dict[str, float]:
    """Curriculum score of each task: mean reward variance of its recent groups (Eq. 7).

    Args:
        outcomes: per task, its W most recent groups (ragged: group sizes may differ).

    Returns:
        ``task_id -> score`` for every task with at least one group.

    References:
        DreamGym, arXiv 2511.03773, Eq. 7.
    """
    scored = [o for o in outcomes if o.recent_groups]
    if not scored:
        return {}
    groups = [group for o in scored for group in o.recent_groups]
    variances = reward_variance(groups)  # (sum_k W_k,), one V per group, task-contiguous
    sizes = np.array([len(o.recent_groups) for o in scored])  # (K,) groups per task
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # (K,) first group of each task
    means = np.add.reduceat(variances, starts) / sizes  # (K,) mean V over each task's groups
    return {o.task_id: float(m) for o, m in zip(scored, means, strict=True)}


class Scorer(Protocol):
    """Computes curriculum scores (see :mod:`task_generator.domain.scoring` for the choices)."""

    def scores(self, team: str, outcomes: Sequence[TaskOutcomes]) -> dict[str, float]:
        """``task_id → score`` for every task of ``outcomes`` with at least one group."""
        ...


class GroupScorer:
    """The default: each task's score is Eq. 7 over its own recent groups (:func:`score_tasks`)."""

    def scores(self, team: str, outcomes: Sequence[TaskOutcomes]) -> dict[str, float]:
        """``score_tasks(outcomes)`` (``team`` is not needed: the groups are the task's own)."""
        del team
        return score_tasks(outcomes)


def score_weights(
    task_ids: Sequence[str], scores: Mapping[str, float], *, floor: float, unscored_score: float
) -> list[float]:
    """Sampling weights ``floor + V_τ`` (``unscored_score`` for tasks without a score).

    Returns:
        len(task_ids) weights, all >= ``floor``, in ``task_ids`` order.
    """
    return [floor + scores.get(t, unscored_score) for t in task_ids]


def sample_eval_task_ids(
    task_ids: Sequence[str], batch_size: int, rng: np.random.Generator
) -> list[str]:
    """Uniform sample of ``batch_size`` ids (without replacement while the pool allows).

    Raises:
        ValueError: ``task_ids`` is empty or ``batch_size < 1``.
    """
    if not task_ids or batch_size < 1:
        raise ValueError(
            f"need a non-empty pool and batch_size >= 1, got {len(task_ids)}, {batch_size}"
        )
    replace = batch_size > len(task_ids)
    picks = rng.choice(len(task_ids), size=batch_size, replace=replace)
    return [task_ids[int(i)] for i in picks]


def check_registration(tasks: Sequence[Task]) -> None:
    """Reject requests that contradict themselves, before anything is written.

    Raises:
        InvalidRequestError: a generated task is not in the train split, a task is its own
            parent, or one ``task_id`` appears twice with different content (``param`` names
            the offending ``body.tasks.<i>`` field).
    """
    seen: dict[str, str] = {}
    for i, task in enumerate(tasks):
        if task.origin == "generated" and task.split != "train":
            raise InvalidRequestError(
                f"task '{task.task_id}' is generated, so its split must be 'train'",
                param=f"body.tasks.{i}.split",
            )
        if task.parent_task_id == task.task_id:
            raise InvalidRequestError(
                f"task '{task.task_id}' cannot be its own parent",
                param=f"body.tasks.{i}.parent_task_id",
            )
        digest = task_content_hash(task)
        if seen.setdefault(task.task_id, digest) != digest:
            raise InvalidRequestError(
                f"task_id '{task.task_id}' appears twice in the request with different content",
                param=f"body.tasks.{i}.task_id",
            )


class Curriculum:
    """Task registry, outcome recording, ranking and batch sampling over a repository.

    >>> curriculum = Curriculum(repository, CurriculumConfig(max_generated_fraction=0.25))
    >>> curriculum.record_outcome("twx-coin/train/3", [1.0, 0.0, 1.0, 0.0], None, team="a").score
    0.25
    """

    def __init__(
        self,
        repository: TaskRepository,
        config: CurriculumConfig,
        quota: TaskQuota | None = None,
        scorer: Scorer | None = None,
    ) -> None:
        self.repository = repository
        self.config = config
        self.quota = quota or TaskQuota()
        self.scorer = scorer or GroupScorer()

    def register(self, tasks: Sequence[Task], *, team: str) -> TaskRegisterResponse:
        """Store ``team``'s tasks idempotently (see :meth:`TaskRepository.register_tasks`).

        Raises:
            TaskQuotaExceededError: the new tasks would exceed the team's quota (429).
        """
        check_registration(tasks)
        try:
            inserted, duplicates = self.repository.register_tasks(
                team, tasks, max_tasks=self.quota.max_tasks_per_team
            )
        except QuotaReachedError as exc:
            raise self.quota.exceeded(team, exc.stored) from None
        return TaskRegisterResponse(inserted=inserted, duplicates=duplicates)

    def list_tasks(
        self,
        *,
        team: str,
        split: Split | None = None,
        origin: TaskOrigin | None = None,
        environment: str | None = None,
        limit: int = 100,
        offset: int = 0,
        parent_task_id: str | None = None,
    ) -> TaskListResponse:
        """A page of ``team``'s tasks and the number of its tasks matching the filters."""
        data, count = self.repository.list_tasks(
            team,
            split=split,
            origin=origin,
            environment=environment,
            limit=limit,
            offset=offset,
            parent_task_id=parent_task_id,
        )
        return TaskListResponse(data=data, count=count)

    def _outcomes_of(self, team: str, task_id: str) -> TaskOutcomes | None:
        found = self.repository.task_outcomes(
            team, window=self.config.score_window, task_ids=[task_id]
        )
        return found[0] if found else None

    def task_detail(self, task_id: str, *, team: str) -> TaskDetailResponse:
        """``team``'s task, its score, group count and lineage.

        Raises:
            TaskNotFoundError: the team has no task ``task_id`` (also when another team has).
        """
        tasks = self.repository.get_tasks(team, [task_id])
        if not tasks:
            raise TaskNotFoundError(task_id)
        outcomes = self._outcomes_of(team, task_id)
        return TaskDetailResponse(
            task=tasks[0],
            score=self.scorer.scores(team, [outcomes]).get(task_id) if outcomes else None,
            num_groups=outcomes.num_groups if outcomes else 0,
            lineage=self.repository.lineage(team, task_id),
        )

    def record_outcome(
        self, task_id: str, rewards: Sequence[float], policy_version: str | None, *, team: str
    ) -> TaskOutcomeResponse:
        """Append one group of outcome rewards to ``team``'s task; return its new score.

        Raises:
            TaskNotFoundError: the team has no task ``task_id`` (nothing written).
        """
        if not self.repository.add_outcome(team, task_id, rewards, policy_version):
            raise TaskNotFoundError(task_id)
        outcomes = self._outcomes_of(team, task_id)
        assert outcomes is not None, "outcome just written must be readable"
        score = self.scorer.scores(team, [outcomes])[task_id]
        return TaskOutcomeResponse(task_id=task_id, score=score, num_groups=outcomes.num_groups)

    def ranking(
        self, *, team: str, environment: str | None = None, limit: int = 100
    ) -> TaskScoreListResponse:
        """``team``'s scored tasks by score descending (ties by id); ``count`` before ``limit``."""
        outcomes = self.repository.task_outcomes(
            team, window=self.config.score_window, environment=environment
        )
        scores = self.scorer.scores(team, outcomes)
        rows = [
            TaskScore(
                task_id=o.task_id,
                score=scores[o.task_id],
                num_groups=o.num_groups,
                origin=o.origin,
                split=o.split,
            )
            for o in outcomes
        ]
        rows.sort(key=lambda r: (-r.score, r.task_id))
        return TaskScoreListResponse(data=rows[:limit], count=len(rows))

    def _train_weights(
        self, team: str, seed_ids: list[str], generated_ids: list[str], environment: str | None
    ) -> tuple[list[float] | None, list[float] | None]:
        if self.config.sample_weighting == "uniform":
            return None, None
        outcomes = self.repository.task_outcomes(
            team, window=self.config.score_window, environment=environment, split="train"
        )
        scores = self.scorer.scores(team, outcomes)
        kwargs = {
            "floor": self.config.sample_weight_floor,
            "unscored_score": self.config.unscored_task_score,
        }
        return score_weights(seed_ids, scores, **kwargs), score_weights(
            generated_ids, scores, **kwargs
        )

    def _sample_train_ids(
        self, team: str, request: TaskSampleRequest, rng: np.random.Generator
    ) -> list[str]:
        env = request.environment
        seed_ids = self.repository.task_ids(team, split="train", origin="seed", environment=env)
        generated_ids = self.repository.task_ids(
            team, split="train", origin="generated", environment=env
        )
        lam = self.config.max_generated_fraction
        num_generated = math.floor(lam * request.batch_size) if generated_ids else 0
        if num_generated < request.batch_size and not seed_ids:
            raise NoTasksAvailableError("train seed", env)
        seed_weights, generated_weights = self._train_weights(team, seed_ids, generated_ids, env)
        return sample_task_batch(
            seed_ids,
            generated_ids,
            request.batch_size,
            max_generated_fraction=lam,
            rng=rng,
            seed_weights=seed_weights,
            generated_weights=generated_weights,
        )

    def sample(self, request: TaskSampleRequest, *, team: str) -> TaskSampleResponse:
        """Sample a batch of ``team``'s tasks (train: λ-capped mix; eval: uniform seed tasks).

        Raises:
            NoTasksAvailableError: the team's requested pool is empty.
        """
        rng = np.random.default_rng(request.seed)
        if request.split == "eval":
            pool = self.repository.task_ids(
                team, split="eval", origin="seed", environment=request.environment
            )
            if not pool:
                raise NoTasksAvailableError("eval seed", request.environment)
            ids = sample_eval_task_ids(pool, request.batch_size, rng)
        else:
            ids = self._sample_train_ids(team, request, rng)
        by_id = {t.task_id: t for t in self.repository.get_tasks(team, sorted(set(ids)))}
        tasks = [by_id[i] for i in ids]
        num_generated = sum(t.origin == "generated" for t in tasks)
        return TaskSampleResponse(tasks=tasks, num_generated=num_generated)
