"""An in-memory TaskRepository for domain tests (no conflict or parent checks)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dreamgym.types import Task
from task_generator.domain.ports import TaskOutcomes, VariationKey


class InMemoryTaskRepository:
    """Dict-backed implementation of ``task_generator.domain.ports.TaskRepository``."""

    def __init__(self, tasks: Sequence[Task] = ()) -> None:
        self.tasks: dict[str, Task] = {t.task_id: t for t in tasks}
        self.groups: dict[str, list[list[float]]] = defaultdict(list)

    def register_tasks(self, tasks: Sequence[Task]) -> tuple[int, int]:
        new = [t for t in tasks if t.task_id not in self.tasks]
        self.tasks.update({t.task_id: t for t in new})
        return len(new), len(tasks) - len(new)

    def list_tasks(self, *, split, origin, environment, limit, offset):
        matching = [t for t in self.tasks.values() if _matches(t, split, origin, environment)]
        return matching[offset : offset + limit], len(matching)

    def get_tasks(self, task_ids: Sequence[str]) -> list[Task]:
        return [self.tasks[t] for t in task_ids if t in self.tasks]

    def lineage(self, task_id: str) -> list[str]:
        chain, parent = [], self.tasks[task_id].parent_task_id
        while parent is not None:
            chain.append(parent)
            parent = self.tasks[parent].parent_task_id
        return chain

    def task_ids(self, *, split, origin, environment) -> list[str]:
        return sorted(
            t.task_id for t in self.tasks.values() if _matches(t, split, origin, environment)
        )

    def add_outcome(self, task_id, rewards, policy_version) -> bool:
        if task_id not in self.tasks:
            return False
        self.groups[task_id].append(list(rewards))
        return True

    def task_outcomes(self, *, window, task_ids=None, environment=None, split=None):
        result = []
        for task_id in sorted(self.groups):
            task = self.tasks[task_id]
            if task_ids is not None and task_id not in task_ids:
                continue
            if not _matches(task, split, None, environment):
                continue
            groups = self.groups[task_id]
            result.append(
                TaskOutcomes(
                    task_id=task_id,
                    origin=task.origin,
                    split=task.split,
                    recent_groups=groups[::-1][:window],
                    num_groups=len(groups),
                )
            )
        return result

    def find_variations(self, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        index = {
            (t.environment, t.instruction, t.initial_observation): t.task_id
            for t in sorted(self.tasks.values(), key=lambda t: t.task_id, reverse=True)
        }
        return {k: index[k] for k in keys if k in index}

    def insert_generated(self, tasks: Sequence[Task]) -> list[str]:
        inserted = [t.task_id for t in tasks if t.task_id not in self.tasks]
        self.tasks.update({t.task_id: t for t in tasks if t.task_id in inserted})
        return inserted


def _matches(task: Task, split, origin, environment) -> bool:
    return (
        (split is None or task.split == split)
        and (origin is None or task.origin == origin)
        and (environment is None or task.environment == environment)
    )
