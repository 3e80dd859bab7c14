"""``python -m replay_store.migrate`` (the compose ``migrate`` service and the k8s migration Job)
against a real PostgreSQL + pgvector: from empty to head, idempotent, and a clear failure."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from replay_store.adapters.migrate import MIGRATIONS_DIR
from replay_store.migrate import current_revision

pytestmark = pytest.mark.integration


def _run_migrate(database_url: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REPLAY_STORE_DATABASE_URL": database_url, **extra_env}
    return subprocess.run(
        [sys.executable, "-m", "replay_store.migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _head_revision() -> str:
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None
    return head


def test_migrates_an_empty_database_to_head_and_is_idempotent(
    fresh_database: Callable[..., str],
) -> None:
    url = fresh_database()
    engine = create_engine(url)
    try:
        assert current_revision(engine) is None

        first = _run_migrate(url, REPLAY_STORE_EMBEDDING_DIM="384")
        assert first.returncode == 0, first.stderr
        assert current_revision(engine) == _head_revision()
        tables = set(inspect(engine).get_table_names())
        assert {"trajectories", "transitions", "alembic_version"} <= tables
        assert _head_revision() in first.stderr  # the logged target revision

        second = _run_migrate(url)
        assert second.returncode == 0, second.stderr
        assert current_revision(engine) == _head_revision()
    finally:
        engine.dispose()


def test_unreachable_database_exits_1_with_the_error_logged() -> None:
    closed = "postgresql+psycopg://nobody@127.0.0.1:1/replay_store"
    result = _run_migrate(closed)
    assert result.returncode == 1
    assert "replay store migration failed" in result.stderr
    assert "OperationalError" in result.stderr


def test_invalid_settings_exit_2_naming_the_field() -> None:
    result = _run_migrate(
        "postgresql+psycopg://nobody@127.0.0.1:1/x",
        REPLAY_STORE_EMBEDDING_MODEL="minilm",
        REPLAY_STORE_EMBEDDING_DIM="12",
    )
    assert result.returncode == 2
    assert "embedding_dim" in result.stderr
