"""Integration test: semantic retrieval through the service with the real MiniLM embedder."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration, pytest.mark.model]

TASK = "Find the coin and take it."


def test_minilm_retrieval_ranks_take_coin_above_move_north(fresh_database, make_trajectory):
    from replay_store.main import create_app
    from replay_store.settings import Settings

    settings = Settings(
        database_url=fresh_database(),
        embedding_model="minilm",
        json_logs=False,
        log_level="WARNING",
    )
    rooms = [
        "You are in a dark corridor.",
        "You see a table in the kitchen.",
        "You see a door to the north.",
        "You see a sofa.",
    ]
    trajectories = [
        make_trajectory(
            task=TASK, actions=("take coin",), observations=("There is a coin here.", "Taken.")
        ),
        *(
            make_trajectory(task=TASK, actions=("move north",), observations=(room, "You moved."))
            for room in rooms
        ),
    ]
    query = {"task": TASK, "observation": "You see a coin.", "action": "take coin"}

    with TestClient(create_app(settings)) as client:
        ingested = client.post(
            "/v1/trajectories",
            json={"trajectories": [t.model_dump(mode="json") for t in trajectories]},
        )
        hits = client.post("/v1/retrieve", json={"queries": [query], "k": 5}).json()["results"][0]

    assert ingested.json()["inserted"] == 5
    assert [h["action"] for h in hits] == ["take coin"] + ["move north"] * 4
    assert hits[0]["observation"] == "There is a coin here."
    assert hits[0]["score"] > hits[1]["score"] + 0.05
