"""Protocols the replay service depends on; adapters implement them.

Every repository method takes the caller's ``team`` first and sees only that team's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from dreamgym.replay_types import (
    ReplayStats,
    RetrievalFilters,
    RetrievedTransition,
    TrajectoryList,
    TransitionRecord,
)
from dreamgym.types import Trajectory
from replay_store.domain.annotations import ReasoningPlan
from replay_store.domain.keys import PreparedTrajectory
from replay_store.domain.retention import RetentionPolicy

__all__ = [
    "Embedder",
    "QuotaReachedError",
    "ReplayRepository",
    "StoreRaceError",
    "TrajectoryFilters",
]


@runtime_checkable
class Embedder(Protocol):
    """Semantic encoder φ: texts → unit vectors (arXiv 2511.03773, Eq. 4)."""

    @property
    def dim(self) -> int:
        """Embedding width D."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed a batch.

        Args:
            texts: n strings (n may be 0).

        Returns:
            (n, D) float32, each row L2-normalised.
        """
        ...


class StoreRaceError(Exception):
    """A concurrent writer stored one of the trajectories first; the insert was rolled back."""


class QuotaReachedError(Exception):
    """An insert would take a team past its trajectory quota; nothing was written.

    Attributes:
        stored: trajectories the team stored when the insert was refused.
    """

    def __init__(self, stored: int) -> None:
        super().__init__(f"team stores {stored} trajectories")
        self.stored = stored


@dataclass(frozen=True)
class TrajectoryFilters:
    """Filters of ``GET /v1/trajectories``; ``None`` means "any"."""

    environment: str | None = None
    source: str | None = None
    policy: str | None = None


class ReplayRepository(Protocol):
    """Storage of trajectories and embedded transitions."""

    def find_existing(
        self, team: str, trajectory_ids: Sequence[str], content_hashes: Sequence[str]
    ) -> dict[str, str]:
        """Stored ``trajectory_id → content_hash`` of ``team``'s rows matching any id or hash."""
        ...

    def count_trajectories(self, team: str) -> int:
        """Number of trajectories ``team`` stores."""
        ...

    def insert(
        self,
        team: str,
        trajectories: Sequence[PreparedTrajectory],
        embeddings: np.ndarray,
        *,
        max_trajectories: int | None = None,
        retention: RetentionPolicy | None = None,
    ) -> tuple[int, int]:
        """Store all trajectories and their transitions for ``team`` in one transaction.

        Args:
            team: owner of the new rows.
            trajectories: new trajectories.
            embeddings: (total transitions, D) float32, in trajectory then step order.
            max_trajectories: the team's quota (checked atomically with the insert), or ``None``.
            retention: evict the team's stored trajectories (with their transitions) beyond
                ``retention.max_trajectories`` in the same transaction, or ``None``.

        Returns:
            ``(evicted trajectories, evicted transitions)``.

        Raises:
            StoreRaceError: an id or content hash was stored concurrently; nothing was written.
            QuotaReachedError: the insert would exceed ``max_trajectories``; nothing was written.
        """
        ...

    def get_trajectory(self, team: str, trajectory_id: str) -> Trajectory | None:
        """``team``'s trajectory with this id, or ``None`` (also when another team owns it)."""
        ...

    def list_trajectories(
        self, team: str, filters: TrajectoryFilters, limit: int, offset: int
    ) -> TrajectoryList:
        """``team``'s trajectory summaries, oldest first, and the total matching ``filters``."""
        ...

    def nearest(
        self, team: str, queries: np.ndarray, k: int, filters: RetrievalFilters
    ) -> list[list[RetrievedTransition]]:
        """Top-k of ``team``'s transitions by cosine similarity per row of ``queries`` (Q, D).

        Must return ``min(k, matching rows)`` transitions per query, most similar first.
        """
        ...

    def transition_ids(self, team: str, filters: RetrievalFilters) -> list[int]:
        """Ids of all of ``team``'s transitions matching ``filters``, ascending."""
        ...

    def sampling_table(self, team: str, filters: RetrievalFilters) -> tuple[list[int], list[float]]:
        """Ids (ascending: oldest first) and priorities of ``team``'s matching transitions."""
        ...

    def update_transition_priorities(self, team: str, priorities: dict[int, float]) -> list[int]:
        """Set transition priorities all or nothing; returns ids ``team`` lacks (then no write)."""
        ...

    def update_trajectory_priorities(self, team: str, priorities: dict[str, float]) -> list[str]:
        """Set trajectory priorities all or nothing; returns ids ``team`` lacks (then no write)."""
        ...

    def transitions_by_ids(self, team: str, ids: Sequence[int]) -> list[TransitionRecord]:
        """``team``'s transitions with these ids, in the order of ``ids``."""
        ...

    def page_transitions(
        self, team: str, filters: RetrievalFilters, after_id: int | None, limit: int
    ) -> list[TransitionRecord]:
        """Up to ``limit`` of ``team``'s transitions with ``id > after_id``, ascending id."""
        ...

    def stats(self, team: str) -> ReplayStats:
        """``team``'s table statistics."""
        ...

    def update_reasoning(
        self, team: str, updates: Mapping[int, str], *, overwrite: bool
    ) -> ReasoningPlan:
        """Store reasoning traces on ``team``'s transitions in one transaction.

        The rows are locked, planned with
        :func:`~replay_store.domain.annotations.plan_reasoning_updates` and written; when any
        id is missing nothing is written (the plan is returned with ``missing`` set).
        """
        ...
