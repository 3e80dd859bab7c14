"""Shared pytest fixtures: a real PostgreSQL (+pgvector) server for integration tests.

The server is started once per test session from the ``pgserver`` wheel's binaries on a free
loopback port (see :mod:`dreamgym.stack.postgres`); each test module that needs a database
creates its own with :func:`fresh_database`. The key registry of teams and API keys
(:mod:`dreamgym.auth`) is one database per session (:func:`auth_database_url`); tests give their
teams unique names (:func:`make_team`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamgym.stack.ports import free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A running :class:`~dreamgym.stack.postgres.LocalPostgres` for the whole session."""
    from dreamgym.stack.postgres import LocalPostgres

    # Not under pytest's tmp dirs: those are 0700 and the unprivileged server user (PostgreSQL
    # refuses to run as root) must reach the data directory.
    base = Path(os.environ.get("DREAMGYM_TEST_PG_DIR") or tempfile.mkdtemp(prefix="dreamgym-pg-"))
    base.chmod(0o755)
    pg = LocalPostgres(base / "data", port=free_port()).start()
    yield pg
    pg.stop()
    if not os.environ.get("DREAMGYM_TEST_PG_DIR"):
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A running :class:`~dreamgym.stack.redis.LocalRedis` (a real ``redis-server``)."""
    from dreamgym.stack.redis import LocalRedis

    server = LocalRedis(tmp_path_factory.mktemp("redis"), port=free_port()).start()
    yield server
    server.stop()


@pytest.fixture()
def redis_url(redis_server: object) -> Iterator[str]:
    """URL of an empty Redis database (flushed before and after the test)."""
    import redis

    url = redis_server.url(0)  # type: ignore[attr-defined]
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture()
def fresh_database(postgres: object) -> Iterator[Callable[..., str]]:
    """Factory: ``fresh_database(extensions=("vector",))`` → SQLAlchemy URL of a new empty DB."""
    created: list[str] = []

    def make(extensions: tuple[str, ...] = ("vector",)) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        postgres.create_database(name, extensions=extensions)  # type: ignore[attr-defined]
        created.append(name)
        return postgres.url(name)  # type: ignore[attr-defined, no-any-return]

    yield make
    for name in created:
        postgres.drop_database(name)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def auth_database_url(postgres: object) -> Iterator[str]:
    """URL of the session's key-registry database (tables created)."""
    from dreamgym.auth.registry import KeyRegistry

    name = f"auth_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)  # type: ignore[attr-defined]
    url: str = postgres.url(name)  # type: ignore[attr-defined]
    registry = KeyRegistry.from_url(url, pool_size=1)
    registry.create_schema()
    registry.close()
    yield url
    postgres.drop_database(name)  # type: ignore[attr-defined]


@pytest.fixture()
def key_registry(auth_database_url: str) -> Iterator[object]:
    """A :class:`~dreamgym.auth.registry.KeyRegistry` on the session's registry database."""
    from dreamgym.auth.registry import KeyRegistry

    registry = KeyRegistry.from_url(auth_database_url, pool_size=2)
    yield registry
    registry.close()


@pytest.fixture()
def make_team(key_registry: object) -> Callable[[str], tuple[str, str]]:
    """Factory: ``make_team("lab")`` → ``(team, key)``: a new uniquely named team and a key."""

    def make(prefix: str = "team") -> tuple[str, str]:
        team = f"{prefix}-{uuid.uuid4().hex[:8]}"
        key_registry.create_team(team)  # type: ignore[attr-defined]
        return team, key_registry.create_key(team).key  # type: ignore[attr-defined]

    return make
