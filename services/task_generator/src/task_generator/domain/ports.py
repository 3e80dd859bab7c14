"""The storage port the curriculum logic depends on, and the records it exchanges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dreamgym.types import Split, Task, TaskOrigin

__all__ = ["TaskOutcomes", "TaskRepository", "VariationKey"]

VariationKey = tuple[str, str, str]
"""``(environment, instruction, initial_observation)``: what makes two tasks the same variation."""


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

    def register_tasks(self, tasks: Sequence[Task]) -> tuple[int, int]:
        """Store tasks in one transaction; return ``(inserted, duplicates)``.

        Raises:
            TaskConflictError: a task id exists with different content (nothing written).
            InvalidRequestError: a ``parent_task_id`` names no stored or co-registered task.
        """
        ...

    def list_tasks(
        self,
        *,
        split: Split | None,
        origin: TaskOrigin | None,
        environment: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Task], int]:
        """A page of tasks ordered by creation, and the number matching the filters."""
        ...

    def get_tasks(self, task_ids: Sequence[str]) -> list[Task]:
        """The stored tasks among ``task_ids``, in the order given (missing ids skipped)."""
        ...

    def lineage(self, task_id: str) -> list[str]:
        """Ancestor ids of ``task_id``, nearest first."""
        ...

    def task_ids(self, *, split: Split, origin: TaskOrigin, environment: str | None) -> list[str]:
        """Ids of the matching tasks, sorted (a deterministic sampling pool)."""
        ...

    def add_outcome(
        self, task_id: str, rewards: Sequence[float], policy_version: str | None
    ) -> bool:
        """Append one outcome group; False (nothing written) when the task does not exist."""
        ...

    def task_outcomes(
        self,
        *,
        window: int,
        task_ids: Sequence[str] | None = None,
        environment: str | None = None,
        split: Split | None = None,
    ) -> list[TaskOutcomes]:
        """Outcome groups of every matching task with at least one group, sorted by task id."""
        ...

    def find_variations(self, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        """Map each key that an existing task already has to that task's id."""
        ...

    def insert_generated(self, tasks: Sequence[Task]) -> list[str]:
        """Insert generated tasks, skipping ids that exist; return the ids inserted."""
        ...
