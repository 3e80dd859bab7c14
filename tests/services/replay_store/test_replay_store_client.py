"""ReplayStoreClient / AsyncReplayStoreClient against a live uvicorn server on a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from sqlalchemy import text

from dreamgym.clients.replay_store import AsyncReplayStoreClient, ReplayStoreClient
from dreamgym.errors import ConflictError, InvalidRequestError, NotFoundError
from dreamgym.replay_types import RetrievalQuery, RetrievedTransition

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def live_server(replay_settings: Any) -> Iterator[tuple[str, Any]]:
    """(base URL, app) of the replay store served by uvicorn in a background thread."""
    from replay_store.main import create_app

    app = create_app(replay_settings)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", app
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture()
def base_url(live_server: tuple[str, Any]) -> str:
    """Live server URL with empty tables."""
    url, app = live_server
    with app.state.repository.engine.begin() as conn:
        conn.execute(text("TRUNCATE trajectories, transitions RESTART IDENTITY CASCADE"))
    return url


@pytest.fixture()
def replay(base_url: str) -> Iterator[ReplayStoreClient]:
    with ReplayStoreClient(base_url, max_retries=0, timeout_s=30) as client:
        client.wait_ready(timeout_s=10)
        yield client


def test_client_ingest_then_get_trajectory_round_trips(replay, make_trajectory):
    trajectory = make_trajectory(trajectory_id="ep-1", actions=("go north", "take coin"))

    result = replay.ingest([trajectory, trajectory])
    stored = replay.get_trajectory("ep-1")

    assert (result.inserted, result.duplicates, result.trajectory_ids) == (1, 1, ["ep-1", "ep-1"])
    assert stored == trajectory


def test_client_retrieve_sample_iterate_and_stats(replay, make_trajectory):
    replay.ingest([make_trajectory(actions=(f"say {i}", "take coin")) for i in range(4)])
    query = RetrievalQuery(
        task="pick up the coin", observation="You see a coin.", action="take coin"
    )

    results = replay.retrieve([query, query.model_dump()], k=3, source="real")
    sample = replay.sample(5, seed=7)
    records = list(replay.iter_transitions(page_size=3, environment="twx-coin"))
    stats = replay.stats()

    assert len(results) == 2 and all(isinstance(h, RetrievedTransition) for h in results[0])
    assert [h.score for h in results[0]] == sorted((h.score for h in results[0]), reverse=True)
    assert [t.id for t in sample.transitions] == [
        t.id for t in replay.sample(5, seed=7).transitions
    ]
    assert sample.table_size == 8
    assert sorted(r.id for r in records) == list(range(1, 9))
    assert stats["trajectories"] == 4 and stats["transitions"] == 8
    assert replay.list_trajectories(limit=2).count == 4


def test_client_unknown_trajectory_raises_not_found_error(replay):
    with pytest.raises(NotFoundError) as info:
        replay.get_trajectory("no/such id")

    assert info.value.status_code == 404
    assert info.value.param == "trajectory_id"
    assert "no/such id" in info.value.message


def test_client_conflicting_id_raises_conflict_error(replay, make_trajectory):
    replay.ingest([make_trajectory(trajectory_id="ep-9")])

    with pytest.raises(ConflictError, match="ep-9"):
        replay.ingest([make_trajectory(trajectory_id="ep-9", won=False)])


def test_client_k_above_server_limit_raises_invalid_request(replay):
    query = RetrievalQuery(task="t", observation="o", action="a")

    with pytest.raises(InvalidRequestError) as info:
        replay.retrieve([query], k=21)

    assert info.value.param == "body.k"


async def test_async_client_ingest_retrieve_iterate_and_not_found(base_url, make_trajectory):
    async with AsyncReplayStoreClient(base_url, max_retries=0, timeout_s=30) as replay:
        result = await replay.ingest([make_trajectory(), make_trajectory(actions=("look",))])
        hits = await replay.retrieve(
            [RetrievalQuery(task="pick up the coin", observation="room", action="look")], k=2
        )
        records = [r async for r in replay.iter_transitions(page_size=2)]
        stored = await replay.get_trajectory(result.trajectory_ids[1])
        with pytest.raises(NotFoundError):
            await replay.get_trajectory("missing")

    assert result.inserted == 2
    assert hits[0][0].action == "look"
    assert len(records) == 3
    assert stored.transitions[0].action == "look"


def test_client_annotate_then_iterate_without_reasoning(replay, make_trajectory):
    replay.ingest([make_trajectory(actions=(f"say {i}", "take coin")) for i in range(2)])

    first = replay.annotate([(1, "saying 0 changes nothing"), (2, "taking the coin wins")])
    again = replay.annotate([(1, "saying 0 changes nothing")])
    one = replay.annotate_transition(3, "saying 1 changes nothing")
    left = [r.id for r in replay.iter_transitions(has_reasoning=False)]
    annotated = {r.id: r.reasoning for r in replay.iter_transitions(has_reasoning=True)}

    assert (first.updated, first.unchanged) == (2, 0)
    assert (again.updated, again.unchanged) == (0, 1)
    assert one.reasoning == "saying 1 changes nothing"
    assert left == [4]
    assert annotated == {
        1: "saying 0 changes nothing",
        2: "taking the coin wins",
        3: "saying 1 changes nothing",
    }
    with pytest.raises(NotFoundError):
        replay.annotate([(99, "missing")])


async def test_async_client_annotate(base_url, make_trajectory):
    async with AsyncReplayStoreClient(base_url, max_retries=0, timeout_s=30) as replay:
        await replay.ingest([make_trajectory()])
        result = await replay.annotate([(2, "the coin is taken")])
        records = [r async for r in replay.iter_transitions(has_reasoning=True)]

    assert result.updated == 1
    assert [r.id for r in records] == [2]
