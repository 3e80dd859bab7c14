"""API tests of /v1/curriculum routes (real PostgreSQL, FakeLLMBackend)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from dreamgym.testing.fakes import FakeLLMBackend

from ..factories import make_task, task_json, variation

pytestmark = pytest.mark.integration

HIGH, LOW, FLAT = "twx-coin/train/0", "twx-coin/train/1", "twx-coin/train/2"


def register(client, *tasks):
    response = client.post("/v1/tasks", json={"tasks": [task_json(t) for t in tasks]})
    assert response.status_code == 200, response.text


def report(client, task_id, rewards):
    response = client.post(
        f"/v1/tasks/{quote(task_id, safe='')}/outcomes", json={"rewards": rewards}
    )
    assert response.status_code == 200, response.text


def seed_scored_tasks(client):
    """Three train seeds with scores 0.25 (HIGH), 0.1875 (LOW), 0 (FLAT); one scored eval task."""
    register(client, make_task(0), make_task(1), make_task(2), make_task(3, split="eval"))
    report(client, HIGH, [1, 0, 1, 0])
    report(client, LOW, [1, 0, 0, 0])
    report(client, FLAT, [1, 1, 1, 1])
    report(client, "twx-coin/eval/3", [2, 0])  # variance 1.0, but eval tasks are never varied


def generate(client, **body):
    return client.post("/v1/curriculum:generate", json=body)


# -- scores ------------------------------------------------------------------------------------


def test_scores_ranked_by_score_descending(client):
    seed_scored_tasks(client)
    register(client, make_task(9))  # never scored: not ranked

    body = client.get("/v1/curriculum/scores").json()

    assert [(r["task_id"], r["score"]) for r in body["data"]] == [
        ("twx-coin/eval/3", 1.0),
        (HIGH, 0.25),
        (LOW, 0.1875),
        (FLAT, 0.0),
    ]
    assert body["count"] == 4
    assert body["data"][0] == {
        "task_id": "twx-coin/eval/3",
        "score": 1.0,
        "num_groups": 1,
        "origin": "seed",
        "split": "eval",
    }


def test_scores_environment_filter_and_limit(client):
    seed_scored_tasks(client)
    register(client, make_task(0, environment="twx-cooking"))
    report(client, "twx-cooking/train/0", [0, 1])

    body = client.get(
        "/v1/curriculum/scores", params={"environment": "twx-coin", "limit": 2}
    ).json()

    assert [r["task_id"] for r in body["data"]] == ["twx-coin/eval/3", HIGH]
    assert body["count"] == 4


def test_scores_bad_limit_is_422_naming_field(client):
    response = client.get("/v1/curriculum/scores", params={"limit": 0})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "query.limit"


# -- generate ----------------------------------------------------------------------------------


def test_generate_without_backend_is_503_envelope(client):
    seed_scored_tasks(client)

    response = generate(client, num_seed_tasks=1, variations_per_task=1)

    assert response.status_code == 503
    assert response.json()["error"]["type"] == "llm_backend_not_configured"


def test_generate_picks_highest_variance_train_tasks(make_client):
    fake = FakeLLMBackend([variation("Vary high."), variation("Vary low.")])
    client = make_client(backend=fake)
    seed_scored_tasks(client)

    body = generate(client, num_seed_tasks=5, variations_per_task=1, seed=0).json()

    assert body["seed_task_ids"] == [HIGH, LOW]  # FLAT has score 0, eval tasks are excluded
    assert "Task: Find the coin in game 0." in fake.prompts[0]
    assert "Task: Find the coin in game 1." in fake.prompts[1]


def test_generate_stores_variations_with_lineage(make_client):
    fake = FakeLLMBackend([variation("Find two coins."), variation("Find three coins.")])
    client = make_client(backend=fake)
    seed_scored_tasks(client)

    body = generate(client, num_seed_tasks=1, variations_per_task=2, seed=7).json()

    assert [t["instruction"] for t in body["created"]] == ["Find two coins.", "Find three coins."]
    for created in body["created"]:
        detail = client.get(f"/v1/tasks/{created['task_id']}").json()
        assert detail["task"] == created
        assert (created["origin"], created["split"]) == ("generated", "train")
        assert detail["lineage"] == [HIGH]
    assert client.get("/v1/tasks", params={"origin": "generated"}).json()["count"] == 2


def test_generate_rejects_malformed_and_duplicate_variations(make_client):
    fake = FakeLLMBackend(
        [
            variation("Find two coins."),
            variation("Find two coins.") + "\nExtra words.",
            variation(
                "Find the coin in game 1.", "You are in room 1. To the North you see the pantry."
            ),
        ]
    )
    client = make_client(backend=fake)
    seed_scored_tasks(client)

    body = generate(client, num_seed_tasks=1, variations_per_task=3).json()

    assert len(body["created"]) == 1
    assert [(r["parent_task_id"], r["reason"]) for r in body["rejected"]] == [
        (HIGH, "trailing text after </actions>"),
        (HIGH, f"duplicate of existing task '{LOW}'"),
    ]
    assert client.get("/v1/tasks").json()["count"] == 5


def test_generate_same_variation_in_later_round_is_duplicate(make_client):
    fake = FakeLLMBackend([variation("Find two coins."), variation("Find two coins.")])
    client = make_client(backend=fake)
    seed_scored_tasks(client)
    first = generate(client, num_seed_tasks=1, variations_per_task=1).json()

    second = generate(client, num_seed_tasks=1, variations_per_task=1).json()

    assert second["created"] == []
    assert second["rejected"][0]["reason"] == (
        f"duplicate of existing task '{first['created'][0]['task_id']}'"
    )


def test_generate_no_positive_score_is_200_with_message(make_client):
    fake = FakeLLMBackend()
    client = make_client(backend=fake)
    register(client, make_task(0))
    report(client, HIGH, [0, 0, 0])

    response = generate(client, num_seed_tasks=2, variations_per_task=2)

    assert response.status_code == 200
    body = response.json()
    assert (body["created"], body["rejected"], body["seed_task_ids"]) == ([], [], [])
    assert "score > 0" in body["message"]
    assert fake.calls == []


def test_generate_backend_failure_is_502_and_stores_nothing(make_client):
    client = make_client(backend=FakeLLMBackend([RuntimeError("model crashed")]))
    seed_scored_tasks(client)

    response = generate(client, num_seed_tasks=1, variations_per_task=1)

    assert response.status_code == 502
    assert "model crashed" in response.json()["error"]["message"]
    assert client.get("/v1/tasks", params={"origin": "generated"}).json()["count"] == 0


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"num_seed_tasks": 0, "variations_per_task": 1}, "body.num_seed_tasks"),
        ({"num_seed_tasks": 65, "variations_per_task": 1}, "body.num_seed_tasks"),
        ({"num_seed_tasks": 1, "variations_per_task": 17}, "body.variations_per_task"),
        ({"num_seed_tasks": 1, "variations_per_task": 1, "temperature": -1}, "body.temperature"),
    ],
)
def test_generate_bad_request_is_422_naming_field(make_client, body, param):
    client = make_client(backend=FakeLLMBackend())

    response = client.post("/v1/curriculum:generate", json=body)

    assert response.status_code == 422
    assert response.json()["error"]["param"] == param


def test_generated_tasks_enter_train_samples_under_lambda_cap(make_client):
    fake = FakeLLMBackend(responder=lambda prompt, params: variation(f"Variant {params.seed}."))
    client = make_client(backend=fake, max_generated_fraction=0.5)
    seed_scored_tasks(client)
    generate(client, num_seed_tasks=2, variations_per_task=4, seed=0)

    body = client.post("/v1/tasks:sample", json={"batch_size": 4, "seed": 0}).json()

    assert body["num_generated"] == 2


def test_generate_with_fake_backend_setting_creates_new_tasks_each_round(make_client):
    client = make_client(llm_backend="fake")
    seed_scored_tasks(client)

    first = generate(client, num_seed_tasks=2, variations_per_task=2).json()
    second = generate(client, num_seed_tasks=2, variations_per_task=2).json()

    assert (len(first["created"]), len(second["created"])) == (4, 4)
    assert first["rejected"] == second["rejected"] == []
