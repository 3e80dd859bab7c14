"""Fixtures of the experience model tests: settings and started app clients with fakes.

The app runs its real lifespan (episode store, micro-batcher, training runner) with an injected
:class:`~dreamgym.testing.fakes.FakeLLMBackend` and an in-memory retriever; nothing touches the
network or loads weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dreamgym.llm.base import LLMBackend
from dreamgym.testing.fakes import FakeLLMBackend
from experience_model.domain.simulator import Retriever
from experience_model.main import create_app
from experience_model.settings import Settings

from .factories import scripted_responder


@pytest.fixture()
def settings_for(tmp_path: Path) -> Callable[..., Settings]:
    """Factory: test settings (fake backend, no replay store, data under ``tmp_path``)."""

    def make(**overrides: Any) -> Settings:
        fields: dict[str, Any] = {
            "backend": "fake",
            "data_dir": tmp_path / "data",
            "json_logs": False,
            "log_level": "WARNING",
            "replay_store_url": None,
            "parse_retries": 1,
            "max_batch_wait_ms": 1.0,
            "retrieval_k": 2,
            "history_length": 2,
        }
        return Settings(**(fields | overrides))

    return make


@pytest.fixture()
def make_client(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., TestClient]]:
    """Factory: a started ``TestClient`` of ``create_app(settings, llm, retriever)``."""
    clients: list[TestClient] = []

    def make(
        llm: LLMBackend | None = None,
        retriever: Retriever | None = None,
        *,
        raise_server_exceptions: bool = True,
        **overrides: Any,
    ) -> TestClient:
        llm = llm or FakeLLMBackend(responder=scripted_responder)
        app = create_app(settings_for(**overrides), backend=llm, retriever=retriever)
        client = TestClient(app, raise_server_exceptions=raise_server_exceptions)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture()
def fake_llm() -> FakeLLMBackend:
    """A fake experience model answering with :func:`factories.scripted_responder`."""
    return FakeLLMBackend(responder=scripted_responder)


@pytest.fixture()
def client(make_client: Callable[..., TestClient], fake_llm: FakeLLMBackend) -> TestClient:
    """A started app on ``fake_llm`` without retrieval."""
    return make_client(fake_llm)
