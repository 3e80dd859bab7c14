"""The typed clients against a live uvicorn server (real sockets, real PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from dreamgym.clients.task_generator import AsyncTaskGeneratorClient, TaskGeneratorClient
from dreamgym.errors import BackendUnavailableError, ConflictError, NotFoundError
from dreamgym.stack.ports import free_port
from dreamgym.testing.fakes import FakeLLMBackend
from task_generator.main import create_app
from task_generator.settings import Settings

from .factories import make_task, variation

pytestmark = pytest.mark.integration


def _serve(app, port: int) -> Iterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def live_url(database_url: str) -> Iterator[str]:
    fake = FakeLLMBackend(responder=lambda prompt, params: variation(f"Variant {params.seed}."))
    settings = Settings(database_url=database_url, json_logs=False, max_generated_fraction=0.5)
    yield from _serve(create_app(settings, llm_backend=fake), free_port())


@pytest.fixture(scope="module")
def live_url_without_llm(database_url: str) -> Iterator[str]:
    settings = Settings(database_url=database_url, json_logs=False)
    yield from _serve(create_app(settings), free_port())


def test_client_full_curriculum_round_trip(live_url):
    env = "client-sync"
    seeds = [make_task(i, environment=env) for i in range(4)]
    with TaskGeneratorClient(live_url, max_retries=0) as client:
        client.wait_ready(timeout_s=10)

        assert client.register_tasks(seeds).inserted == 4
        assert client.register_tasks(seeds[:1]).duplicates == 1
        batch = client.sample(4, seed=0, environment=env)
        outcome = client.report_outcomes(seeds[0].task_id, [1, 0, 1, 0], policy_version="v1")
        scores = client.scores(environment=env)
        generated = client.generate(1, 2, environment=env, seed=5)
        detail = client.get_task(generated.created[0].task_id)
        listed = client.list_tasks(origin="generated", environment=env)

    assert {t.task_id for t in batch} == {t.task_id for t in seeds}
    assert (outcome.score, outcome.num_groups) == (0.25, 1)
    assert [s.task_id for s in scores.data] == [seeds[0].task_id]
    assert generated.seed_task_ids == [seeds[0].task_id]
    assert [t.instruction for t in generated.created] == ["Variant 5.", "Variant 6."]
    assert detail.lineage == [seeds[0].task_id]
    assert listed.count == 2


def test_client_errors_map_to_typed_exceptions(live_url):
    env = "client-errors"
    with TaskGeneratorClient(live_url, max_retries=0) as client:
        client.register_tasks([make_task(0, environment=env)])

        with pytest.raises(NotFoundError) as not_found:
            client.get_task(f"{env}/train/999")
        with pytest.raises(ConflictError) as conflict:
            client.register_tasks([make_task(0, environment=env, instruction="Changed.")])

    assert not_found.value.param == "task_id"
    assert conflict.value.error_type == "task_conflict"


def test_client_generate_without_backend_fails_fast_without_retries(live_url_without_llm):
    with TaskGeneratorClient(live_url_without_llm, max_retries=3, backoff_s=1.0) as client:
        start = time.monotonic()
        with pytest.raises(BackendUnavailableError) as info:
            client.generate(1, 1)

    assert info.value.error_type == "llm_backend_not_configured"
    assert time.monotonic() - start < 1.0  # a retry would wait >= 1 s


async def test_async_client_register_sample_report(live_url):
    env = "client-async"
    seeds = [make_task(i, environment=env) for i in range(3)]
    async with AsyncTaskGeneratorClient(live_url, max_retries=0) as client:
        registered = await client.register_tasks(seeds)
        batch = await client.sample(2, seed=1, environment=env)
        outcome = await client.report_outcomes(seeds[1].task_id, [1, 1, 1, 1])
        detail = await client.get_task(seeds[1].task_id)

    assert registered.inserted == 3
    assert len(batch) == 2 and all(t.environment == env for t in batch)
    assert (outcome.score, detail.num_groups) == (0.0, 1)
