"""PostgreSQL + pgvector implementation of :class:`~replay_store.domain.ports.ReplayRepository`.

All SQL of the service lives here. Writes run in one transaction (all or nothing). Every method
takes the caller's ``team`` and every statement filters by it: a team never reads, counts, samples
or retrieves another team's rows, and an id stored by another team is simply not found.

Retrieval orders by pgvector's cosine distance ``<=>`` in two stages per query:

1. the HNSW index (``vector_cosine_ops``; ``SET LOCAL enable_seqscan = off`` so stale planner
   statistics cannot skip it) with ``SET LOCAL hnsw.ef_search = max(hnsw_ef_search, k)``. It is
   approximate, but exact while the table holds at most ``ef_search`` rows;
2. when that yields fewer than k rows, an exact scan ordered by ``(distance, id)`` (an order the
   index cannot serve). pgvector 0.6 applies filters *after* taking ``ef_search`` candidates from
   the graph, so a selective filter (``source``, ``exclude_trajectory_ids`` ...) can starve
   stage 1; stage 2 guarantees k rows whenever k rows match.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np
from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    Select,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm import QueryableAttribute, Session, selectinload
from sqlalchemy.sql.elements import ColumnElement

from dreamgym.errors import BackendUnavailableError, InvalidRequestError
from dreamgym.replay_types import (
    ReplayStats,
    RetrievalFilters,
    RetrievedTransition,
    TrajectoryList,
    TrajectorySummary,
    TransitionRecord,
)
from dreamgym.types import Trajectory
from replay_store.adapters.orm import EvictionCountRow, TrajectoryRow, TransitionRow
from replay_store.adapters.rows import (
    record_fields,
    to_trajectory,
    trajectory_row,
    transition_rows_of,
)
from replay_store.domain.annotations import ReasoningPlan, plan_reasoning_updates
from replay_store.domain.keys import PreparedTrajectory
from replay_store.domain.ports import QuotaReachedError, StoreRaceError, TrajectoryFilters
from replay_store.domain.retention import RetentionPolicy, eviction_count

__all__ = ["PostgresReplayRepository"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

_UNIQUE_VIOLATION = "23505"

# Serialises writers of one team while its quota is checked (transaction-scoped advisory lock).
_TEAM_LOCK_SQL = text(
    "SELECT pg_advisory_xact_lock(hashtextextended('replay_store.team:' || :team, 0))"
)


def _translate_db_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Map database errors to DreamGym errors.

    Values PostgreSQL cannot hold (NUL characters, out-of-range numbers) become a 422; a lost
    connection becomes a 503 the clients retry.
    """

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except DataError as exc:
            reason = str(exc.orig).splitlines()[0] if exc.orig else "invalid value"
            raise InvalidRequestError(f"a value cannot be stored or queried: {reason}") from None
        except OperationalError as exc:
            logger.warning("database unavailable: %s", exc.orig)
            raise BackendUnavailableError("database unavailable", retry_after_s=1.0) from None

    return wrapper


