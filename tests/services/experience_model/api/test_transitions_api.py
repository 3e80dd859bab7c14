"""API tests of stateless prediction (POST /v1/transitions:predict)."""

from __future__ import annotations

import pytest

from ..factories import GARBAGE, WIN, FakeRetriever, make_example
from .helpers import assert_envelope


def predict_query(action: str = "move north", **overrides):
    return {
        "task": "Find the coin.",
        "environment": "twx-coin",
        "observation": "You are in the kitchen.",
        "admissible_actions": ["move north", WIN],
        "action": action,
        **overrides,
    }


def test_predict_returns_one_prediction_per_query_in_order(client):
    response = client.post(
        "/v1/transitions:predict",
        json={"queries": [predict_query("move north"), predict_query(WIN)]},
    )

    assert response.status_code == 200, response.text
    first, second = response.json()["predictions"]
    assert first["observation"] == "You did move north." and first["terminated"] is False
    assert second["terminated"] is True and second["reward"] == 1.0
    assert first["error"] is None and second["error"] is None


def test_predict_malformed_query_reports_error_without_failing_batch(make_client):
    client = make_client(parse_retries=2)

    response = client.post(
        "/v1/transitions:predict",
        json={
            "queries": [predict_query("move north"), predict_query(GARBAGE), predict_query("look")]
        },
    )

    assert response.status_code == 200, response.text
    ok1, bad, ok2 = response.json()["predictions"]
    assert ok1["observation"] == "You did move north."
    assert ok2["observation"] == "You did look."
    assert bad["observation"] is None and bad["reward"] is None
    assert bad["error"]["type"] == "malformed_transition"
    assert bad["error"]["code"] == 502
    assert bad["attempts"] == 3


def test_predict_history_and_seed_reach_the_model(client, fake_llm):
    history = [{"observation": "A dusty hall.", "action": "move west"}]

    client.post(
        "/v1/transitions:predict", json={"queries": [predict_query(history=history, seed=17)]}
    )

    assert "A dusty hall. | move west" in fake_llm.prompts[0]
    assert fake_llm.params[0].seed == 17


def test_predict_uses_retrieval(make_client, fake_llm):
    retriever = FakeRetriever([make_example(next_observation="ECHOED HALL")])
    client = make_client(fake_llm, retriever)

    response = client.post("/v1/transitions:predict", json={"queries": [predict_query()]})

    assert response.status_code == 200
    assert "ECHOED HALL" in fake_llm.prompts[0]
    assert retriever.calls[0][0][0].environment == "twx-coin"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        pytest.param({"queries": []}, "body.queries", id="no-queries"),
        pytest.param(
            {"queries": [predict_query(action="")]}, "body.queries.0.action", id="empty-action"
        ),
        pytest.param(
            {"queries": [predict_query(seed=-1)]}, "body.queries.0.seed", id="negative-seed"
        ),
        pytest.param(
            {"queries": [{"action": "look", "observation": "o"}]},
            "body.queries.0.task",
            id="missing-task",
        ),
    ],
)
def test_predict_invalid_body_is_422_naming_field(client, body, param):
    response = client.post("/v1/transitions:predict", json=body)

    assert_envelope(response, 422, "invalid_request", param)


def test_predict_goes_through_the_batcher_in_bounded_batches(make_client, fake_llm):
    client = make_client(fake_llm, max_batch_size=4)

    response = client.post(
        "/v1/transitions:predict", json={"queries": [predict_query(f"go {i}") for i in range(10)]}
    )

    assert response.status_code == 200, response.text
    assert [p["observation"] for p in response.json()["predictions"]] == [
        f"You did go {i}." for i in range(10)
    ]
    assert [len(b) for b in fake_llm.batches] == [4, 4, 2]  # never more than max_batch_size


def test_predict_more_queries_than_the_queue_holds_is_429_and_queues_nothing(make_client, fake_llm):
    client = make_client(fake_llm, max_queue=5)

    response = client.post(
        "/v1/transitions:predict", json={"queries": [predict_query() for _ in range(6)]}
    )

    assert response.status_code == 429, response.text
    assert response.json()["error"]["type"] == "capacity_reached"
    assert "Retry-After" in response.headers
    assert fake_llm.batches == []
    ok = client.post("/v1/transitions:predict", json={"queries": [predict_query()] * 5})
    assert ok.status_code == 200
