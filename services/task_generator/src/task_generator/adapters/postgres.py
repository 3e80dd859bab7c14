"""PostgreSQL implementation of :class:`~task_generator.domain.ports.TaskRepository`.

Tables: see :mod:`task_generator.adapters.orm` (created by Alembic migration ``0001``).

ORM rows never leave this module: every method returns :class:`dreamgym.types.Task` or domain
records. Each public method runs in its own transaction; the blocking calls are made from
FastAPI's worker threads, never on the event loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Engine, Table, create_engine, func, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from dreamgym.errors import InvalidRequestError
from dreamgym.types import Split, Task, TaskOrigin
from task_generator.adapters.orm import TaskOutcomeRow, TaskRow
from task_generator.domain.curriculum import task_content_hash
from task_generator.domain.errors import TaskConflictError
from task_generator.domain.ports import TaskOutcomes, VariationKey

__all__ = ["PostgresTaskRepository", "make_engine"]

_TASKS = cast(Table, TaskRow.__table__)
_INSERT_CHUNK = 500  # rows per INSERT statement (11 parameters each, far below 65,535)
_MAX_LINEAGE_DEPTH = 100

_LINEAGE_SQL = text(
    """
    WITH RECURSIVE ancestors(task_id, parent_task_id, depth) AS (
        SELECT task_id, parent_task_id, 0 FROM tasks WHERE task_id = :task_id
        UNION ALL
        SELECT t.task_id, t.parent_task_id, a.depth + 1
        FROM tasks t JOIN ancestors a ON t.task_id = a.parent_task_id
        WHERE a.depth < :max_depth
    )
    SELECT task_id FROM ancestors WHERE depth > 0 ORDER BY depth
    """
)


def make_engine(database_url: str, *, pool_size: int = 5) -> Engine:
    """A pooled SQLAlchemy engine (``pool_pre_ping`` so restarts of PostgreSQL are survived)."""
    return create_engine(database_url, pool_size=pool_size, pool_pre_ping=True)


def _row_values(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "environment": task.environment,
        "instruction": task.instruction,
        "initial_observation": task.initial_observation,
        "initial_admissible_actions": list(task.initial_admissible_actions),
        "game_seed": task.game_seed,
        "split": task.split,
        "origin": task.origin,
        "parent_task_id": task.parent_task_id,
        "metadata": task.metadata,
        "content_hash": task_content_hash(task),
    }


def _to_task(row: TaskRow) -> Task:
    return Task(
        task_id=row.task_id,
        environment=row.environment,
        instruction=row.instruction,
        initial_observation=row.initial_observation,
        initial_admissible_actions=row.initial_admissible_actions,
        game_seed=row.game_seed,
        split=row.split,  # type: ignore[arg-type]
        origin=row.origin,  # type: ignore[arg-type]
        parent_task_id=row.parent_task_id,
        metadata=row.metadata_,
    )


def _md5(value: str) -> str:
    return hashlib.md5(value.encode("utf-8"), usedforsecurity=False).hexdigest()


class PostgresTaskRepository:
    """Tasks and outcome groups in PostgreSQL.

    >>> repository = PostgresTaskRepository(make_engine("postgresql+psycopg://.../tasks"))
    >>> repository.register_tasks([task])
    (1, 0)
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def ping(self) -> None:
        """Run ``SELECT 1`` (raises when the database is unreachable)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    # -- registration ---------------------------------------------------------------------------
    def register_tasks(self, tasks: Sequence[Task]) -> tuple[int, int]:
        """Insert new tasks in one transaction; ``(inserted, duplicates)``.

        Raises:
            InvalidRequestError: a ``parent_task_id`` names no stored or co-registered task.
            TaskConflictError: an existing ``task_id`` has different content.
        """
        # repeated ids in one request carry equal content (checked by the domain): keep one row
        rows = list({t.task_id: _row_values(t) for t in tasks}.values())
        with self._sessions.begin() as session:
            self._check_parents(session, tasks)
            inserted = self._insert_new(session, rows)
            self._check_conflicts(session, tasks, inserted)
        return len(inserted), len(tasks) - len(inserted)

    def _check_parents(self, session: Session, tasks: Sequence[Task]) -> None:
        own = {t.task_id for t in tasks}
        wanted = {
            t.parent_task_id for t in tasks if t.parent_task_id and t.parent_task_id not in own
        }
        stored = set(session.scalars(select(TaskRow.task_id).where(TaskRow.task_id.in_(wanted))))
        for i, task in enumerate(tasks):
            if task.parent_task_id in wanted - stored:
                raise InvalidRequestError(
                    f"parent_task_id '{task.parent_task_id}' of task '{task.task_id}' names no "
                    "registered task",
                    param=f"body.tasks.{i}.parent_task_id",
                )

    @staticmethod
    def _insert_new(session: Session, rows: list[dict[str, Any]]) -> set[str]:
        inserted: set[str] = set()
        for start in range(0, len(rows), _INSERT_CHUNK):
            stmt = (
                insert(_TASKS)
                .values(rows[start : start + _INSERT_CHUNK])
                .on_conflict_do_nothing(index_elements=[_TASKS.c.task_id])
                .returning(_TASKS.c.task_id)
            )
            inserted.update(session.scalars(stmt))
        return inserted

    @staticmethod
    def _check_conflicts(session: Session, tasks: Sequence[Task], inserted: set[str]) -> None:
        skipped = {t.task_id for t in tasks} - inserted
        if not skipped:
            return
        stmt = select(TaskRow.task_id, TaskRow.content_hash).where(TaskRow.task_id.in_(skipped))
        stored = dict(session.execute(stmt).tuples().all())
        for i, task in enumerate(tasks):
            if task.task_id in skipped and stored.get(task.task_id) != task_content_hash(task):
                raise TaskConflictError(task.task_id, param=f"body.tasks.{i}.task_id")

    def insert_generated(self, tasks: Sequence[Task]) -> list[str]:
        """Insert tasks whose ids are new; return the ids inserted (others were taken)."""
        if not tasks:
            return []
        with self._sessions.begin() as session:
            inserted = self._insert_new(session, [_row_values(t) for t in tasks])
        return [t.task_id for t in tasks if t.task_id in inserted]

    # -- reads ----------------------------------------------------------------------------------
    def list_tasks(
        self,
        *,
        split: Split | None,
        origin: TaskOrigin | None,
        environment: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Task], int]:
        """A page of tasks (creation order, then id) and the number matching the filters."""
        filters = _task_filters(split=split, origin=origin, environment=environment)
        page = (
            select(TaskRow)
            .where(*filters)
            .order_by(TaskRow.created_at, TaskRow.task_id)
            .limit(limit)
            .offset(offset)
        )
        with self._sessions() as session:
            count = session.scalar(select(func.count()).select_from(TaskRow).where(*filters))
            data = [_to_task(row) for row in session.scalars(page)]
        return data, int(count or 0)

    def get_tasks(self, task_ids: Sequence[str]) -> list[Task]:
        """The stored tasks among ``task_ids``, in the order given (missing ids skipped)."""
        with self._sessions() as session:
            rows = session.scalars(select(TaskRow).where(TaskRow.task_id.in_(set(task_ids))))
            by_id = {row.task_id: _to_task(row) for row in rows}
        return [by_id[t] for t in task_ids if t in by_id]

    def lineage(self, task_id: str) -> list[str]:
        """Ancestor ids, nearest first (at most 100 levels)."""
        params = {"task_id": task_id, "max_depth": _MAX_LINEAGE_DEPTH}
        with self.engine.connect() as conn:
            return list(conn.execute(_LINEAGE_SQL, params).scalars())

    def task_ids(self, *, split: Split, origin: TaskOrigin, environment: str | None) -> list[str]:
        """Sorted ids of the matching tasks."""
        filters = _task_filters(split=split, origin=origin, environment=environment)
        stmt = select(TaskRow.task_id).where(*filters).order_by(TaskRow.task_id)
        with self._sessions() as session:
            return list(session.scalars(stmt))

    def find_variations(self, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        """Existing tasks with equal ``(environment, instruction, initial_observation)``."""
        if not keys:
            return {}
        hashed = [(env, _md5(instr), _md5(obs)) for env, instr, obs in keys]
        stmt = (
            select(
                TaskRow.task_id,
                TaskRow.environment,
                TaskRow.instruction,
                TaskRow.initial_observation,
            )
            .where(
                tuple_(
                    TaskRow.environment,
                    func.md5(TaskRow.instruction),
                    func.md5(TaskRow.initial_observation),
                ).in_(hashed)
            )
            .order_by(TaskRow.task_id)
        )
        wanted = set(keys)
        found: dict[VariationKey, str] = {}
        with self._sessions() as session:
            for task_id, *key in session.execute(stmt).tuples():
                if tuple(key) in wanted:
                    found.setdefault((key[0], key[1], key[2]), task_id)
        return found

    # -- outcomes -------------------------------------------------------------------------------
    def add_outcome(
        self, task_id: str, rewards: Sequence[float], policy_version: str | None
    ) -> bool:
        """Append one outcome group; False (nothing written) for an unknown task."""
        with self._sessions.begin() as session:
            if session.get(TaskRow, task_id) is None:
                return False
            session.add(
                TaskOutcomeRow(
                    task_id=task_id,
                    rewards=[float(r) for r in rewards],
                    policy_version=policy_version,
                )
            )
        return True

    def task_outcomes(
        self,
        *,
        window: int,
        task_ids: Sequence[str] | None = None,
        environment: str | None = None,
        split: Split | None = None,
    ) -> list[TaskOutcomes]:
        """The ``window`` newest groups of each matching task that has any, by task id."""
        ranked = (
            select(
                TaskOutcomeRow.task_id,
                TaskRow.origin,
                TaskRow.split,
                TaskOutcomeRow.rewards,
                func.row_number()
                .over(partition_by=TaskOutcomeRow.task_id, order_by=TaskOutcomeRow.id.desc())
                .label("rank"),
                func.count().over(partition_by=TaskOutcomeRow.task_id).label("num_groups"),
            )
            .join(TaskRow, TaskRow.task_id == TaskOutcomeRow.task_id)
            .where(*_task_filters(split=split, environment=environment, task_ids=task_ids))
            .subquery()
        )
        stmt = (
            select(ranked).where(ranked.c.rank <= window).order_by(ranked.c.task_id, ranked.c.rank)
        )
        with self._sessions() as session:
            rows = session.execute(stmt).all()
        return _group_outcomes(rows)


def _task_filters(
    *,
    split: Split | None = None,
    origin: TaskOrigin | None = None,
    environment: str | None = None,
    task_ids: Sequence[str] | None = None,
) -> list[Any]:
    filters: list[Any] = []
    if split is not None:
        filters.append(TaskRow.split == split)
    if origin is not None:
        filters.append(TaskRow.origin == origin)
    if environment is not None:
        filters.append(TaskRow.environment == environment)
    if task_ids is not None:
        filters.append(TaskRow.task_id.in_(list(task_ids)))
    return filters


def _group_outcomes(rows: Sequence[Any]) -> list[TaskOutcomes]:
    """Fold (task_id, origin, split, rewards, rank, num_groups) rows, ordered by task and rank."""
    result: list[TaskOutcomes] = []
    for row in rows:
        if not result or result[-1].task_id != row.task_id:
            result.append(
                TaskOutcomes(
                    task_id=row.task_id,
                    origin=row.origin,
                    split=row.split,
                    recent_groups=[],
                    num_groups=int(row.num_groups),
                )
            )
        result[-1].recent_groups.append([float(r) for r in row.rewards])
    return result
