"""The replay service: ingest, retrieval, sampling, export and stats over the ports.

Every method is synchronous and blocking (database and embedding work); routes call it from
FastAPI's threadpool (plain ``def`` handlers), never on the event loop. Every method takes the
caller's ``team`` (keyword-only, from the API key; ``"default"`` without authentication) and
only ever reads or writes that team's rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import numpy as np

from dreamgym.replay_types import (
    IngestResult,
    ReplayStats,
    RetrievalFilters,
    RetrievalQuery,
    RetrievedTransition,
    TrajectoryList,
    TransitionPage,
    TransitionReasoning,
    TransitionReasoningResponse,
    TransitionRecord,
    TransitionSampleResponse,
)
from dreamgym.types import Trajectory
from replay_store.domain.annotations import distinct_reasoning_updates
from replay_store.domain.errors import (
    LimitExceededError,
    PriorityTargetNotFoundError,
    TrajectoryNotFoundError,
    TrajectoryQuotaExceededError,
    TransitionNotFoundError,
)
from replay_store.domain.ingest import plan_against_store, plan_batch
from replay_store.domain.keys import PreparedTrajectory, retrieval_key, trajectory_retrieval_keys
from replay_store.domain.ports import (
    Embedder,
    QuotaReachedError,
    ReplayRepository,
    StoreRaceError,
    TrajectoryFilters,
)
from replay_store.domain.retention import RetentionPolicy
from replay_store.domain.sampling import (
    prioritized_probabilities,
    recency_probabilities,
    uniform_sample_indices,
    weighted_sample_indices,
)

__all__ = ["ReplayService", "check_trajectory_quota"]

logger = logging.getLogger(__name__)

_INGEST_ATTEMPTS = 3

SamplingStrategy = Literal["uniform", "prioritized", "recency"]


def check_trajectory_quota(
    team: str, stored: int, adding: int, quota: int | None, *, retry_after_s: float
) -> None:
    """Refuse an ingest that would take ``team`` past its quota.

    Args:
        team: the team.
        stored: trajectories it stores now.
        adding: new trajectories of the batch (duplicates of stored ones do not count).
        quota: most trajectories the team may store; ``None``: unlimited.
        retry_after_s: the ``Retry-After`` hint of the 429.

    Raises:
        TrajectoryQuotaExceededError: ``adding > 0`` and ``stored + adding > quota`` (429).
    """
    if quota is not None and adding > 0 and stored + adding > quota:
        raise TrajectoryQuotaExceededError(team, stored, adding, quota, retry_after_s)


class ReplayService:
    """Replay buffer operations over a repository and an embedder.

    Args:
        repository: trajectory/transition storage.
        embedder: the encoder φ used for stored keys and queries alike.
        max_k: largest ``k`` for retrieval.
        max_batch_trajectories: most trajectories per ingest.
        max_trajectories_per_team: a team's storage quota (``None``: unlimited).
        retention: per-team table size and eviction order (``None``: keep everything).
        quota_retry_after_s: ``Retry-After`` of the 429 when the quota is reached.

    >>> service = ReplayService(repository, HashEmbedder(384))  # doctest: +SKIP
    >>> service.ingest([trajectory], team="lab-a").inserted  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        repository: ReplayRepository,
        embedder: Embedder,
        *,
        max_k: int = 50,
        max_batch_trajectories: int = 1000,
        max_trajectories_per_team: int | None = None,
        quota_retry_after_s: float = 60.0,
        retention: RetentionPolicy | None = None,
    ) -> None:
        self.repository = repository
        self.embedder = embedder
        self.max_k = max_k
        self.max_batch_trajectories = max_batch_trajectories
        self.max_trajectories_per_team = max_trajectories_per_team
        self.quota_retry_after_s = quota_retry_after_s
        self.retention = retention

    # -- writes -------------------------------------------------------------------------------
    def ingest(self, trajectories: Sequence[Trajectory], *, team: str) -> IngestResult:
        """Store trajectories for ``team`` idempotently, all or nothing.

        Idempotency keys (ids, content hashes) are per team: re-sending a trajectory the team
        stores is a duplicate; another team storing the same content changes nothing here.
        Embeddings of all new transitions are computed in one batch before the (short) write
        transaction. A concurrent writer that stores one of the trajectories first makes the
        transaction roll back; the batch is then re-planned against the store.

        Raises:
            LimitExceededError: more than ``max_batch_trajectories`` trajectories.
            TrajectoryConflictError: an id is stored or repeated with different content.
            TrajectoryQuotaExceededError: the new trajectories would exceed the team's quota
                (checked before embedding and again atomically with the insert).
            LimitExceededError: with a retention policy, a batch larger than the table size.
        """
        if len(trajectories) > self.max_batch_trajectories:
            raise LimitExceededError(
                "body.trajectories", len(trajectories), self.max_batch_trajectories
            )
        if self.retention is not None and len(trajectories) > self.retention.max_trajectories:
            raise LimitExceededError(
                "body.trajectories", len(trajectories), self.retention.max_trajectories
            )
        batch = plan_batch(trajectories)
        cache: dict[str, np.ndarray] = {}
        quota = self.max_trajectories_per_team
        for attempt in range(1, _INGEST_ATTEMPTS + 1):
            stored = self.repository.find_existing(
                team,
                [p.trajectory_id for p in batch.unique],
                [p.content_hash for p in batch.unique],
            )
            plan = plan_against_store(batch, stored)
            if quota is not None and plan.new:  # fail before embedding when clearly over
                self._check_quota(team, self.repository.count_trajectories(team), len(plan.new))
            try:
                embeddings = self._embed_trajectories(plan.new, cache)
                evicted = self.repository.insert(
                    team, plan.new, embeddings, max_trajectories=quota, retention=self.retention
                )
                break
            except QuotaReachedError as exc:  # a concurrent ingest of the team got there first
                assert quota is not None  # the repository only enforces a quota it was given
                raise TrajectoryQuotaExceededError(
                    team, exc.stored, len(plan.new), quota, self.quota_retry_after_s
                ) from None
            except StoreRaceError:
                if attempt == _INGEST_ATTEMPTS:
                    raise
                logger.info("ingest raced a concurrent writer; re-planning (attempt %d)", attempt)
        ids = [plan.stored_ids[j] for j in batch.refs]
        return IngestResult(
            inserted=len(plan.new),
            duplicates=len(ids) - len(plan.new),
            trajectory_ids=ids,
            evicted_trajectories=evicted[0],
            evicted_transitions=evicted[1],
        )

    def _check_quota(self, team: str, stored: int, adding: int) -> None:
        check_trajectory_quota(
            team,
            stored,
            adding,
            self.max_trajectories_per_team,
            retry_after_s=self.quota_retry_after_s,
        )

    def _embed_trajectories(
        self, trajectories: Sequence[PreparedTrajectory], cache: dict[str, np.ndarray]
    ) -> np.ndarray:
        """(total transitions, D) embeddings, one embedder call for everything not cached."""
        missing = [p for p in trajectories if p.content_hash not in cache]
        keys = [key for p in missing for key in trajectory_retrieval_keys(p.trajectory)]
        vectors = self.embedder.embed(keys) if keys else np.zeros((0, self.embedder.dim))
        offset = 0
        for p in missing:
            steps = len(p.trajectory.transitions)
            cache[p.content_hash] = vectors[offset : offset + steps]
            offset += steps
        parts = [cache[p.content_hash] for p in trajectories]
        if not parts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32, copy=False)

    # -- reads --------------------------------------------------------------------------------
    def retrieve(
        self, queries: Sequence[RetrievalQuery], k: int, filters: RetrievalFilters, *, team: str
    ) -> list[list[RetrievedTransition]]:
        """Top-k of ``team``'s transitions per query by cosine similarity of φ (Eq. 4).

        All queries are embedded in one batch; each gets ``min(k, matching rows)`` transitions,
        most similar first; other teams' transitions are never candidates.

        Raises:
            LimitExceededError: ``k > max_k``.
        """
        if k > self.max_k:
            raise LimitExceededError("body.k", k, self.max_k)
        vectors = self.embedder.embed(
            [retrieval_key(q.task, q.observation, q.action) for q in queries]
        )
        return self.repository.nearest(team, vectors, k, filters)

    def sample(
        self,
        n: int,
        filters: RetrievalFilters,
        seed: int | None = None,
        *,
        team: str,
        strategy: SamplingStrategy = "uniform",
        alpha: float = 1.0,
        half_life: float = 1000.0,
    ) -> TransitionSampleResponse:
        """Sample ``min(n, N)`` distinct transitions of ``team``'s N matching ones, in draw order.

        ``uniform``: P = 1/N. ``prioritized``: P(i) = p_i^α / Σ p_k^α over the transitions'
        priorities. ``recency``: P(i) ∝ 2^(-age_i / half_life), age_i = matching transitions
        stored after i. Each result carries its P(i) (the probability one draw picks it).
        Deterministic for a given ``seed`` while the team's filtered table is unchanged.
        """
        if strategy == "uniform":
            ids = self.repository.transition_ids(team, filters)
            indices = uniform_sample_indices(len(ids), n, seed)
            probabilities = np.full(len(ids), 1.0 / len(ids) if ids else 0.0)
        else:
            ids, priorities = self.repository.sampling_table(team, filters)
            if strategy == "prioritized":
                probabilities = prioritized_probabilities(priorities, alpha)
            else:
                probabilities = recency_probabilities(len(ids), half_life)
            indices = weighted_sample_indices(probabilities, n, seed)
        transitions = self.repository.transitions_by_ids(team, [ids[i] for i in indices])
        probability_of = {ids[i]: float(probabilities[i]) for i in indices}
        return TransitionSampleResponse(
            transitions=transitions,
            probabilities=[probability_of[t.id] for t in transitions],
            table_size=len(ids),
        )

    def update_transition_priorities(self, priorities: dict[int, float], *, team: str) -> int:
        """Set sampling priorities of ``team``'s transitions (all or nothing); returns the count.

        Raises:
            PriorityTargetNotFoundError: an id is not one of ``team``'s transitions (404).
        """
        missing = self.repository.update_transition_priorities(team, priorities)
        if missing:
            raise PriorityTargetNotFoundError("transition", [str(m) for m in missing])
        return len(priorities)

    def update_trajectory_priorities(self, priorities: dict[str, float], *, team: str) -> int:
        """Set eviction priorities of ``team``'s trajectories (all or nothing); returns the count.

        Raises:
            PriorityTargetNotFoundError: an id is not one of ``team``'s trajectories (404).
        """
        missing = self.repository.update_trajectory_priorities(team, priorities)
        if missing:
            raise PriorityTargetNotFoundError("trajectory", missing)
        return len(priorities)

    def page_transitions(
        self, filters: RetrievalFilters, after_id: int | None, limit: int, *, team: str
    ) -> TransitionPage:
        """One keyset page of ``team``'s transitions by id; ``next_after_id`` None at the end."""
        rows = self.repository.page_transitions(team, filters, after_id, limit + 1)
        has_more = len(rows) > limit
        rows = rows[:limit]
        return TransitionPage(data=rows, next_after_id=rows[-1].id if has_more else None)

    def get_trajectory(self, trajectory_id: str, *, team: str) -> Trajectory:
        """``team``'s trajectory with this id.

        Raises:
            TrajectoryNotFoundError: the team stores no trajectory with this id (whether or not
                another team does: 404, never 403, so ids of other teams are not disclosed).
        """
        trajectory = self.repository.get_trajectory(team, trajectory_id)
        if trajectory is None:
            raise TrajectoryNotFoundError(trajectory_id)
        return trajectory

    def list_trajectories(
        self, filters: TrajectoryFilters, limit: int, offset: int, *, team: str
    ) -> TrajectoryList:
        """``team``'s trajectory summaries (oldest first) and the total matching ``filters``."""
        return self.repository.list_trajectories(team, filters, limit, offset)

    def stats(self, *, team: str) -> ReplayStats:
        """``team``'s counts per source / environment / policy and success rate per policy."""
        return self.repository.stats(team)

    # -- reasoning traces (teacher annotation, paper Eq. 5) -----------------------------------
    def annotate(
        self, updates: Sequence[TransitionReasoning], *, overwrite: bool, team: str
    ) -> TransitionReasoningResponse:
        """Store reasoning traces on ``team``'s transitions, all or nothing, idempotently.

        Raises:
            InvalidRequestError: an id is sent twice with different reasoning (422).
            TransitionNotFoundError: an id is not one of the team's transitions (404 naming
                ``body.updates.<i>.id``); nothing is written.
        """
        distinct = distinct_reasoning_updates(updates)
        plan = self.repository.update_reasoning(team, distinct, overwrite=overwrite)
        if plan.missing:
            first = plan.missing[0]
            index = next(i for i, u in enumerate(updates) if u.id == first)
            raise TransitionNotFoundError(first, param=f"body.updates.{index}.id")
        return TransitionReasoningResponse(updated=len(plan.writes), unchanged=plan.unchanged)

    def annotate_one(
        self, transition_id: int, reasoning: str, *, overwrite: bool, team: str
    ) -> TransitionRecord:
        """Store one trace; returns the transition as stored afterwards.

        Raises:
            TransitionNotFoundError: not one of the team's transitions (404).
        """
        plan = self.repository.update_reasoning(
            team, {transition_id: reasoning}, overwrite=overwrite
        )
        records = self.repository.transitions_by_ids(team, [transition_id])
        if plan.missing or not records:
            raise TransitionNotFoundError(transition_id, param="transition_id")
        return records[0]
