"""PostgreSQL implementation of :class:`~task_generator.domain.ports.TaskRepository`.

Tables: see :mod:`task_generator.adapters.orm` (created by Alembic migrations ``0001-2``).

ORM rows never leave this module: every method returns :class:`dreamgym.types.Task` or domain
records. Each public method runs in its own transaction; the blocking calls are made from
FastAPI's worker threads, never on the event loop. Every method takes the caller's ``team`` first
and every statement filters by it: another team's task is simply not found.
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
from task_generator.domain.ports import QuotaReachedError, TaskOutcomes, VariationKey

__all__ = ["PostgresTaskRepository", "make_engine"]

_TASKS = cast(Table, TaskRow.__table__)
_INSERT_CHUNK = 500  # rows per INSERT statement (11 parameters each, far below 65,535)
_MAX_LINEAGE_DEPTH = 100

_LINEAGE_SQL = text(
    """
    WITH RECURSIVE ancestors(task_id, parent_task_id, depth) AS (
        SELECT task_id, parent_task_id, 0 FROM tasks WHERE team = :team AND task_id = :task_id
        UNION ALL
        SELECT t.task_id, t.parent_task_id, a.depth + 1
        FROM tasks t JOIN ancestors a ON t.team = :team AND t.task_id = a.parent_task_id
        WHERE a.depth < :max_depth
    )
    SELECT task_id FROM ancestors WHERE depth > 0 ORDER BY depth
    """
)

# Serialises writers of one team while its quota is checked (transaction-scoped advisory lock).
_TEAM_LOCK_SQL = text(
    "SELECT pg_advisory_xact_lock(hashtextextended('task_generator.team:' || :team, 0))"
)


def make_engine(database_url: str, *, pool_size: int = 5) -> Engine:
    """A pooled SQLAlchemy engine (``pool_pre_ping`` so restarts of PostgreSQL are survived)."""
    return create_engine(database_url, pool_size=pool_size, pool_pre_ping=True)


def _row_values(task: Task, team: str) -> dict[str, Any]:
    return {
        "team": team,
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
    >>> repository.register_tasks("lab-a", [task])
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
    def count_tasks(self, team: str) -> int:
        """Number of tasks ``team`` stores."""
        stmt = select(func.count()).select_from(TaskRow).where(TaskRow.team == team)
        with self._sessions() as session:
            return int(session.scalar(stmt) or 0)

    def register_tasks(
        self, team: str, tasks: Sequence[Task], *, max_tasks: int | None = None
    ) -> tuple[int, int]:
        """Insert ``team``'s new tasks in one transaction; ``(inserted, duplicates)``.

        Args:
            team: owner of the tasks; ids, parents and conflicts are resolved within it.
            tasks: the tasks.
            max_tasks: the team's quota, checked under a per-team lock after the insert (only
                new tasks count); ``None``: unlimited.

        Raises:
            InvalidRequestError: a ``parent_task_id`` names no stored or co-registered task of
                the team.
            TaskConflictError: an existing ``task_id`` of the team has different content.
            QuotaReachedError: the new tasks would exceed ``max_tasks``; nothing was written.
        """
        # repeated ids in one request carry equal content (checked by the domain): keep one row
        rows = list({t.task_id: _row_values(t, team) for t in tasks}.values())
        with self._sessions.begin() as session:
            if max_tasks is not None:
                session.execute(_TEAM_LOCK_SQL, {"team": team})
            self._check_parents(session, team, tasks)
            inserted = self._insert_new(session, rows)
            self._check_conflicts(session, team, tasks, inserted)
            self._check_quota(session, team, len(inserted), max_tasks)
        return len(inserted), len(tasks) - len(inserted)

    @staticmethod
    def _check_quota(session: Session, team: str, inserted: int, max_tasks: int | None) -> None:
        """Raise (rolling the transaction back) when the team now stores more than allowed."""
        if max_tasks is None or inserted == 0:
            return
        count = select(func.count()).select_from(TaskRow).where(TaskRow.team == team)
        stored = int(session.scalar(count) or 0)
        if stored > max_tasks:
            raise QuotaReachedError(stored - inserted)

    def _check_parents(self, session: Session, team: str, tasks: Sequence[Task]) -> None:
        own = {t.task_id for t in tasks}
        wanted = {
            t.parent_task_id for t in tasks if t.parent_task_id and t.parent_task_id not in own
        }
        stmt = select(TaskRow.task_id).where(TaskRow.team == team, TaskRow.task_id.in_(wanted))
        stored = set(session.scalars(stmt))
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
                .on_conflict_do_nothing(index_elements=[_TASKS.c.team, _TASKS.c.task_id])
                .returning(_TASKS.c.task_id)
            )
            inserted.update(session.scalars(stmt))
        return inserted

    @staticmethod
    def _check_conflicts(
        session: Session, team: str, tasks: Sequence[Task], inserted: set[str]
    ) -> None:
        skipped = {t.task_id for t in tasks} - inserted
        if not skipped:
            return
        stmt = select(TaskRow.task_id, TaskRow.content_hash).where(
            TaskRow.team == team, TaskRow.task_id.in_(skipped)
        )
        stored = dict(session.execute(stmt).tuples().all())
        for i, task in enumerate(tasks):
            if task.task_id in skipped and stored.get(task.task_id) != task_content_hash(task):
                raise TaskConflictError(task.task_id, param=f"body.tasks.{i}.task_id")

    def insert_generated(
        self, team: str, tasks: Sequence[Task], *, max_tasks: int | None = None
    ) -> list[str]:
        """Insert ``team``'s tasks whose ids are new; return the ids inserted (others were taken).

        Raises:
            QuotaReachedError: the new tasks would exceed ``max_tasks``; nothing was written.
        """
        if not tasks:
            return []
        with self._sessions.begin() as session:
            if max_tasks is not None:
                session.execute(_TEAM_LOCK_SQL, {"team": team})
            inserted = self._insert_new(session, [_row_values(t, team) for t in tasks])
            self._check_quota(session, team, len(inserted), max_tasks)
        return [t.task_id for t in tasks if t.task_id in inserted]

    # -- reads ----------------------------------------------------------------------------------
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
        """A page of ``team``'s tasks (creation order, then id) and the number matching."""
        filters = _task_filters(
            team,
            split=split,
            origin=origin,
            environment=environment,
            parent_task_id=parent_task_id,
        )
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

    def get_tasks(self, team: str, task_ids: Sequence[str]) -> list[Task]:
        """``team``'s tasks among ``task_ids``, in the order given (missing ids skipped)."""
        stmt = select(TaskRow).where(TaskRow.team == team, TaskRow.task_id.in_(set(task_ids)))
        with self._sessions() as session:
            rows = session.scalars(stmt)
            by_id = {row.task_id: _to_task(row) for row in rows}
        return [by_id[t] for t in task_ids if t in by_id]

    def lineage(self, team: str, task_id: str) -> list[str]:
        """Ancestor ids within ``team``, nearest first (at most 100 levels)."""
        params = {"team": team, "task_id": task_id, "max_depth": _MAX_LINEAGE_DEPTH}
        with self.engine.connect() as conn:
            return list(conn.execute(_LINEAGE_SQL, params).scalars())

    def task_ids(
        self, team: str, *, split: Split, origin: TaskOrigin, environment: str | None
    ) -> list[str]:
        """Sorted ids of ``team``'s matching tasks."""
        filters = _task_filters(team, split=split, origin=origin, environment=environment)
        stmt = select(TaskRow.task_id).where(*filters).order_by(TaskRow.task_id)
        with self._sessions() as session:
            return list(session.scalars(stmt))

    def find_variations(self, team: str, keys: Sequence[VariationKey]) -> dict[VariationKey, str]:
        """``team``'s tasks with equal ``(environment, instruction, initial_observation)``."""
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
                TaskRow.team == team,
                tuple_(
                    TaskRow.environment,
                    func.md5(TaskRow.instruction),
                    func.md5(TaskRow.initial_observation),
                ).in_(hashed),
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
        self, team: str, task_id: str, rewards: Sequence[float], policy_version: str | None
    ) -> bool:
        """Append one outcome group; False (nothing written) when ``team`` has no such task."""
        with self._sessions.begin() as session:
            if session.get(TaskRow, (team, task_id)) is None:
                return False
            session.add(
                TaskOutcomeRow(
                    team=team,
                    task_id=task_id,
                    rewards=[float(r) for r in rewards],
                    policy_version=policy_version,
                )
            )
        return True

    def task_outcomes(
        self,
        team: str,
        *,
        window: int,
        task_ids: Sequence[str] | None = None,
        environment: str | None = None,
        split: Split | None = None,
    ) -> list[TaskOutcomes]:
        """The ``window`` newest groups of each of ``team``'s matching tasks that has any."""
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
            .join(
                TaskRow,
                (TaskRow.team == TaskOutcomeRow.team) & (TaskRow.task_id == TaskOutcomeRow.task_id),
            )
            .where(*_task_filters(team, split=split, environment=environment, task_ids=task_ids))
            .subquery()
        )
        stmt = (
            select(ranked).where(ranked.c.rank <= window).order_by(ranked.c.task_id, ranked.c.rank)
        )
        with self._sessions() as session:
            rows = session.execute(stmt).all()
        return _group_outcomes(rows)


def _task_filters(
    team: str,
    *,
    split: Split | None = None,
    origin: TaskOrigin | None = None,
    environment: str | None = None,
    task_ids: Sequence[str] | None = None,
    parent_task_id: str | None = None,
) -> list[Any]:
    filters: list[Any] = [TaskRow.team == team]
    if parent_task_id is not None:
        filters.append(TaskRow.parent_task_id == parent_task_id)
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
