"""API tests (real PostgreSQL): prioritized and recency sampling with probabilities, priority
updates, retention/eviction (fifo and priority) at ingest, Idempotency-Key on writes."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.services.replay_store.conftest import as_json, build_trajectory

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def database_url(postgres):
    name = f"rs_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    yield postgres.url(name)
    postgres.drop_database(name)


def _client(database_url, **overrides):
    from replay_store.main import create_app
    from replay_store.settings import Settings

    settings = Settings(
        database_url=database_url,
        embedding_model="hash",
        embedding_dim=384,
        json_logs=False,
        log_level="WARNING",
        **overrides,
    )
    return TestClient(create_app(settings))


@pytest.fixture(scope="module")
def apps(database_url):
    with (
        _client(database_url) as plain,
        _client(database_url, max_trajectories=3, eviction_policy="fifo") as fifo,
        _client(database_url, max_trajectories=3, eviction_policy="priority") as by_priority,
    ):
        yield {"plain": plain, "fifo": fifo, "priority": by_priority}


@pytest.fixture()
def clients(apps):
    engine = apps["plain"].app.state.repository.engine
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE trajectories, transitions, replay_evictions, idempotency_keys "
                "RESTART IDENTITY CASCADE"
            )
        )
    return apps


def _trajectory(i: int):
    return build_trajectory(actions=(f"say {i}", "take coin"), trajectory_id=f"ep-{i}")


def _ingest(client, *indices, **headers):
    response = client.post(
        "/v1/trajectories",
        json={"trajectories": [as_json(_trajectory(i)) for i in indices]},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _sample(client, **body):
    response = client.post("/v1/transitions:sample", json=body)
    assert response.status_code == 200, response.text
    return response.json()


# -- sampling -----------------------------------------------------------------------------------
def test_prioritized_sampling_reports_p_alpha_probabilities(clients):
    client = clients["plain"]
    _ingest(client, 0, 1)  # transitions 1..4
    response = client.post(
        "/v1/transitions:update-priorities",
        json={"priorities": [{"id": 1, "priority": 1.0}, {"id": 2, "priority": 3.0}]},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"updated": 2}

    sample = _sample(client, n=4, seed=3, strategy="prioritized", alpha=2.0)
    # weights p^2: (1, 9, 1, 1) / 12 (ids 3 and 4 keep the default priority 1)
    expected = {1: 1 / 12, 2: 9 / 12, 3: 1 / 12, 4: 1 / 12}
    got = {t["id"]: p for t, p in zip(sample["transitions"], sample["probabilities"], strict=True)}
    assert got == pytest.approx(expected)
    assert sample["table_size"] == 4


def test_prioritized_first_draw_prefers_high_priority(clients):
    client = clients["plain"]
    _ingest(client, 0, 1)
    client.post(
        "/v1/transitions:update-priorities", json={"priorities": [{"id": 3, "priority": 50.0}]}
    )
    firsts = [
        _sample(client, n=1, seed=s, strategy="prioritized")["transitions"][0]["id"]
        for s in range(40)
    ]
    assert firsts.count(3) >= 30  # P = 50/53 per draw


def test_recency_sampling_probabilities_halve_per_half_life(clients):
    client = clients["plain"]
    _ingest(client, 0, 1)  # ids 1..4, 4 newest
    sample = _sample(client, n=4, seed=0, strategy="recency", half_life=1.0)
    got = {t["id"]: p for t, p in zip(sample["transitions"], sample["probabilities"], strict=True)}
    assert got == pytest.approx({1: 1 / 15, 2: 2 / 15, 3: 4 / 15, 4: 8 / 15})


def test_sampling_strategy_and_priorities_are_validated(clients):
    client = clients["plain"]
    bad = client.post("/v1/transitions:sample", json={"n": 1, "strategy": "lifo"})
    assert bad.status_code == 422 and "strategy" in bad.json()["error"]["param"]
    zero = client.post(
        "/v1/transitions:update-priorities", json={"priorities": [{"id": 1, "priority": 0}]}
    )
    assert zero.status_code == 422 and "priority" in zero.json()["error"]["param"]


def test_priority_update_of_unknown_or_other_teams_id_is_404_and_writes_nothing(clients):
    client = clients["plain"]
    _ingest(client, 0)  # ids 1, 2
    response = client.post(
        "/v1/transitions:update-priorities",
        json={"priorities": [{"id": 1, "priority": 9.0}, {"id": 99, "priority": 2.0}]},
    )
    assert response.status_code == 404
    assert response.json()["error"]["param"] == "body.priorities"
    sample = _sample(client, n=2, seed=0, strategy="prioritized")
    assert sample["probabilities"] == [pytest.approx(0.5)] * 2  # id 1 kept priority 1


# -- retention ----------------------------------------------------------------------------------
def _stored_ids(client):
    listing = client.get("/v1/trajectories").json()
    return sorted(t["trajectory_id"] for t in listing["data"])


def _orphans(client):
    with client.app.state.repository.engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(*) FROM transitions t LEFT JOIN trajectories j "
                "ON j.team = t.team AND j.trajectory_id = t.trajectory_id "
                "WHERE j.trajectory_id IS NULL"
            )
        ).scalar_one()


def test_fifo_evicts_oldest_trajectories_with_their_transitions(clients):
    client = clients["fifo"]
    _ingest(client, 0)
    _ingest(client, 1)
    _ingest(client, 2)
    result = _ingest(client, 3, 4)

    assert result["inserted"] == 2
    assert (result["evicted_trajectories"], result["evicted_transitions"]) == (2, 4)
    assert _stored_ids(client) == ["ep-2", "ep-3", "ep-4"]
    assert _orphans(client) == 0
    stats = client.get("/v1/stats").json()
    assert (stats["trajectories"], stats["transitions"]) == (3, 6)
    assert (stats["evicted_trajectories"], stats["evicted_transitions"]) == (2, 4)


def test_priority_policy_evicts_lowest_priority_then_oldest(clients):
    client = clients["priority"]
    _ingest(client, 0)
    _ingest(client, 1)
    _ingest(client, 2)
    response = client.post(
        "/v1/trajectories:update-priorities",
        json={"priorities": [{"trajectory_id": "ep-0", "priority": 5.0}]},
    )
    assert response.status_code == 200, response.text

    first = _ingest(client, 3)  # evicts ep-1 (priority 1, oldest of the lowest)
    second = _ingest(client, 4)  # evicts ep-2
    assert first["evicted_trajectories"] == second["evicted_trajectories"] == 1
    assert _stored_ids(client) == ["ep-0", "ep-3", "ep-4"]
    assert _orphans(client) == 0


def test_batch_larger_than_table_is_422_and_stores_nothing(clients):
    client = clients["fifo"]
    response = client.post(
        "/v1/trajectories", json={"trajectories": [as_json(_trajectory(i)) for i in range(4)]}
    )
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "body.trajectories"
    assert _stored_ids(client) == []


def test_eviction_is_per_team(clients):
    client = clients["fifo"]
    replay = client.app.state.replay
    replay.ingest([_trajectory(i) for i in (0, 1, 2)], team="other")
    assert _ingest(client, 3, 4, 5)["evicted_trajectories"] == 0  # the other team's rows
    assert _ingest(client, 6)["evicted_trajectories"] == 1  # do not count against this one

    assert _stored_ids(client) == ["ep-4", "ep-5", "ep-6"]
    assert replay.stats(team="other").trajectories == 3
    assert replay.stats(team="other").evicted_trajectories == 0


# -- idempotency keys ---------------------------------------------------------------------------
def test_repeat_with_same_key_returns_stored_response_without_second_write(clients):
    client = clients["fifo"]
    _ingest(client, 0, 1, 2)
    first = _ingest(client, 3, **{"Idempotency-Key": "k-1"})
    assert first["evicted_trajectories"] == 1
    again = _ingest(client, 3, **{"Idempotency-Key": "k-1"})

    assert again == first  # the stored response, evictions included: nothing evicted twice
    assert client.get("/v1/stats").json()["evicted_trajectories"] == 1
    assert _stored_ids(client) == ["ep-1", "ep-2", "ep-3"]


def test_same_key_with_different_body_is_422_naming_the_header(clients):
    client = clients["plain"]
    _ingest(client, 0, **{"Idempotency-Key": "k-2"})
    response = client.post(
        "/v1/trajectories",
        json={"trajectories": [as_json(_trajectory(1))]},
        headers={"Idempotency-Key": "k-2"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "header.Idempotency-Key"
    assert _stored_ids(client) == ["ep-0"]


def test_keys_are_per_team_and_failed_writes_free_the_key(clients):
    client = clients["plain"]
    failed = client.post(
        "/v1/transitions:update-priorities",
        json={"priorities": [{"id": 1, "priority": 2.0}]},
        headers={"Idempotency-Key": "k-3"},
    )
    assert failed.status_code == 404  # nothing stored yet
    _ingest(client, 0)
    retried = client.post(
        "/v1/transitions:update-priorities",
        json={"priorities": [{"id": 1, "priority": 2.0}]},
        headers={"Idempotency-Key": "k-3"},
    )
    assert retried.status_code == 200, retried.text
    with client.app.state.repository.engine.connect() as conn:
        rows = conn.execute(text("SELECT team, status_code FROM idempotency_keys")).all()
    assert rows == [("default", 200)]


def test_malformed_key_is_422(clients):
    response = clients["plain"].post(
        "/v1/trajectories",
        json={"trajectories": [as_json(_trajectory(0))]},
        headers={"Idempotency-Key": "has space"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "header.Idempotency-Key"
