"""Teams through the HTTP API of the task generator: keys, isolation of every resource, quota.

Apps run with authentication enabled on the session's real key registry; every test creates its
own teams (the module database is emptied between tests as usual).
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from dreamgym.testing.fakes import FakeLLMBackend

from ..factories import make_task, task_json, variation

pytestmark = pytest.mark.integration

QUOTA = 4
RETRY_AFTER_S = 17
HIGH = "twx-coin/train/0"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture()
def auth_client(make_client, auth_database_url):
    """Factory: a started app with authentication enabled (and optional LLM backend)."""

    def make(backend=None, **overrides):
        return make_client(
            backend,
            auth_enabled=True,
            auth_database_url=auth_database_url,
            auth_cache_ttl_s=0,
            **overrides,
        )

    return make


@pytest.fixture()
def two_teams(make_team):
    return make_team("a")[1], make_team("b")[1]


def register(client, key, *tasks):
    response = client.post(
        "/v1/tasks", json={"tasks": [task_json(t) for t in tasks]}, headers=bearer(key)
    )
    assert response.status_code == 200, response.text
    return response.json()


def report(client, key, task_id, rewards):
    return client.post(
        f"/v1/tasks/{quote(task_id, safe='')}/outcomes",
        json={"rewards": rewards},
        headers=bearer(key),
    )


# -- 401 ---------------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/v1/tasks", {"tasks": []}),
    ("GET", "/v1/tasks", None),
    ("GET", f"/v1/tasks/{HIGH}", None),
    ("POST", "/v1/tasks:sample", {"batch_size": 1}),
    ("POST", f"/v1/tasks/{HIGH}/outcomes", {"rewards": [1.0]}),
    ("GET", "/v1/curriculum/scores", None),
    ("POST", "/v1/curriculum:generate", {"num_seed_tasks": 1, "variations_per_task": 1}),
]


def test_every_route_without_a_valid_key_is_401(auth_client):
    client = auth_client()
    invalid = bearer("dg_0123456789abcdef_" + "x" * 43)

    for method, path, body in ROUTES:
        for headers in ({}, invalid):
            response = client.request(method, path, json=body, headers=headers)

            assert response.status_code == 401, (method, path, headers)
            assert response.json()["error"]["type"] == "unauthenticated"
    assert client.get("/readyz").status_code == 200


def test_revoked_key_is_401(auth_client, key_registry, make_team):
    client = auth_client()
    team, key = make_team("a")
    assert client.get("/v1/tasks", headers=bearer(key)).status_code == 200
    (info,) = key_registry.list_keys(team)

    key_registry.revoke_key(info.key_id)

    assert client.get("/v1/tasks", headers=bearer(key)).status_code == 401


# -- isolation, resource by resource -------------------------------------------------------------


def test_task_of_another_team_is_404(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, make_task(0))

    own = client.get(f"/v1/tasks/{HIGH}", headers=bearer(key_a))
    other = client.get(f"/v1/tasks/{HIGH}", headers=bearer(key_b))

    assert own.status_code == 200 and own.json()["task"]["task_id"] == HIGH
    assert other.status_code == 404
    assert other.json()["error"]["type"] == "task_not_found"


def test_task_list_shows_only_own(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, make_task(0), make_task(1))
    register(client, key_b, make_task(5))

    listed = client.get("/v1/tasks", headers=bearer(key_b)).json()

    assert [t["task_id"] for t in listed["data"]] == ["twx-coin/train/5"]
    assert listed["count"] == 1


def test_same_task_ids_are_independent_per_team(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, make_task(0))

    other_team = register(client, key_b, make_task(0, instruction="Something else."))
    conflict = client.post(
        "/v1/tasks",
        json={"tasks": [task_json(make_task(0, instruction="Changed."))]},
        headers=bearer(key_a),
    )

    assert other_team == {"inserted": 1, "duplicates": 0}
    assert conflict.status_code == 409
    a = client.get(f"/v1/tasks/{HIGH}", headers=bearer(key_a)).json()
    assert a["task"]["instruction"] == make_task(0).instruction


def test_outcomes_for_another_teams_task_are_404_and_not_counted(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, make_task(0))
    report(client, key_a, HIGH, [1, 0])

    other = report(client, key_b, HIGH, [1, 1, 1, 1])
    detail = client.get(f"/v1/tasks/{HIGH}", headers=bearer(key_a)).json()

    assert other.status_code == 404
    assert other.json()["error"]["type"] == "task_not_found"
    assert (detail["num_groups"], detail["score"]) == (1, 0.25)


def test_scores_rank_only_own_tasks(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, make_task(0))
    register(client, key_b, make_task(7))
    report(client, key_a, HIGH, [1, 0])
    report(client, key_b, "twx-coin/train/7", [1, 1])

    scores_b = client.get("/v1/curriculum/scores", headers=bearer(key_b)).json()

    assert [(r["task_id"], r["score"]) for r in scores_b["data"]] == [("twx-coin/train/7", 0.0)]


def test_sampling_draws_only_own_tasks(auth_client, two_teams):
    client = auth_client()
    key_a, key_b = two_teams
    register(client, key_a, *[make_task(i) for i in range(5)], make_task(9, split="eval"))
    register(client, key_b, make_task(20))

    train = client.post(
        "/v1/tasks:sample", json={"batch_size": 8, "seed": 0}, headers=bearer(key_b)
    )
    evaluation = client.post(
        "/v1/tasks:sample", json={"batch_size": 2, "split": "eval"}, headers=bearer(key_b)
    )

    assert {t["task_id"] for t in train.json()["tasks"]} == {"twx-coin/train/20"}
    assert evaluation.status_code == 404  # team B registered no eval task; A's are invisible
    assert evaluation.json()["error"]["type"] == "no_tasks_available"


def test_generation_varies_and_stores_only_the_callers_tasks(auth_client, two_teams):
    backend = FakeLLMBackend([variation("Find two coins.")])
    client = auth_client(backend)
    key_a, key_b = two_teams
    register(client, key_a, make_task(0))
    report(client, key_a, HIGH, [1, 0, 1, 0])

    for_b = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 1},
        headers=bearer(key_b),
    ).json()
    calls_for_b = len(backend.calls)
    for_a = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 1},
        headers=bearer(key_a),
    ).json()
    (created,) = for_a["created"]

    assert (for_b["seed_task_ids"], for_b["created"], calls_for_b) == ([], [], 0)
    assert for_a["seed_task_ids"] == [HIGH]
    path = f"/v1/tasks/{quote(created['task_id'], safe='')}"
    assert client.get(path, headers=bearer(key_a)).json()["lineage"] == [HIGH]
    assert client.get(path, headers=bearer(key_b)).status_code == 404


# -- quota -------------------------------------------------------------------------------------


def test_register_over_quota_is_429_with_retry_after(auth_client, two_teams):
    client = auth_client(max_tasks_per_team=QUOTA, quota_retry_after_s=RETRY_AFTER_S)
    key_a, key_b = two_teams
    register(client, key_a, *[make_task(i) for i in range(QUOTA - 1)])

    over = client.post(
        "/v1/tasks",
        json={"tasks": [task_json(make_task(i)) for i in range(QUOTA + 1)]},
        headers=bearer(key_a),
    )
    fits = register(client, key_a, *[make_task(i) for i in range(QUOTA)])
    other_team = register(client, key_b, *[make_task(i) for i in range(QUOTA)])

    assert over.status_code == 429
    assert over.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert over.json()["error"]["type"] == "task_quota_exceeded"
    assert fits == {"inserted": 1, "duplicates": QUOTA - 1}
    assert other_team["inserted"] == QUOTA


def test_generation_with_a_full_quota_is_429_without_llm_work(auth_client, two_teams):
    backend = FakeLLMBackend([variation("Find two coins.")])
    client = auth_client(backend, max_tasks_per_team=1, quota_retry_after_s=RETRY_AFTER_S)
    key_a, _ = two_teams
    register(client, key_a, make_task(0))
    report(client, key_a, HIGH, [1, 0, 1, 0])

    response = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 1},
        headers=bearer(key_a),
    )

    assert response.status_code == 429
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert backend.calls == []
