"""Migration 0003 (priorities, eviction counters, idempotency keys) on a real PostgreSQL:
empty → head, head → 0002 → head, rows stored before it get priority 1.0."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text

from tests.services.replay_store.adapters.test_migration_0002 import _insert_trajectory, _migrate

pytestmark = pytest.mark.integration


def _columns(engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def test_0003_up_down_up_and_backfills_priority(fresh_database):
    engine = create_engine(fresh_database())
    try:
        _migrate(engine, "0002")
        assert "priority" not in _columns(engine, "transitions")
        with engine.begin() as conn:
            _insert_trajectory(conn, "ep-1", team="lab-a")

        _migrate(engine, "head")
        tables = set(inspect(engine).get_table_names())
        assert {"replay_evictions", "idempotency_keys"} <= tables
        with engine.begin() as conn:
            priorities = conn.execute(
                text(
                    "SELECT (SELECT priority FROM trajectories), (SELECT priority FROM transitions)"
                )
            ).one()
            assert tuple(priorities) == (1.0, 1.0)
            with (
                pytest.raises(Exception, match="ck_transitions_priority_positive"),
                conn.begin_nested(),
            ):
                conn.execute(text("UPDATE transitions SET priority = 0"))

        _migrate(engine, "0002", down=True)
        tables = set(inspect(engine).get_table_names())
        assert not {"replay_evictions", "idempotency_keys"} & tables
        assert "priority" not in _columns(engine, "trajectories")

        _migrate(engine, "head")
        assert "priority" in _columns(engine, "transitions")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0003"
    finally:
        engine.dispose()


def test_empty_database_to_head_has_hnsw_index(fresh_database):
    engine = create_engine(fresh_database())
    try:
        _migrate(engine, "head")
        with engine.connect() as conn:
            indexdefs = conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE tablename = 'transitions'")
            ).scalars()
            assert any("USING hnsw" in d and "vector_cosine_ops" in d for d in indexdefs)
    finally:
        engine.dispose()
