"""Teams through the HTTP API: API keys, isolation of every resource, per-team quota.

One app per module with authentication enabled on the session's real key registry and a quota of
``QUOTA`` trajectories per team; each test creates its own teams, so tests share no rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dreamgym.types import Trajectory

pytestmark = pytest.mark.integration

QUOTA = 3
RETRY_AFTER_S = 42


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def as_json(trajectory: Trajectory) -> dict[str, Any]:
    return trajectory.model_dump(mode="json", exclude_none=True)


@pytest.fixture(scope="module")
def teams_client(postgres: Any, auth_database_url: str) -> Iterator[TestClient]:
    from replay_store.main import create_app
    from replay_store.settings import Settings

    name = f"rs_teams_{uuid.uuid4().hex[:12]}"
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
        max_trajectories_per_team=QUOTA,
        quota_retry_after_s=RETRY_AFTER_S,
    )
    with TestClient(create_app(settings)) as client:
        yield client
    postgres.drop_database(name)


@pytest.fixture()
def two_teams(make_team) -> tuple[str, str]:
    """Keys of two new teams, A and B."""
    return make_team("a")[1], make_team("b")[1]


@pytest.fixture()
def ingest_as(teams_client: TestClient) -> Callable[..., list[str]]:
    def post(key: str, *trajectories: Trajectory) -> list[str]:
        body = {"trajectories": [as_json(t) for t in trajectories]}
        response = teams_client.post("/v1/trajectories", json=body, headers=bearer(key))
        assert response.status_code == 200, response.text
        return list(response.json()["trajectory_ids"])

    return post


# -- 401 ---------------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/v1/trajectories", {"trajectories": []}),
    ("GET", "/v1/trajectories", None),
    ("GET", "/v1/trajectories/ep-1", None),
    ("POST", "/v1/retrieve", {"queries": [{"task": "t", "observation": "o", "action": "a"}]}),
    ("POST", "/v1/transitions:sample", {"n": 1}),
    ("GET", "/v1/transitions", None),
    ("GET", "/v1/stats", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize(
    "headers", [{}, bearer("dg_0123456789abcdef_" + "x" * 43), {"X-API-Key": "wrong"}]
)
def test_every_route_without_a_valid_key_is_401(teams_client, method, path, body, headers):
    response = teams_client.request(method, path, json=body, headers=headers)

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "unauthenticated"


def test_revoked_key_is_401(teams_client, key_registry, make_team):
    team, key = make_team("a")
    assert teams_client.get("/v1/stats", headers=bearer(key)).status_code == 200
    (info,) = key_registry.list_keys(team)

    key_registry.revoke_key(info.key_id)

    assert teams_client.get("/v1/stats", headers=bearer(key)).status_code == 401


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/docs", "/openapi.json"])
def test_health_and_docs_need_no_key(teams_client, path):
    assert teams_client.get(path).status_code == 200


# -- isolation, resource by resource -------------------------------------------------------------


def test_trajectory_of_another_team_is_404(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    (trajectory_id,) = ingest_as(key_a, make_trajectory(trajectory_id="ep/a-1"))

    own = teams_client.get(f"/v1/trajectories/{trajectory_id}", headers=bearer(key_a))
    other = teams_client.get(f"/v1/trajectories/{trajectory_id}", headers=bearer(key_b))

    assert own.status_code == 200 and own.json()["trajectory_id"] == "ep/a-1"
    assert other.status_code == 404
    assert other.json()["error"]["type"] == "trajectory_not_found"


def test_trajectory_list_shows_only_own(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    ids_a = ingest_as(key_a, make_trajectory(), make_trajectory(actions=("look",)))
    ids_b = ingest_as(key_b, make_trajectory(actions=("wait",)))

    listed_a = teams_client.get("/v1/trajectories", headers=bearer(key_a)).json()
    listed_b = teams_client.get("/v1/trajectories", headers=bearer(key_b)).json()

    assert sorted(t["trajectory_id"] for t in listed_a["data"]) == sorted(ids_a)
    assert [t["trajectory_id"] for t in listed_b["data"]] == ids_b
    assert (listed_a["count"], listed_b["count"]) == (2, 1)


def test_transitions_export_shows_only_own(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    ids_a = ingest_as(key_a, make_trajectory(actions=("look", "go north", "take coin")))
    ids_b = ingest_as(key_b, make_trajectory(actions=("wait",)))

    page_a = teams_client.get("/v1/transitions", headers=bearer(key_a)).json()
    page_b = teams_client.get("/v1/transitions", headers=bearer(key_b)).json()
    after = teams_client.get(
        "/v1/transitions", params={"after_id": 0, "limit": 1}, headers=bearer(key_b)
    ).json()

    assert {t["trajectory_id"] for t in page_a["data"]} == set(ids_a)
    assert len(page_a["data"]) == 3
    assert [t["trajectory_id"] for t in page_b["data"]] == ids_b
    assert [t["trajectory_id"] for t in after["data"]] == ids_b


def test_retrieval_never_returns_another_teams_rows(
    teams_client, two_teams, ingest_as, make_trajectory
):
    key_a, key_b = two_teams
    secret = make_trajectory(task="open the vault", actions=("enter code 4711", "take gold"))
    ids_a = ingest_as(key_a, secret)
    query = {
        "task": "open the vault",
        "observation": secret.transitions[0].observation,
        "action": "enter code 4711",
    }
    empty = teams_client.post(
        "/v1/retrieve", json={"queries": [query], "k": 5}, headers=bearer(key_b)
    ).json()
    ids_b = ingest_as(key_b, make_trajectory(task="bake bread", actions=("knead", "bake")))

    hits_b = teams_client.post(
        "/v1/retrieve", json={"queries": [query], "k": 5}, headers=bearer(key_b)
    ).json()["results"][0]
    hits_a = teams_client.post(
        "/v1/retrieve", json={"queries": [query], "k": 5}, headers=bearer(key_a)
    ).json()["results"][0]

    assert empty["results"] == [[]]
    assert {h["trajectory_id"] for h in hits_b} == set(ids_b) and len(hits_b) == 2
    assert all("4711" not in h["action"] and h["task"] == "bake bread" for h in hits_b)
    assert hits_a[0]["action"] == "enter code 4711"
    assert {h["trajectory_id"] for h in hits_a} == set(ids_a)


def test_sampling_draws_only_own_transitions(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    ingest_as(key_a, make_trajectory(actions=("look", "go north", "take coin")))
    ids_b = ingest_as(key_b, make_trajectory(actions=("wait", "take coin")))

    sample = teams_client.post(
        "/v1/transitions:sample", json={"n": 10, "seed": 0}, headers=bearer(key_b)
    ).json()

    assert sample["table_size"] == 2
    assert {t["trajectory_id"] for t in sample["transitions"]} == set(ids_b)
    assert sample["probabilities"] == [0.5, 0.5]


def test_stats_count_only_own_rows(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    ingest_as(key_a, make_trajectory(policy="expert"), make_trajectory(actions=("look",)))
    ingest_as(key_b, make_trajectory(policy="random", actions=("wait", "x", "y")))

    stats_b = teams_client.get("/v1/stats", headers=bearer(key_b)).json()

    assert (stats_b["trajectories"], stats_b["transitions"]) == (1, 3)
    assert stats_b["by_policy"] == {"random": 1}


def test_idempotency_keys_are_per_team(teams_client, two_teams, ingest_as, make_trajectory):
    key_a, key_b = two_teams
    ingest_as(key_a, make_trajectory(trajectory_id="ep-1"))

    same = teams_client.post(
        "/v1/trajectories",
        json={"trajectories": [as_json(make_trajectory(trajectory_id="ep-1"))]},
        headers=bearer(key_b),
    ).json()
    changed = teams_client.post(  # same id, other content: a conflict only within a team
        "/v1/trajectories",
        json={"trajectories": [as_json(make_trajectory(trajectory_id="ep-1", won=False))]},
        headers=bearer(key_b),
    )
    again_a = teams_client.post(
        "/v1/trajectories",
        json={"trajectories": [as_json(make_trajectory(trajectory_id="ep-1"))]},
        headers=bearer(key_a),
    ).json()

    assert (same["inserted"], same["duplicates"]) == (1, 0)
    assert changed.status_code == 409
    assert (again_a["inserted"], again_a["duplicates"]) == (0, 1)


# -- quota -------------------------------------------------------------------------------------


def test_ingest_over_quota_is_429_with_retry_after(
    teams_client, two_teams, ingest_as, make_trajectory
):
    key_a, key_b = two_teams
    trajectories = [make_trajectory(actions=(f"say {i}",)) for i in range(QUOTA + 1)]
    ingest_as(key_a, *trajectories[:QUOTA])

    over = teams_client.post(
        "/v1/trajectories",
        json={"trajectories": [as_json(t) for t in trajectories[QUOTA - 1 :]]},
        headers=bearer(key_a),
    )
    duplicate = ingest_as(key_a, trajectories[0])  # nothing new: allowed at the quota
    other_team = ingest_as(key_b, *trajectories[:QUOTA])

    assert over.status_code == 429
    assert over.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert over.json()["error"]["type"] == "trajectory_quota_exceeded"
    assert f"quota of {QUOTA}" in over.json()["error"]["message"]
    stats_a = teams_client.get("/v1/stats", headers=bearer(key_a)).json()
    assert stats_a["trajectories"] == QUOTA  # the refused batch stored nothing
    assert len(duplicate) == 1 and len(other_team) == QUOTA