class PostgresReplayRepository:
    """Trajectory and transition storage in PostgreSQL with pgvector embeddings.

    Args:
        engine: a SQLAlchemy engine on a database migrated to ``head``.
        hnsw_ef_search: HNSW candidate list size for unfiltered retrieval (1..1000).
    """

    def __init__(self, engine: Engine, *, hnsw_ef_search: int = 200) -> None:
        self.engine = engine
        self.hnsw_ef_search = hnsw_ef_search

    # -- health -------------------------------------------------------------------------------
    def ping(self) -> None:
        """Run ``SELECT 1``; raises when the database is unreachable."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def embedding_dim(self) -> int:
        """Width D of the ``transitions.embedding`` column (fixed by the migration)."""
        sql = text(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'transitions'::regclass AND attname = 'embedding'"
        )
        with self.engine.connect() as conn:
            return int(conn.execute(sql).scalar_one())

    # -- writes -------------------------------------------------------------------------------
    @_translate_db_errors
    def find_existing(
        self, team: str, trajectory_ids: Sequence[str], content_hashes: Sequence[str]
    ) -> dict[str, str]:
        """Stored ``trajectory_id → content_hash`` of ``team``'s rows matching any id or hash."""
        if not trajectory_ids and not content_hashes:
            return {}
        stmt = select(TrajectoryRow.trajectory_id, TrajectoryRow.content_hash).where(
            TrajectoryRow.team == team,
            or_(
                TrajectoryRow.trajectory_id.in_(list(trajectory_ids)),
                TrajectoryRow.content_hash.in_(list(content_hashes)),
            ),
        )
        with Session(self.engine) as session:
            return dict(session.execute(stmt).tuples().all())

    @_translate_db_errors
    def count_trajectories(self, team: str) -> int:
        """Number of trajectories ``team`` stores."""
        stmt = select(func.count()).select_from(TrajectoryRow).where(TrajectoryRow.team == team)
        with Session(self.engine) as session:
            return int(session.execute(stmt).scalar_one())

    @_translate_db_errors
    def insert(
        self,
        team: str,
        trajectories: Sequence[PreparedTrajectory],
        embeddings: np.ndarray,
        *,
        max_trajectories: int | None = None,
        retention: RetentionPolicy | None = None,
    ) -> tuple[int, int]:
        """Store trajectories and their transitions for ``team`` in one transaction.

        Bulk ingest is two Core ``executemany`` inserts (psycopg 3 batches them: pipeline mode),
        one for the trajectories and one for all their transitions.

        Args:
            team: owner of the new rows.
            trajectories: trajectories ``team`` does not store yet.
            embeddings: (total transitions, D) float32, trajectory-then-step order.
            max_trajectories: the team's quota; checked under a per-team lock, so concurrent
                ingests of one team cannot overshoot it together. ``None``: no quota.
            retention: the team's table size and eviction order; victims (stored before this
                ingest) are deleted with their transitions in the same transaction, under the
                same lock. ``None``: keep everything.

        Returns:
            ``(evicted trajectories, evicted transitions)``.

        Raises:
            StoreRaceError: a concurrent writer stored one of the ids or content hashes first;
                the transaction was rolled back.
            QuotaReachedError: the insert would take the team past ``max_trajectories``;
                nothing was written.
            ValueError: ``embeddings`` has the wrong number of rows.
        """
        total = sum(len(p.trajectory.transitions) for p in trajectories)
        if embeddings.shape[0] != total:
            raise ValueError(f"expected {total} embedding rows, got {embeddings.shape[0]}")
        if not trajectories:
            return 0, 0
        transition_rows = [
            row
            for p in trajectories
            for row in transition_rows_of(p.trajectory, p.trajectory_id, team)
        ]
        for row, vector in zip(transition_rows, embeddings, strict=True):
            row["embedding"] = vector
        count = select(func.count()).select_from(TrajectoryRow).where(TrajectoryRow.team == team)
        try:
            # Core executemany: every row binds the same columns (ORM bulk inserts split the batch
            # wherever a nullable value switches between None and not-None).
            with self.engine.begin() as conn:
                evicted = (0, 0)
                if max_trajectories is not None or retention is not None:
                    conn.execute(_TEAM_LOCK_SQL, {"team": team})
                    stored = int(conn.execute(count).scalar_one())
                    if (
                        max_trajectories is not None
                        and stored + len(trajectories) > max_trajectories
                    ):
                        raise QuotaReachedError(stored)
                    if retention is not None:
                        excess = eviction_count(
                            stored, len(trajectories), retention.max_trajectories
                        )
                        evicted = _evict(conn, team, excess, retention)
                conn.execute(insert(TrajectoryRow), [trajectory_row(p, team) for p in trajectories])
                conn.execute(insert(TransitionRow), transition_rows)
            return evicted
        except IntegrityError as exc:
            if getattr(exc.orig, "sqlstate", None) != _UNIQUE_VIOLATION:
                raise
            raise StoreRaceError(str(exc.orig)) from exc

    # -- trajectories -------------------------------------------------------------------------
    @_translate_db_errors
    def get_trajectory(self, team: str, trajectory_id: str) -> Trajectory | None:
        """``team``'s trajectory with its transitions in step order, or ``None``."""
        stmt = (
            select(TrajectoryRow)
            .where(TrajectoryRow.team == team, TrajectoryRow.trajectory_id == trajectory_id)
            .options(selectinload(TrajectoryRow.transitions))
        )
        with Session(self.engine) as session:
            row = session.execute(stmt).scalar_one_or_none()
            return None if row is None else to_trajectory(row)

    @_translate_db_errors
    def list_trajectories(
        self, team: str, filters: TrajectoryFilters, limit: int, offset: int
    ) -> TrajectoryList:
        """``team``'s summaries by ``(created_at, trajectory_id)`` and the total matching count."""
        conditions: list[ColumnElement[bool]] = [TrajectoryRow.team == team]
        if filters.environment is not None:
            conditions.append(TrajectoryRow.environment == filters.environment)
        if filters.source is not None:
            conditions.append(TrajectoryRow.source == filters.source)
        if filters.policy is not None:
            conditions.append(TrajectoryRow.policy == filters.policy)
        page = (
            select(TrajectoryRow)
            .where(*conditions)
            .order_by(TrajectoryRow.created_at, TrajectoryRow.trajectory_id)
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(TrajectoryRow).where(*conditions)
        with Session(self.engine) as session:
            rows = session.execute(page).scalars().all()
            total = session.execute(count).scalar_one()
        data = [TrajectorySummary.model_validate(row, from_attributes=True) for row in rows]
        return TrajectoryList(data=data, count=total)

    # -- transitions --------------------------------------------------------------------------
    @_translate_db_errors
    def nearest(
        self, team: str, queries: np.ndarray, k: int, filters: RetrievalFilters
    ) -> list[list[RetrievedTransition]]:
        """Top-k of ``team``'s transitions by cosine similarity for each query row.

        Args:
            team: only this team's transitions are candidates.
            queries: (Q, D) float32 unit vectors.
            k: neighbours per query.
            filters: row restrictions.

        Returns:
            Q lists of ``min(k, matching rows)`` transitions, highest
            ``score = 1 - cosine distance`` first, ties by ascending id.
        """
        with Session(self.engine) as session, session.begin():
            ef_search = min(1000, max(self.hnsw_ef_search, k))
            session.execute(text(f"SET LOCAL hnsw.ef_search = {ef_search:d}"))
            session.execute(text("SET LOCAL enable_seqscan = off"))
            hits = [_nearest_rows(session, team, vector, k, filters) for vector in queries]
            ids = {row.trajectory_id for hit in hits for row, _ in hit}
            tasks = _tasks_of(session, team, ids)
            return [
                [
                    RetrievedTransition.model_validate(
                        {**record_fields(row, tasks[row.trajectory_id]), "score": 1.0 - distance}
                    )
                    for row, distance in hit
                ]
                for hit in hits
            ]

    @_translate_db_errors
    def transition_ids(self, team: str, filters: RetrievalFilters) -> list[int]:
        """Ids of all of ``team``'s transitions matching ``filters``, ascending."""
        stmt = (
            select(TransitionRow.id)
            .where(*_transition_conditions(team, filters))
            .order_by(TransitionRow.id)
        )
        with Session(self.engine) as session:
            return list(session.execute(stmt).scalars())

    @_translate_db_errors
    def transitions_by_ids(self, team: str, ids: Sequence[int]) -> list[TransitionRecord]:
        """``team``'s transitions with these ids, in the order of ``ids`` (others skipped)."""
        if not ids:
            return []
        stmt = _records_query().where(TransitionRow.team == team, TransitionRow.id.in_(list(ids)))
        with Session(self.engine) as session:
            by_id = {
                row.id: TransitionRecord.model_validate(record_fields(row, task))
                for row, task in session.execute(stmt).tuples()
            }
        return [by_id[i] for i in ids if i in by_id]

    @_translate_db_errors
    def page_transitions(
        self, team: str, filters: RetrievalFilters, after_id: int | None, limit: int
    ) -> list[TransitionRecord]:
        """Up to ``limit`` of ``team``'s transitions with ``id > after_id`` matching ``filters``."""
        stmt = _records_query().where(*_transition_conditions(team, filters))
        if after_id is not None:
            stmt = stmt.where(TransitionRow.id > after_id)
        stmt = stmt.order_by(TransitionRow.id).limit(limit)
        with Session(self.engine) as session:
            return [
                TransitionRecord.model_validate(record_fields(row, task))
                for row, task in session.execute(stmt).tuples()
            ]

    @_translate_db_errors
    def update_reasoning(
        self, team: str, updates: Mapping[int, str], *, overwrite: bool
    ) -> ReasoningPlan:
        """Store reasoning traces on ``team``'s transitions in one transaction.

        The matching rows are locked (``FOR UPDATE``) so concurrent annotators of one transition
        serialise; the plan (:func:`plan_reasoning_updates`) is computed on the locked values.
        When an id is missing nothing is written.
        """
        if not updates:
            return ReasoningPlan(writes={}, unchanged=0, missing=[])
        stmt = (
            select(TransitionRow.id, TransitionRow.reasoning)
            .where(TransitionRow.team == team, TransitionRow.id.in_(list(updates)))
            .with_for_update()
        )
        with Session(self.engine) as session, session.begin():
            current = dict(session.execute(stmt).tuples().all())
            plan = plan_reasoning_updates(updates, current, overwrite=overwrite)
            if plan.writes and not plan.missing:
                session.execute(
                    update(TransitionRow),
                    [{"id": i, "reasoning": r} for i, r in plan.writes.items()],
                )
            return plan

    def sampling_table(self, team: str, filters: RetrievalFilters) -> tuple[list[int], list[float]]:
        """Ids (ascending, i.e. oldest first) and priorities of ``team``'s matching transitions."""
        stmt = (
            select(TransitionRow.id, TransitionRow.priority)
            .where(*_transition_conditions(team, filters))
            .order_by(TransitionRow.id)
        )
        with Session(self.engine) as session:
            rows = session.execute(stmt).tuples().all()
        return [int(i) for i, _ in rows], [float(p) for _, p in rows]

    @_translate_db_errors
    def update_transition_priorities(self, team: str, priorities: dict[int, float]) -> list[int]:
        """Set priorities of ``team``'s transitions, all or nothing.

        Returns:
            Ids ``team`` does not store (nothing was written when non-empty), ascending.
        """
        return self._update_priorities(team, TransitionRow, TransitionRow.id, priorities)

    @_translate_db_errors
    def update_trajectory_priorities(self, team: str, priorities: dict[str, float]) -> list[str]:
        """Set eviction priorities of ``team``'s trajectories, all or nothing.

        Returns:
            Ids ``team`` does not store (nothing was written when non-empty), sorted.
        """
        return self._update_priorities(team, TrajectoryRow, TrajectoryRow.trajectory_id, priorities)

    def _update_priorities(
        self,
        team: str,
        table: type[TransitionRow] | type[TrajectoryRow],
        key: Any,
        priorities: dict[Any, float],
    ) -> list[Any]:
        with self.engine.begin() as conn:
            found = set(
                conn.execute(
                    select(key).where(table.team == team, key.in_(list(priorities)))
                ).scalars()
            )
            missing = sorted(set(priorities) - found)
            if missing:
                return missing
            conn.execute(
                update(table).where(table.team == team, key == bindparam("k")),
                [{"k": k, "priority": p} for k, p in priorities.items()],
            )
        return []

    # -- stats --------------------------------------------------------------------------------
    @_translate_db_errors
    def stats(self, team: str) -> ReplayStats:
        """``team``'s trajectory counts per source / environment / policy, success per policy."""
        own_trajectories = TrajectoryRow.team == team
        with Session(self.engine) as session:
            trajectories = session.execute(
                select(func.count()).select_from(TrajectoryRow).where(own_trajectories)
            )
            transitions = session.execute(
                select(func.count()).select_from(TransitionRow).where(TransitionRow.team == team)
            )
            by_policy = session.execute(
                select(
                    TrajectoryRow.policy,
                    func.count(),
                    func.avg(TrajectoryRow.success.cast(Integer)),
                )
                .where(own_trajectories)
                .group_by(TrajectoryRow.policy)
            ).all()
            evicted = session.execute(
                select(EvictionCountRow.trajectories, EvictionCountRow.transitions).where(
                    EvictionCountRow.team == team
                )
            ).one_or_none()
            return ReplayStats(
                trajectories=trajectories.scalar_one(),
                transitions=transitions.scalar_one(),
                by_source=_count_by(session, team, TrajectoryRow.source),
                by_environment=_count_by(session, team, TrajectoryRow.environment),
                by_policy={policy: n for policy, n, _ in by_policy},
                success_rate_by_policy={policy: float(rate) for policy, _, rate in by_policy},
                evicted_trajectories=int(evicted[0]) if evicted else 0,
                evicted_transitions=int(evicted[1]) if evicted else 0,
            )


# -- query helpers ----------------------------------------------------------------------------
def _evict(conn: Connection, team: str, excess: int, retention: RetentionPolicy) -> tuple[int, int]:
    """Delete ``excess`` of ``team``'s trajectories (and their transitions) in policy order.

    Runs inside the ingest transaction, under the team's lock. Returns the numbers deleted.
    """
    if excess <= 0:
        return 0, 0
    order = [TrajectoryRow.created_at, TrajectoryRow.trajectory_id]
    if retention.policy == "priority":
        order.insert(0, TrajectoryRow.priority)
    victims = list(
        conn.execute(
            select(TrajectoryRow.trajectory_id)
            .where(TrajectoryRow.team == team)
            .order_by(*order)
            .limit(excess)
        ).scalars()
    )
    transitions = conn.execute(
        delete(TransitionRow).where(
            TransitionRow.team == team, TransitionRow.trajectory_id.in_(victims)
        )
    ).rowcount
    trajectories = conn.execute(
        delete(TrajectoryRow).where(
            TrajectoryRow.team == team, TrajectoryRow.trajectory_id.in_(victims)
        )
    ).rowcount
    upsert = pg_insert(EvictionCountRow).values(
        team=team, trajectories=trajectories, transitions=transitions
    )
    conn.execute(
        upsert.on_conflict_do_update(
            index_elements=[EvictionCountRow.team],
            set_={
                "trajectories": EvictionCountRow.trajectories + upsert.excluded.trajectories,
                "transitions": EvictionCountRow.transitions + upsert.excluded.transitions,
            },
        )
    )
    logger.info(
        "evicted %d trajectories (%d transitions) of team %s by %s",
        trajectories,
        transitions,
        team,
        retention.policy,
    )
    return trajectories, transitions


def _transition_conditions(team: str, filters: RetrievalFilters) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [TransitionRow.team == team]
    if filters.environment is not None:
        conditions.append(TransitionRow.environment == filters.environment)
    if filters.source is not None:
        conditions.append(TransitionRow.source == filters.source)
    if filters.split is not None:
        conditions.append(TransitionRow.split == filters.split)
    if filters.exclude_trajectory_ids:
        conditions.append(TransitionRow.trajectory_id.not_in(filters.exclude_trajectory_ids))
    if filters.has_reasoning is not None:
        has = TransitionRow.reasoning.is_not(None)
        conditions.append(has if filters.has_reasoning else TransitionRow.reasoning.is_(None))
    return conditions


def _nearest_rows(
    session: Session, team: str, vector: np.ndarray, k: int, filters: RetrievalFilters
) -> list[tuple[TransitionRow, float]]:
    """Up to k ``(row, cosine distance)`` pairs nearest to ``vector``, by (distance, id).

    HNSW first; an exact scan when the index yields fewer than k rows (see module docstring).
    """
    distance = TransitionRow.embedding.cosine_distance(vector)
    stmt = (
        select(TransitionRow, distance.label("distance"))
        .where(*_transition_conditions(team, filters))
        .limit(k)
    )
    rows = session.execute(stmt.order_by(distance)).tuples().all()
    if len(rows) < k:
        # A second sort key keeps PostgreSQL off the HNSW index: an exact scan.
        rows = session.execute(stmt.order_by(distance, TransitionRow.id)).tuples().all()
    return sorted(((row, float(d)) for row, d in rows), key=lambda hit: (hit[1], hit[0].id))


def _records_query() -> Select[TransitionRow, str]:
    return select(TransitionRow, TrajectoryRow.task).join(
        TrajectoryRow,
        (TrajectoryRow.team == TransitionRow.team)
        & (TrajectoryRow.trajectory_id == TransitionRow.trajectory_id),
    )


def _tasks_of(session: Session, team: str, trajectory_ids: set[str]) -> dict[str, str]:
    if not trajectory_ids:
        return {}
    stmt = select(TrajectoryRow.trajectory_id, TrajectoryRow.task).where(
        TrajectoryRow.team == team, TrajectoryRow.trajectory_id.in_(sorted(trajectory_ids))
    )
    return dict(session.execute(stmt).tuples().all())


def _count_by(session: Session, team: str, column: QueryableAttribute[str]) -> dict[str, int]:
    stmt = select(column, func.count()).where(TrajectoryRow.team == team).group_by(column)
    return dict(session.execute(stmt).tuples().all())
