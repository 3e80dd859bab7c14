"""The feasibility filter, lineage and cluster scores through the task generator's HTTP API:
real PostgreSQL, a real experience-model service (uvicorn, scripted fake LLM) for the imagined
rollouts, a FakeLLMBackend as the task-variation model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.llm.base import SamplingParams
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app

from ..factories import make_task, task_json, variation

pytestmark = pytest.mark.integration

SEED = "twx-coin/train/0"
WIN = "take coin"


def coin_world(prompt: str, params: SamplingParams) -> str:
    """Imagined dynamics: ``take coin`` pays 1 and ends; anything else changes nothing."""
    del params
    fields = dict(line.split(": ", 1) for line in prompt.splitlines() if ": " in line)
    if fields["Action"] == WIN:
        return (
            "<observation>You take the coin.</observation>\n<actions></actions>\n"
            "<reward>1</reward>\n<terminated>true</terminated>"
        )
    return (
        f"<observation>{fields['Observation']}</observation>\n<actions>{fields['Actions']}"
        "</actions>\n<reward>0</reward>\n<terminated>false</terminated>"
    )


@pytest.fixture(scope="module")
def experience_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """(URL, fake LLM) of an experience-model service on coin-world dynamics."""
    from experience_model.main import create_app
    from experience_model.settings import Settings

    llm = FakeLLMBackend(responder=coin_world)
    settings = Settings(
        backend="fake",
        data_dir=Path(tmp_path_factory.mktemp("em")),
        json_logs=False,
        log_level="WARNING",
        replay_store_url=None,
        max_batch_wait_ms=1.0,
    )
    with serve_app(create_app(settings, backend=llm)) as url:
        yield url, llm


def completions() -> FakeLLMBackend:
    return FakeLLMBackend(
        [
            variation("Find the coin in the attic.", actions=("move south", WIN)),
            variation("Find the coin on the moon.", actions=("move south", "look around")),
            variation("Find the coin nowhere.", actions=("look around",)),
        ]
    )


def seeded(client) -> None:
    response = client.post("/v1/tasks", json={"tasks": [task_json(make_task(0))]})
    assert response.status_code == 200, response.text
    path = f"/v1/tasks/{quote(SEED, safe='')}/outcomes"
    assert client.post(path, json={"rewards": [1, 0, 1, 0]}).status_code == 200


def test_generate_keeps_only_variations_the_experience_model_can_complete(
    make_client, experience_model
):
    url, llm = experience_model
    client = make_client(
        completions(),
        feasibility_experience_model_url=url,
        feasibility_rollouts=3,
        feasibility_max_steps=6,
    )
    seeded(client)
    before = len(llm.calls)

    response = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 3, "seed": 11, "round": 2},
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert [t["instruction"] for t in body["created"]] == ["Find the coin in the attic."]
    assert body["num_infeasible"] == 2
    for rejected in body["rejected"]:
        assert rejected["reason"].startswith("infeasible: 0/3 imagined random-policy rollouts")
        assert "within 6 steps" in rejected["reason"]
        assert rejected["parent_task_id"] == SEED
    assert len(llm.calls) > before  # the rollouts really ran in the experience model
    created = body["created"][0]
    assert created["metadata"]["feasibility"]["rollouts"] == 3
    assert created["metadata"]["feasibility"]["successes"] >= 1
    assert created["metadata"]["generation_depth"] == 1
    assert created["metadata"]["generation_round"] == 2


def test_generate_without_the_check_keeps_every_parsable_new_variation(
    make_client, experience_model
):
    url, _ = experience_model
    client = make_client(completions(), feasibility_experience_model_url=url)
    seeded(client)

    body = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 3, "check_feasibility": False},
    ).json()

    assert len(body["created"]) == 3 and body["num_infeasible"] == 0


def test_generate_check_requested_but_not_configured_is_503(make_client):
    client = make_client(completions())
    seeded(client)

    response = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 1, "check_feasibility": True},
    )

    assert response.status_code == 503
    assert response.json()["error"]["type"] == "feasibility_not_configured"


def test_generate_with_unreachable_experience_model_is_502_and_stores_nothing(make_client):
    client = make_client(
        completions(),
        feasibility_experience_model_url="http://127.0.0.1:9",
        feasibility_timeout_s=2,
    )
    seeded(client)

    response = client.post(
        "/v1/curriculum:generate", json={"num_seed_tasks": 1, "variations_per_task": 1}
    )

    assert response.status_code == 502
    assert response.json()["error"]["type"] == "feasibility_check_failed"
    assert client.get("/v1/tasks", params={"origin": "generated"}).json()["count"] == 0


def test_lineage_lists_a_tasks_variations_and_its_ancestors(make_client):
    client = make_client(completions())
    seeded(client)
    created = client.post(
        "/v1/curriculum:generate",
        json={"num_seed_tasks": 1, "variations_per_task": 2, "check_feasibility": False},
    ).json()["created"]

    children = client.get("/v1/tasks", params={"parent_task_id": SEED}).json()
    detail = client.get(f"/v1/tasks/{created[0]['task_id']}").json()

    assert children["count"] == 2
    assert sorted(t["task_id"] for t in children["data"]) == sorted(t["task_id"] for t in created)
    assert {t["parent_task_id"] for t in children["data"]} == {SEED}
    assert detail["lineage"] == [SEED]
    assert client.get("/v1/tasks", params={"parent_task_id": "nobody"}).json()["count"] == 0


def test_client_generate_and_list_children(make_client, experience_model):
    url, _ = experience_model
    app_client = make_client(completions(), feasibility_experience_model_url=url)
    seeded(app_client)
    with serve_app(app_client.app) as tg_url, TaskGeneratorClient(tg_url, max_retries=0) as tasks:
        out = tasks.generate(1, 3, seed=11, round=5)
        children = tasks.list_tasks(parent_task_id=SEED)

    assert out.num_infeasible == 2
    assert [t.task_id for t in children.data] == [t.task_id for t in out.created]
    assert out.created[0].metadata["generation_round"] == 5


# -- cluster scores (PPO) ---------------------------------------------------------------


def test_cluster_scores_through_the_api(make_client):
    client = make_client(score_grouping="cluster", score_clusters=2, score_window=4)
    coin = [make_task(i, instruction=f"Find the coin in room {i}.") for i in range(2)]
    cook = [
        make_task(
            i,
            instruction=f"Cook a delicious meal with the pepper number {i}.",
            initial_observation="You are in the kitchen. You see a stove and a fridge.",
        )
        for i in range(2, 4)
    ]
    assert (
        client.post("/v1/tasks", json={"tasks": [task_json(t) for t in coin + cook]}).status_code
        == 200
    )
    rewards = [(coin[0], 1.0), (coin[1], 0.0), (cook[0], 1.0), (cook[1], 1.0)]

    answers = {
        t.task_id: client.post(
            f"/v1/tasks/{quote(t.task_id, safe='')}/outcomes", json={"rewards": [r]}
        ).json()
        for t, r in rewards
    }
    ranking = client.get("/v1/curriculum/scores").json()["data"]

    scores = {row["task_id"]: row["score"] for row in ranking}
    assert scores == {
        coin[0].task_id: 0.25,
        coin[1].task_id: 0.25,
        cook[0].task_id: 0.0,
        cook[1].task_id: 0.0,
    }
    # the last report is scored against all four tasks, like the ranking
    assert answers[cook[1].task_id]["score"] == scores[cook[1].task_id]
