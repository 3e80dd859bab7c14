"""The replay service: ingest, retrieval, sampling, export and stats over the ports.

Every method is synchronous and blocking (database and embedding work); routes call it from
FastAPI's threadpool (plain ``def`` handlers), never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from dreamgym.replay_types import (
    IngestResult,
    ReplayStats,
    RetrievalFilters,
    RetrievalQuery,
    RetrievedTransition,
    TrajectoryList,
    TransitionPage,
    TransitionSampleResponse,
)
from dreamgym.types import Trajectory
from replay_store.domain.errors import LimitExceededError, TrajectoryNotFoundError
from replay_store.domain.ingest import plan_against_store, plan_batch
from replay_store.domain.keys import PreparedTrajectory, retrieval_key, trajectory_retrieval_keys
from replay_store.domain.ports import Embedder, ReplayRepository, StoreRaceError, TrajectoryFilters
from replay_store.domain.sampling import uniform_sample_indices

__all__ = ["ReplayService"]

logger = logging.getLogger(__name__)

_INGEST_ATTEMPTS = 3


class ReplayService:
    """Replay buffer operations over a repository and an embedder.

    Args:
        repository: trajectory/transition storage.
        embedder: the encoder φ used for stored keys and queries alike.
        max_k: largest ``k`` for retrieval.
        max_batch_trajectories: most trajectories per ingest.

    >>> service = ReplayService(repository, HashEmbedder(384))  # doctest: +SKIP
    >>> service.ingest([trajectory]).inserted  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        repository: ReplayRepository,
        embedder: Embedder,
        *,
        max_k: int = 50,
        max_batch_trajectories: int = 1000,
    ) -> None:
        self.repository = repository
        self.embedder = embedder
        self.max_k = max_k
        self.max_batch_trajectories = max_batch_trajectories

    # -- writes -------------------------------------------------------------------------------
    def ingest(self, trajectories: Sequence[Trajectory]) -> IngestResult:
        """Store trajectories idempotently, all or nothing.

        Embeddings of all new transitions are computed in one batch before the (short) write
        transaction. A concurrent writer that stores one of the trajectories first makes the
        transaction roll back; the batch is then re-planned against the store.

        Raises:
            LimitExceededError: more than ``max_batch_trajectories`` trajectories.
            TrajectoryConflictError: an id is stored or repeated with different content.
        """
        if len(trajectories) > self.max_batch_trajectories:
            raise LimitExceededError(
                "body.trajectories", len(trajectories), self.max_batch_trajectories
            )
        batch = plan_batch(trajectories)
        cache: dict[str, np.ndarray] = {}
        for attempt in range(1, _INGEST_ATTEMPTS + 1):
            stored = self.repository.find_existing(
                [p.trajectory_id for p in batch.unique], [p.content_hash for p in batch.unique]
            )
            plan = plan_against_store(batch, stored)
            try:
                self.repository.insert(plan.new, self._embed_trajectories(plan.new, cache))
                break
            except StoreRaceError:
                if attempt == _INGEST_ATTEMPTS:
                    raise
                logger.info("ingest raced a concurrent writer; re-planning (attempt %d)", attempt)
        ids = [plan.stored_ids[j] for j in batch.refs]
        return IngestResult(
            inserted=len(plan.new), duplicates=len(ids) - len(plan.new), trajectory_ids=ids
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
        self, queries: Sequence[RetrievalQuery], k: int, filters: RetrievalFilters
    ) -> list[list[RetrievedTransition]]:
        """Top-k stored transitions per query by cosine similarity of φ (arXiv 2511.03773 Eq. 4).

        All queries are embedded in one batch; each gets ``min(k, matching rows)`` transitions,
        most similar first.

        Raises:
            LimitExceededError: ``k > max_k``.
        """
        if k > self.max_k:
            raise LimitExceededError("body.k", k, self.max_k)
        vectors = self.embedder.embed(
            [retrieval_key(q.task, q.observation, q.action) for q in queries]
        )
        return self.repository.nearest(vectors, k, filters)

    def sample(
        self, n: int, filters: RetrievalFilters, seed: int | None = None
    ) -> TransitionSampleResponse:
        """Uniform sample of ``min(n, N)`` transitions without replacement, in draw order.

        Deterministic for a given ``seed`` while the filtered table is unchanged.
        """
        ids = self.repository.transition_ids(filters)
        drawn = [ids[i] for i in uniform_sample_indices(len(ids), n, seed)]
        transitions = self.repository.transitions_by_ids(drawn)
        probability = 1.0 / len(ids) if ids else 0.0
        return TransitionSampleResponse(
            transitions=transitions,
            probabilities=[probability] * len(transitions),
            table_size=len(ids),
        )

    def page_transitions(
        self, filters: RetrievalFilters, after_id: int | None, limit: int
    ) -> TransitionPage:
        """One keyset page of transitions ordered by id; ``next_after_id`` is None at the end."""
        rows = self.repository.page_transitions(filters, after_id, limit + 1)
        has_more = len(rows) > limit
        rows = rows[:limit]
        return TransitionPage(data=rows, next_after_id=rows[-1].id if has_more else None)

    def get_trajectory(self, trajectory_id: str) -> Trajectory:
        """The stored trajectory.

        Raises:
            TrajectoryNotFoundError: no trajectory has this id.
        """
        trajectory = self.repository.get_trajectory(trajectory_id)
        if trajectory is None:
            raise TrajectoryNotFoundError(trajectory_id)
        return trajectory

    def list_trajectories(
        self, filters: TrajectoryFilters, limit: int, offset: int
    ) -> TrajectoryList:
        """Trajectory summaries (oldest first) and the total count matching ``filters``."""
        return self.repository.list_trajectories(filters, limit, offset)

    def stats(self) -> ReplayStats:
        """Counts per source / environment / policy and success rate per policy."""
        return self.repository.stats()
