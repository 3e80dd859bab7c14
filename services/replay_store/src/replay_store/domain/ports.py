"""Protocols the replay service depends on; adapters implement them."""

from __future__ import annotations

from collections.abc import Sequence
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
from replay_store.domain.keys import PreparedTrajectory

__all__ = ["Embedder", "ReplayRepository", "StoreRaceError", "TrajectoryFilters"]


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


@dataclass(frozen=True)
class TrajectoryFilters:
    """Filters of ``GET /v1/trajectories``; ``None`` means "any"."""

    environment: str | None = None
    source: str | None = None
    policy: str | None = None


class ReplayRepository(Protocol):
    """Storage of trajectories and embedded transitions."""

    def find_existing(
        self, trajectory_ids: Sequence[str], content_hashes: Sequence[str]
    ) -> dict[str, str]:
        """Stored ``trajectory_id → content_hash`` for rows matching any given id or hash."""
        ...

    def insert(self, trajectories: Sequence[PreparedTrajectory], embeddings: np.ndarray) -> None:
        """Store all trajectories and their transitions in one transaction.

        Args:
            trajectories: new trajectories.
            embeddings: (total transitions, D) float32, in trajectory then step order.

        Raises:
            StoreRaceError: an id or content hash was stored concurrently; nothing was written.
        """
        ...

    def get_trajectory(self, trajectory_id: str) -> Trajectory | None:
        """The stored trajectory, or ``None``."""
        ...

    def list_trajectories(
        self, filters: TrajectoryFilters, limit: int, offset: int
    ) -> TrajectoryList:
        """Trajectory summaries, oldest first, and the total count matching ``filters``."""
        ...

    def nearest(
        self, queries: np.ndarray, k: int, filters: RetrievalFilters
    ) -> list[list[RetrievedTransition]]:
        """Top-k transitions by cosine similarity for each row of ``queries`` (Q, D).

        Must return ``min(k, matching rows)`` transitions per query, most similar first.
        """
        ...

    def transition_ids(self, filters: RetrievalFilters) -> list[int]:
        """Ids of all transitions matching ``filters``, ascending."""
        ...

    def transitions_by_ids(self, ids: Sequence[int]) -> list[TransitionRecord]:
        """Transitions with these ids, in the order of ``ids``."""
        ...

    def page_transitions(
        self, filters: RetrievalFilters, after_id: int | None, limit: int
    ) -> list[TransitionRecord]:
        """Up to ``limit`` transitions with ``id > after_id``, ascending id."""
        ...

    def stats(self) -> ReplayStats:
        """Table statistics."""
        ...
