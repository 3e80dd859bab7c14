"""API tests of reasoning traces on transitions: PATCH /v1/transitions[/{id}] and the
``has_reasoning`` filter of GET /v1/transitions, on a real PostgreSQL database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@pytest.fixture()
def stored(make_trajectory, ingest) -> list[str]:
    """Two real trajectories (transition ids 1..4) and one synthetic (5..6); their ids."""
    return ingest(
        make_trajectory(actions=("go north", "take coin")),
        make_trajectory(task="other task", actions=("go east", "take coin")),
        make_trajectory(task="imagined", actions=("look", "take coin"), source="synthetic"),
    )


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _page(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/transitions", params=params)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def _patch(client: TestClient, updates: list[tuple[int, str]], **body: Any) -> Any:
    payload = {"updates": [{"id": i, "reasoning": r} for i, r in updates], **body}
    return client.patch("/v1/transitions", json=payload)


def test_patch_stores_traces_visible_in_export_and_trajectory(client, stored):
    response = _patch(client, [(1, "moving north enters the hall"), (2, "the coin is taken")])

    assert response.status_code == 200, response.text
    assert response.json() == {"updated": 2, "unchanged": 0}
    by_id = {t["id"]: t["reasoning"] for t in _page(client)}
    assert by_id[1] == "moving north enters the hall"
    assert by_id[2] == "the coin is taken"
    assert by_id[3] is None
    trajectory = client.get(f"/v1/trajectories/{stored[0]}").json()
    assert [t["reasoning"] for t in trajectory["transitions"]] == [
        "moving north enters the hall",
        "the coin is taken",
    ]


def test_patch_is_idempotent_and_keeps_existing_traces_without_overwrite(client, stored):
    _patch(client, [(1, "first")])

    again = _patch(client, [(1, "first")])
    other = _patch(client, [(1, "second"), (3, "new")])

    assert again.json() == {"updated": 0, "unchanged": 1}
    assert other.json() == {"updated": 1, "unchanged": 1}
    by_id = {t["id"]: t["reasoning"] for t in _page(client)}
    assert by_id[1] == "first" and by_id[3] == "new"


def test_patch_with_overwrite_replaces_a_trace(client, stored):
    _patch(client, [(1, "first")])

    response = _patch(client, [(1, "second")], overwrite=True)

    assert response.json() == {"updated": 1, "unchanged": 0}
    assert _page(client)[0]["reasoning"] == "second"


def test_patch_unknown_id_is_404_naming_it_and_writes_nothing(client, stored):
    response = _patch(client, [(1, "kept?"), (999, "nowhere")])

    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "transition_not_found"
    assert error["param"] == "body.updates.1.id"
    assert "999" in error["message"]
    assert _page(client)[0]["reasoning"] is None


def test_patch_conflicting_repeat_is_422(client, stored):
    response = _patch(client, [(1, "a"), (1, "b")])

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "body.updates.1.id"


@pytest.mark.parametrize(
    ("updates", "param"),
    [
        ([], "body.updates"),
        ([{"id": 0, "reasoning": "r"}], "body.updates.0.id"),
        ([{"id": 1, "reasoning": ""}], "body.updates.0.reasoning"),
    ],
)
def test_patch_invalid_body_is_422_naming_the_field(client, stored, updates, param):
    response = client.patch("/v1/transitions", json={"updates": updates})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == param


def test_has_reasoning_filter_selects_annotated_or_not(client, stored):
    _patch(client, [(2, "r2"), (5, "r5")])

    with_trace = _page(client, has_reasoning="true")
    without = _page(client, has_reasoning="false", source="real")

    assert [t["id"] for t in with_trace] == [2, 5]
    assert [t["id"] for t in without] == [1, 3, 4]


def test_patch_one_returns_the_stored_transition(client, stored):
    response = client.patch("/v1/transitions/3", json={"reasoning": "east leads to the coin"})

    assert response.status_code == 200, response.text
    assert response.json()["id"] == 3
    assert response.json()["reasoning"] == "east leads to the coin"


def test_patch_one_unknown_id_is_404(client, stored):
    response = client.patch("/v1/transitions/77", json={"reasoning": "r"})

    assert response.status_code == 404
    assert response.json()["error"]["param"] == "transition_id"


# -- teams ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teams_client(postgres: Any, auth_database_url: str) -> Iterator[TestClient]:
    from replay_store.main import create_app
    from replay_store.settings import Settings

    name = f"rs_reason_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    settings = Settings(
        database_url=postgres.url(name),
        embedding_model="hash",
        embedding_dim=384,
        json_logs=False,
        log_level="WARNING",
        auth_enabled=True,
        auth_database_url=auth_database_url,
        auth_cache_ttl_s=0,
    )
    with TestClient(create_app(settings)) as client:
        yield client
    postgres.drop_database(name)


def test_patch_another_teams_transition_is_404_and_leaves_it(
    teams_client, make_team, make_trajectory
):
    key_a, key_b = make_team("a")[1], make_team("b")[1]
    body = {"trajectories": [make_trajectory().model_dump(mode="json", exclude_none=True)]}
    stored = teams_client.post("/v1/trajectories", json=body, headers=bearer(key_a))
    assert stored.status_code == 200
    own = teams_client.get("/v1/transitions", headers=bearer(key_a)).json()["data"][0]["id"]
    patch = {"updates": [{"id": own, "reasoning": "not yours"}]}

    response = teams_client.patch("/v1/transitions", json=patch, headers=bearer(key_b))
    unauthenticated = teams_client.patch("/v1/transitions", json=patch)

    assert response.status_code == 404
    assert unauthenticated.status_code == 401
    mine = teams_client.get("/v1/transitions", headers=bearer(key_a)).json()["data"][0]
    assert mine["reasoning"] is None
