"""Fixtures of the task generator tests: a migrated real PostgreSQL database and app clients.

One database per test module (created empty, migrated once); every test starts from empty tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from dreamgym.llm.base import LLMBackend
from task_generator.adapters.migrate import upgrade_database
from task_generator.adapters.postgres import make_engine
from task_generator.main import create_app
from task_generator.settings import Settings


@pytest.fixture(scope="module")
def database_url(postgres: Any) -> Iterator[str]:
    """URL of a migrated database private to the test module."""
    name = f"tg_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    url = postgres.url(name)
    engine = make_engine(url, pool_size=1)
    upgrade_database(engine)
    engine.dispose()
    yield url
    postgres.drop_database(name)


@pytest.fixture()
def empty_database(database_url: str) -> str:
    """The module database with every table emptied."""
    engine = make_engine(database_url, pool_size=1)
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE task_outcomes, tasks RESTART IDENTITY"))
    engine.dispose()
    return database_url


@pytest.fixture()
def settings_for(empty_database: str) -> Callable[..., Settings]:
    """Factory: test settings on the emptied database, with overrides."""

    def make(**overrides: Any) -> Settings:
        fields: dict[str, Any] = {"database_url": empty_database, "json_logs": False}
        return Settings(**(fields | overrides))

    return make


@pytest.fixture()
def make_client(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., TestClient]]:
    """Factory: a started ``TestClient`` of ``create_app(settings(**overrides), backend)``."""
    clients: list[TestClient] = []

    def make(backend: LLMBackend | None = None, **overrides: Any) -> TestClient:
        client = TestClient(create_app(settings_for(**overrides), llm_backend=backend))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture()
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """A client of the app with default settings and no LLM backend."""
    return make_client()
