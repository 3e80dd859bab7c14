"""Retention of a team's replay table: at most ``max_trajectories``, evicting on ingest (pure).

A trajectory and its transitions are evicted together (one transaction with the insert, so no
orphan transitions and no moment where the table is over its size). Victims are chosen among the
trajectories stored *before* the ingest:

- ``fifo``: oldest first (``created_at``, then ``trajectory_id``);
- ``priority``: lowest ``priority`` first, ties oldest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["EvictionPolicy", "RetentionPolicy", "eviction_count"]

EvictionPolicy = Literal["fifo", "priority"]


@dataclass(frozen=True)
class RetentionPolicy:
    """Most trajectories a team keeps and the order in which extra ones are evicted.

    Attributes:
        max_trajectories: >= 1.
        policy: ``fifo`` or ``priority``.
    """

    max_trajectories: int
    policy: EvictionPolicy = "fifo"

    def __post_init__(self) -> None:
        if self.max_trajectories < 1:
            raise ValueError(f"max_trajectories must be >= 1, got {self.max_trajectories}")
        if self.policy not in ("fifo", "priority"):
            raise ValueError(f"policy must be 'fifo' or 'priority', got {self.policy!r}")


def eviction_count(stored: int, adding: int, max_trajectories: int) -> int:
    """Trajectories to evict so that ``stored + adding - evicted <= max_trajectories``.

    Args:
        stored: trajectories the team stores before the ingest (>= 0).
        adding: new trajectories of the ingest (>= 0, at most ``max_trajectories``).
        max_trajectories: the table's size limit (>= 1).

    Returns:
        ``max(0, stored + adding - max_trajectories)`` (never more than ``stored``).

    Raises:
        ValueError: negative counts, or ``adding > max_trajectories`` (the batch alone does not
            fit; the service refuses such a batch with a 422 first).
    """
    if stored < 0 or adding < 0:
        raise ValueError(f"counts must be >= 0, got stored={stored}, adding={adding}")
    if adding > max_trajectories:
        raise ValueError(f"adding={adding} exceeds max_trajectories={max_trajectories}")
    return max(0, stored + adding - max_trajectories)
