"""API tests of /v1/tasks routes against a real PostgreSQL database."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from ..factories import make_task, task_json

pytestmark = pytest.mark.integration


def register(client, *tasks):
    response = client.post("/v1/tasks", json={"tasks": [task_json(t) for t in tasks]})
    assert response.status_code == 200, response.text
    return response.json()


def count_tasks(client, **filters) -> int:
    return client.get("/v1/tasks", params=filters).json()["count"]


def task_url(task_id: str) -> str:
    return f"/v1/tasks/{quote(task_id, safe='')}"


def assert_envelope(response, status: int, error_type: str, param: str | None = None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["code"] == status
    if param is not None:
        assert error["param"] == param
    return error


# -- health ------------------------------------------------------------------------------------


def test_readyz_database_reachable_is_ready(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["status"] == "ready"


# -- register ----------------------------------------------------------------------------------


def test_register_new_tasks_inserted(client):
    body = register(client, make_task(0), make_task(1), make_task(0, split="eval"))

    assert body == {"inserted": 3, "duplicates": 0}
    assert count_tasks(client) == 3


def test_register_same_tasks_again_counts_duplicates(client):
    register(client, make_task(0), make_task(1))

    body = register(client, make_task(1), make_task(2))

    assert body == {"inserted": 1, "duplicates": 1}
    assert count_tasks(client) == 3


def test_register_same_id_different_content_is_409_and_writes_nothing(client):
    register(client, make_task(0))
    changed = make_task(0, instruction="A different instruction.")

    response = client.post(
        "/v1/tasks", json={"tasks": [task_json(make_task(5)), task_json(changed)]}
    )

    error = assert_envelope(response, 409, "task_conflict", "body.tasks.1.task_id")
    assert "twx-coin/train/0" in error["message"]
    assert count_tasks(client) == 1


@pytest.mark.parametrize(
    ("mutate", "param"),
    [
        (lambda t: t.pop("instruction"), "body.tasks.1.instruction"),
        (lambda t: t.update(split="test"), "body.tasks.1.split"),
        (lambda t: t.update(unknown_field=1), "body.tasks.1.unknown_field"),
        (lambda t: t.update(task_id=""), "body.tasks.1.task_id"),
    ],
)
def test_register_malformed_task_is_422_naming_field_and_writes_nothing(client, mutate, param):
    bad = task_json(make_task(1))
    mutate(bad)

    response = client.post("/v1/tasks", json={"tasks": [task_json(make_task(0)), bad]})

    error = assert_envelope(response, 422, "invalid_request", param)
    assert param in error["message"]
    assert count_tasks(client) == 0


def test_register_empty_list_is_422(client):
    assert_envelope(
        client.post("/v1/tasks", json={"tasks": []}), 422, "invalid_request", "body.tasks"
    )


def test_register_unknown_parent_is_422_naming_field(client):
    orphan = make_task(1, origin="generated", parent_task_id="missing/parent")

    response = client.post(
        "/v1/tasks", json={"tasks": [task_json(make_task(0)), task_json(orphan)]}
    )

    assert_envelope(response, 422, "invalid_request", "body.tasks.1.parent_task_id")
    assert count_tasks(client) == 0


def test_register_parent_and_child_in_one_request(client):
    child = make_task(1, origin="generated", parent_task_id="twx-coin/train/0")

    body = register(client, child, make_task(0))  # child first: the FK is checked at commit

    assert body["inserted"] == 2


# -- list and get ------------------------------------------------------------------------------


def test_list_tasks_filters_and_paginates(client):
    register(
        client,
        make_task(0),
        make_task(1),
        make_task(2, split="eval"),
        make_task(3, origin="generated"),
        make_task(4, environment="twx-cooking"),
    )

    page = client.get("/v1/tasks", params={"split": "train", "origin": "seed", "limit": 1}).json()

    assert page["count"] == 3
    assert len(page["data"]) == 1
    assert count_tasks(client, environment="twx-cooking") == 1
    assert count_tasks(client, origin="generated") == 1


def test_list_tasks_bad_filter_is_422_naming_query_field(client):
    assert_envelope(
        client.get("/v1/tasks", params={"split": "test"}), 422, "invalid_request", "query.split"
    )


def test_get_task_returns_task_score_and_lineage(client):
    seed = make_task(0)
    child = make_task(1, origin="generated", parent_task_id=seed.task_id)
    grandchild = make_task(2, origin="generated", parent_task_id=child.task_id)
    register(client, seed, child, grandchild)
    client.post(f"{task_url(grandchild.task_id)}/outcomes", json={"rewards": [1, 0, 1, 0]})

    body = client.get(task_url(grandchild.task_id)).json()

    assert body["task"] == task_json(grandchild)
    assert (body["score"], body["num_groups"]) == (0.25, 1)
    assert body["lineage"] == [child.task_id, seed.task_id]


def test_get_task_unscored_has_null_score(client):
    register(client, make_task(0))

    body = client.get("/v1/tasks/twx-coin/train/0").json()  # unencoded slashes work too

    assert (body["score"], body["num_groups"], body["lineage"]) == (None, 0, [])


def test_get_task_unknown_is_404_envelope_naming_task_id(client):
    error = assert_envelope(client.get(task_url("no/such/task")), 404, "task_not_found", "task_id")

    assert "no/such/task" in error["message"]


# -- outcomes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("rewards", "score"), [([1, 0, 1, 0], 0.25), ([1, 1, 1, 1], 0.0)])
def test_report_outcomes_returns_reward_variance(client, rewards, score):
    register(client, make_task(0))

    response = client.post(f"{task_url('twx-coin/train/0')}/outcomes", json={"rewards": rewards})

    assert response.status_code == 200
    assert response.json() == {"task_id": "twx-coin/train/0", "score": score, "num_groups": 1}


def test_report_outcomes_latest_group_sets_score(client):
    register(client, make_task(0))
    url = f"{task_url('twx-coin/train/0')}/outcomes"
    client.post(url, json={"rewards": [1, 0, 1, 0]})

    body = client.post(url, json={"rewards": [1, 1], "policy_version": "step-2"}).json()

    assert (body["score"], body["num_groups"]) == (0.0, 2)


def test_report_outcomes_score_window_averages_groups(make_client):
    client = make_client(score_window=2)
    register(client, make_task(0))
    url = f"{task_url('twx-coin/train/0')}/outcomes"
    client.post(url, json={"rewards": [1, 0, 1, 0]})

    body = client.post(url, json={"rewards": [1, 1]}).json()

    assert body["score"] == pytest.approx(0.125)


def test_report_outcomes_unknown_task_is_404(client):
    response = client.post(f"{task_url('nope')}/outcomes", json={"rewards": [1.0]})

    assert_envelope(response, 404, "task_not_found", "task_id")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"rewards": []}, "body.rewards"),
        ({"rewards": [1.0, "x"]}, "body.rewards.1"),
        ({"rewards": [1.0], "extra": True}, "body.extra"),
        ({}, "body.rewards"),
    ],
)
def test_report_outcomes_malformed_is_422_and_writes_nothing(client, body, param):
    register(client, make_task(0))

    response = client.post(f"{task_url('twx-coin/train/0')}/outcomes", json=body)

    assert_envelope(response, 422, "invalid_request", param)
    assert client.get(task_url("twx-coin/train/0")).json()["num_groups"] == 0


def test_report_outcomes_non_finite_reward_is_422(client):
    register(client, make_task(0))
    raw = b'{"rewards": [1.0, NaN]}'

    response = client.post(
        f"{task_url('twx-coin/train/0')}/outcomes",
        content=raw,
        headers={"content-type": "application/json"},
    )

    assert_envelope(response, 422, "invalid_request", "body.rewards.1")


# -- sample ------------------------------------------------------------------------------------


def register_mixed_pool(client, num_seed=10, num_generated=10, num_eval=3):
    register(
        client,
        *[make_task(i) for i in range(num_seed)],
        *[make_task(100 + i, origin="generated") for i in range(num_generated)],
        *[make_task(200 + i, split="eval") for i in range(num_eval)],
    )


def test_sample_train_respects_lambda_cap(make_client):
    client = make_client(max_generated_fraction=0.25)
    register_mixed_pool(client)

    for seed in range(5):
        body = client.post("/v1/tasks:sample", json={"batch_size": 8, "seed": seed}).json()

        assert len(body["tasks"]) == 8
        generated = [t for t in body["tasks"] if t["origin"] == "generated"]
        assert len(generated) == body["num_generated"] <= 2
        assert all(t["split"] == "train" for t in body["tasks"])


def test_sample_same_seed_same_batch(client):
    register_mixed_pool(client)
    request = {"batch_size": 6, "seed": 42}

    first = client.post("/v1/tasks:sample", json=request).json()

    assert client.post("/v1/tasks:sample", json=request).json() == first


def test_sample_eval_never_returns_generated_tasks(make_client):
    client = make_client(max_generated_fraction=1.0)
    register_mixed_pool(client)

    body = client.post(
        "/v1/tasks:sample", json={"batch_size": 12, "split": "eval", "seed": 1}
    ).json()

    assert body["num_generated"] == 0
    assert {t["task_id"] for t in body["tasks"]} == {f"twx-coin/eval/{200 + i}" for i in range(3)}


def test_sample_environment_filter(client):
    register(client, make_task(0), make_task(1, environment="twx-cooking"))

    body = client.post(
        "/v1/tasks:sample", json={"batch_size": 3, "environment": "twx-cooking"}
    ).json()

    assert {t["environment"] for t in body["tasks"]} == {"twx-cooking"}


def test_sample_empty_pool_is_404_envelope(client):
    response = client.post("/v1/tasks:sample", json={"batch_size": 2, "environment": "none-such"})

    assert_envelope(response, 404, "no_tasks_available", "environment")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"batch_size": 0}, "body.batch_size"),
        ({"batch_size": 2000}, "body.batch_size"),
        ({"batch_size": 4, "split": "test"}, "body.split"),
    ],
)
def test_sample_bad_request_is_422_naming_field(client, body, param):
    assert_envelope(client.post("/v1/tasks:sample", json=body), 422, "invalid_request", param)
