"""An in-memory TaskRepository for domain tests (no conflict or parent checks), per team."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dreamgym.types import Task
from task_generator.domain.ports import QuotaReachedError, TaskOutcomes, VariationKey

TEAM = "lab-a"
"""The team the constructor's tasks belong to (and the team domain tests act as)."""


class InMemoryTaskRepository:
    """Dict-backed implementation of ``task_generator.domain.ports.TaskRepository``.

    ``tasks`` and ``groups`` are :data:`TEAM`'s; other teams live in ``by_team``.
    """

    def __init__(self, tasks: Sequence[Task] = ()) -> None:
        self.by_team: dict[str, dict[str, Task]] = defaultdict(dict)
        self.groups_by_team: dict[str, dict[str, list[list[float]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.tasks = self.by_team[TEAM]
        self.tasks.update({t.task_id: t for t in tasks})
        self.groups = self.groups_by_team[TEAM]

    def count_tasks(self, team: str) -> int:
        return len(self.by_team[team])

    def register_tasks(self, team, tasks: Sequence[Task], *, max_tasks=None) -> tuple[int, int]:
        store = self.by_team[team]
        new = {t.task_id: t for t in tasks if t.task_id not in store}
        if max_tasks is not None and new and len(store) + len(new) > max_tasks:
            raise QuotaReachedError(len(store))
        store.update(new)
        return len(new), len(tasks) - len(new)

    def list_tasks(self, team, *, split, origin, environment, limit, offset, parent_task_id=None):
        matching = [
            t
            for t in self.by_team[team].values()
            if _matches(t, split, origin, environment)
            and (parent_task_id is None or t.parent_task_id == parent_task_id)
        ]
        return matching[offset : offset + limit], len(matching)

    def get_tasks(self, team, task_ids: Sequence[str]) -> list[Task]:
        store = self.by_team[team]
        return [store[t] for t in task_ids if t in store]

    def lineage(self, team, task_id: str) -> list[str]:
        store = self.by_team[team]
        chain, parent = [], store[task_id].parent_task_id
        while parent is not None:
            chain.append(parent)
            parent = store[parent].parent_task_id
        return chain

    def task_ids(self, team, *, split, origin, environment) -> list[str]:
        return sorted(
            t.task_id
            for t in self.by_team[team].values()
            if _matches(t, split, origin, environment)
        )

    def add_outcome(self, team, task_id, rewards, policy_version) -> bool:
        if task_id not in self.by_team[team]:
            return False
        self.groups_by_team[team][task_id].append(list(rewards))
        return True

    def task_outcomes(self, team, *, window, task_ids=None, environment=None, split=None):
        result = []
        store, all_groups = self.by_team[team], self.groups_by_team[team]
        for task_id in sorted(all_groups):
            task = store[task_id]
            if task_ids is not None and task_id not in task_ids:
                continue
            if not _matches(task, split, None, environment):
                continue
            groups = all_groups[task_id]
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

    def find_variations(self, team, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        index = {
            (t.environment, t.instruction, t.initial_observation): t.task_id
            for t in sorted(self.by_team[team].values(), key=lambda t: t.task_id, reverse=True)
        }
        return {k: index[k] for k in keys if k in index}

    def insert_generated(self, team, tasks: Sequence[Task], *, max_tasks=None) -> list[str]:
        store = self.by_team[team]
        inserted = [t.task_id for t in tasks if t.task_id not in store]
        if max_tasks is not None and inserted and len(store) + len(inserted) > max_tasks:
            raise QuotaReachedError(len(store))
        store.update({t.task_id: t for t in tasks if t.task_id in inserted})
        return inserted


def _matches(task: Task, split, origin, environment) -> bool:
    return (
        (split is None or task.split == split)
        and (origin is None or task.origin == origin)
        and (environment is None or task.environment == environment)
    )
