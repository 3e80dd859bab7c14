"""The storage port the curriculum logic depends on, and the records it exchanges.

Every repository method takes the caller's ``team`` first and sees only that team's tasks and
outcome groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dreamgym.types import Split, Task, TaskOrigin

__all__ = ["QuotaReachedError", "TaskOutcomes", "TaskRepository", "VariationKey"]

VariationKey = tuple[str, str, str]
"""``(environment, instruction, initial_observation)``: what makes two tasks the same variation."""


class QuotaReachedError(Exception):
    """A write would take a team past its task quota; nothing was written.

    Attributes:
        stored: tasks the team stored before the refused write.
    """

    def __init__(self, stored: int) -> None:
        super().__init__(f"team stores {stored} tasks")
        self.stored = stored


@dataclass(frozen=True)
class TaskOutcomes:
    """The recent outcome groups of one task.

    Attributes:
        task_id: the task.
        origin: ``"seed"`` or ``"generated"``.
        split: ``"train"`` or ``"eval"``.
        recent_groups: rewards of the most recent groups, newest first (at most the score
            window); each inner list is one group of G rewards.
        num_groups: all groups ever reported for the task (>= ``len(recent_groups)``).
    """

    task_id: str
    origin: TaskOrigin
    split: Split
    recent_groups: list[list[float]]
    num_groups: int


class TaskRepository(Protocol):
    """Task and outcome storage (implemented by ``adapters.postgres.PostgresTaskRepository``)."""

    def count_tasks(self, team: str) -> int:
        """Number of tasks ``team`` stores."""
        ...

    def register_tasks(
        self, team: str, tasks: Sequence[Task], *, max_tasks: int | None = None
    ) -> tuple[int, int]:
        """Store ``team``'s tasks in one transaction; return ``(inserted, duplicates)``.

        Raises:
            TaskConflictError: a task id exists with different content (nothing written).
            InvalidRequestError: a ``parent_task_id`` names no stored or co-registered task.
            QuotaReachedError: the new tasks would exceed ``max_tasks`` (nothing written).
        """
        ...

    def list_tasks(
        self,
        team: str,
        *,
        split: Split | None,
        origin: TaskOrigin | None,
        environment: str | None,
        limit: int,
        offset: int,
        parent_task_id: str | None = None,
    ) -> tuple[list[Task], int]:
        """A page of tasks ordered by creation, and the number matching the filters
        (``parent_task_id``: only the direct variations of that task)."""
        ...

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[Task]:
        """``team``'s tasks among ``task_ids``, in the order given (missing ids skipped)."""
        ...

    def lineage(self, team: str, task_id: str) -> list[str]:
        """Ancestor ids of ``task_id``, nearest first."""
        ...

    def task_ids(
        self, team: str, *, split: Split, origin: TaskOrigin, environment: str | None
    ) -> list[str]:
        """Ids of ``team``'s matching tasks, sorted (a deterministic sampling pool)."""
        ...

    def add_outcome(
        self, team: str, task_id: str, rewards: Sequence[float], policy_version: str | None
    ) -> bool:
        """Append one outcome group; False (nothing written) when ``team`` has no such task."""
        ...

    def task_outcomes(
        self,
        team: str,
        *,
        window: int,
        task_ids: Sequence[str] | None = None,
        environment: str | None = None,
        split: Split | None = None,
    ) -> list[TaskOutcomes]:
        """Outcome groups of every matching task with at least one group, sorted by task id."""
        ...

    def find_variations(self, team: str, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        """Map each key that an existing task of ``team`` already has to that task's id."""
        ...

    def insert_generated(
        self, team: str, tasks: Sequence[Task], *, max_tasks: int | None = None
    ) -> list[str]:
        """Insert generated tasks, skipping ids that exist; return the ids inserted.

        Raises:
            QuotaReachedError: the new tasks would exceed ``max_tasks`` (nothing written).
        """
        ...
