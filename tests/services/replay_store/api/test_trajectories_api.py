"""API tests of /v1/trajectories on a real PostgreSQL database with the hash embedder."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.integration


def _body(*trajectories, exclude_none=True):
    return {
        "trajectories": [t.model_dump(mode="json", exclude_none=exclude_none) for t in trajectories]
    }


def _stored_counts(client):
    stats = client.get("/v1/stats").json()
    return stats["trajectories"], stats["transitions"]


def test_ingest_new_trajectory_returns_content_derived_id(client, make_trajectory):
    response = client.post("/v1/trajectories", json=_body(make_trajectory()))

    assert response.status_code == 200
    body = response.json()
    assert (body["inserted"], body["duplicates"]) == (1, 0)
    assert re.fullmatch(r"traj-[0-9a-f]{64}", body["trajectory_ids"][0])


def test_ingest_same_trajectory_twice_stores_it_once(client, make_trajectory):
    first = client.post("/v1/trajectories", json=_body(make_trajectory())).json()

    second = client.post("/v1/trajectories", json=_body(make_trajectory())).json()

    assert (second["inserted"], second["duplicates"]) == (0, 1)
    assert second["trajectory_ids"] == first["trajectory_ids"]
    assert _stored_counts(client) == (1, 2)


def test_ingest_same_content_under_new_id_is_duplicate_of_stored_id(client, make_trajectory):
    client.post("/v1/trajectories", json=_body(make_trajectory(trajectory_id="ep-1")))

    response = client.post("/v1/trajectories", json=_body(make_trajectory(trajectory_id="ep-2")))

    assert response.json() == {
        "inserted": 0,
        "duplicates": 1,
        "trajectory_ids": ["ep-1"],
        "evicted_trajectories": 0,
        "evicted_transitions": 0,
    }
    assert _stored_counts(client) == (1, 2)


def test_ingest_known_id_with_different_content_returns_409_and_stores_nothing(
    client, make_trajectory
):
    client.post("/v1/trajectories", json=_body(make_trajectory(trajectory_id="ep-1")))
    fresh = make_trajectory(actions=("look",))
    conflicting = make_trajectory(trajectory_id="ep-1", won=False)

    response = client.post("/v1/trajectories", json=_body(fresh, conflicting))

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["type"] == "trajectory_conflict"
    assert error["param"] == "body.trajectories.1.trajectory_id"
    assert "trajectory_id 'ep-1'" in error["message"]
    assert _stored_counts(client) == (1, 2)


def _missing_reward(wire):
    del wire["transitions"][1]["reward"]


def _extra_field(wire):
    wire["transitions"][0]["bogus"] = 1


def _wrong_step(wire):
    wire["transitions"][1]["step"] = 5


def _nul_character(wire):
    wire["transitions"][0]["action"] = "take\u0000coin"


@pytest.mark.parametrize(
    ("corrupt", "param", "message_part"),
    [
        (_missing_reward, "body.trajectories.1.transitions.1.reward", "Field required"),
        (_extra_field, "body.trajectories.1.transitions.0.bogus", "Extra inputs"),
        (_wrong_step, "body.trajectories.1", "transitions[1].step must be 1, got 5"),
        (_nul_character, "body.trajectories.1.transitions.0.action", "NUL"),
    ],
)
def test_ingest_malformed_trajectory_returns_422_naming_field_and_stores_nothing(
    client, make_trajectory, corrupt, param, message_part
):
    body = _body(make_trajectory(), make_trajectory(actions=("look", "take coin")))
    corrupt(body["trajectories"][1])

    response = client.post("/v1/trajectories", json=body)

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == param
    assert param in error["message"] and message_part in error["message"]
    assert _stored_counts(client) == (0, 0)


def test_ingest_more_than_max_batch_returns_422(client, make_trajectory):
    batch = [make_trajectory(actions=(f"say {i}",)) for i in range(51)]

    response = client.post("/v1/trajectories", json=_body(*batch))

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "body.trajectories"
    assert _stored_counts(client) == (0, 0)


def test_read_trajectory_returns_what_was_ingested(client, make_trajectory):
    trajectory = make_trajectory(trajectory_id="ep/7?x", actions=("open door", "go east", "look"))
    client.post("/v1/trajectories", json=_body(trajectory))

    response = client.get("/v1/trajectories/ep%2F7%3Fx")

    assert response.status_code == 200
    assert response.json() == trajectory.model_dump(mode="json")


def test_read_unknown_trajectory_returns_404_envelope(client):
    response = client.get("/v1/trajectories/nope")

    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "type": "trajectory_not_found",
            "message": "trajectory_id 'nope' does not exist",
            "param": "trajectory_id",
            "code": 404,
        }
    }


def test_list_trajectories_filters_and_counts(client, make_trajectory, ingest):
    ingest(
        make_trajectory(policy="expert"),
        make_trajectory(policy="random", actions=("look",), won=False),
        make_trajectory(policy="random", actions=("wait",), source="synthetic", game_seed=None),
    )

    everything = client.get("/v1/trajectories").json()
    random_real = client.get("/v1/trajectories", params={"policy": "random", "source": "real"})
    page = client.get("/v1/trajectories", params={"limit": 1, "offset": 2}).json()

    assert everything["count"] == 3
    assert {s["policy"] for s in everything["data"]} == {"expert", "random"}
    assert random_real.json()["count"] == 1
    summary = random_real.json()["data"][0]
    assert (summary["num_transitions"], summary["success"], summary["episode_return"]) == (
        1,
        False,
        0.0,
    )
    assert page["count"] == 3 and len(page["data"]) == 1


def test_list_trajectories_bad_source_returns_422_naming_query_field(client):
    response = client.get("/v1/trajectories", params={"source": "imagined"})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "query.source"
