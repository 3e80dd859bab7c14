"""API tests of the agent trainer: /v1/jobs over a real LocalJobRunner, /healthz, /readyz.

One app per module (its runner spawns job processes); the ``evaluate`` job runs for real: the
random policy on 5 held-out TextWorldExpress Coin Collector games.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agent_trainer.main import create_app
from agent_trainer.settings import Settings

EVALUATE = {
    "evaluate": {
        "environment": "twx-coin",
        "policy": "random",
        "episodes": 5,
        "max_steps": 10,
        "concurrency": 1,
    }
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("agent-trainer"),
        json_logs=False,
        log_level="WARNING",
        max_running_jobs=2,
        experience_model_url="http://127.0.0.1:9",
        replay_store_url="http://127.0.0.1:9",
        task_generator_url="http://127.0.0.1:9",
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def assert_envelope(response, status: int, error_type: str, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["code"] == status
    if param is not None:
        assert error["param"] == param
    return error


def wait_until_finished(client: TestClient, job_id: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = client.get(f"/v1/jobs/{job_id}").json()
        if record["state"] in ("succeeded", "failed", "cancelled"):
            return record
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not finish in {timeout_s} s: {record}")


@pytest.fixture(scope="module")
def finished_jobs(client: TestClient) -> dict[str, dict]:
    """Two jobs run side by side to their end: an evaluate job that succeeded (the random
    policy on 5 held-out real games) and one that failed in its process (its policy checkpoint
    does not exist where the job runs).
    """
    failing = {"evaluate": {**EVALUATE["evaluate"], "policy": "/nonexistent/checkpoint"}}
    ids = {}
    for name, config in (("succeeded", EVALUATE), ("failed", failing)):
        response = client.post("/v1/jobs", json={"kind": "evaluate", "config": config})
        assert response.status_code == 201, response.text
        ids[name] = response.json()["job_id"]
    return {name: wait_until_finished(client, job_id) for name, job_id in ids.items()}


@pytest.fixture(scope="module")
def evaluate_job(finished_jobs: dict[str, dict]) -> dict:
    return finished_jobs["succeeded"]


@pytest.fixture(scope="module")
def failed_job(finished_jobs: dict[str, dict]) -> dict:
    return finished_jobs["failed"]


# -- health ------------------------------------------------------------------------------------


def test_healthz_is_ok(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["service"] == "agent-trainer"


def test_readyz_runner_started_is_ready(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_readyz_before_startup_is_503_naming_the_runner(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, json_logs=False))
    client = TestClient(app)  # not entered: the lifespan (and the runner) never started

    response = client.get("/readyz")

    assert response.status_code == 503
    assert "runner" in response.json()["failing"]


# -- submit validation -------------------------------------------------------------------------


def test_submit_unknown_kind_is_422_naming_kind(client):
    response = client.post("/v1/jobs", json={"kind": "train", "config": {}})

    error = assert_envelope(response, 422, "invalid_request", "body.kind")
    assert "collect" in error["message"]


def test_submit_grpo_group_size_one_is_422_naming_the_field(client):
    response = client.post("/v1/jobs", json={"kind": "grpo", "config": {"grpo": {"group_size": 1}}})

    error = assert_envelope(response, 422, "invalid_request", "config.grpo.group_size")
    assert "group_size" in error["message"]


def test_submit_grpo_learning_rate_zero_is_422_naming_the_field(client):
    response = client.post(
        "/v1/jobs", json={"kind": "grpo", "config": {"grpo": {"learning_rate": 0}}}
    )

    assert_envelope(response, 422, "invalid_request", "config.grpo.learning_rate")


def test_submit_grpo_unknown_hyperparameter_is_422_naming_it(client):
    response = client.post("/v1/jobs", json={"kind": "grpo", "config": {"grpo": {"grup_size": 4}}})

    assert_envelope(response, 422, "invalid_request", "config.grpo.grup_size")


@pytest.mark.parametrize(
    ("ppo", "param"),
    [
        ({"gae_lambda": 2.0}, "config.ppo.gae_lambda"),
        ({"vf_clip": -1.0}, "config.ppo.vf_clip"),
        ({"policy": {"lora": {"r": 0}}}, "config.ppo.policy.lora.r"),
    ],
)
def test_submit_ppo_bad_hyperparameter_is_422_naming_the_field(client, ppo, param):
    response = client.post("/v1/jobs", json={"kind": "ppo", "config": {"ppo": ppo}})

    error = assert_envelope(response, 422, "invalid_request", param)
    assert param.rsplit(".", 1)[-1] in error["message"]


@pytest.mark.parametrize(
    ("kind", "section", "param"),
    [
        ("grpo", {"real_step_budget": 100}, "config.grpo.real_step_budget"),
        ("ppo", {"environment_mode": "real", "real_step_budget": 0}, "config.ppo.real_step_budget"),
        ("grpo", {"environment_mode": "dreamland"}, "config.grpo.environment_mode"),
        ("bc", {"epochs": 0}, "config.bc.epochs"),
        ("bc", {"environment": "nope"}, "config.bc.environment"),
    ],
)
def test_submit_real_mode_and_bc_bad_config_is_422_naming_the_field(client, kind, section, param):
    response = client.post("/v1/jobs", json={"kind": kind, "config": {kind: section}})

    error = assert_envelope(response, 422, "invalid_request", param)
    assert param.rsplit(".", 1)[-1] in error["message"]


def test_submit_evaluate_zero_episodes_is_422_naming_the_field(client):
    response = client.post(
        "/v1/jobs", json={"kind": "evaluate", "config": {"evaluate": {"episodes": 0}}}
    )

    assert_envelope(response, 422, "invalid_request", "config.evaluate.episodes")


def test_submit_evaluate_unknown_environment_is_422_naming_the_field(client):
    response = client.post(
        "/v1/jobs", json={"kind": "evaluate", "config": {"evaluate": {"environment": "twx-x"}}}
    )

    error = assert_envelope(response, 422, "invalid_request", "config.evaluate.environment")
    assert "twx-coin" in error["message"]  # lists the valid ids


def test_submit_collect_unknown_policy_is_422_naming_the_list_item(client):
    response = client.post(
        "/v1/jobs", json={"kind": "collect", "config": {"policies": ["expert", "greedy"]}}
    )

    error = assert_envelope(response, 422, "invalid_request", "config.policies.1")
    assert "epsilon_greedy" in error["message"]


def test_submit_invalid_config_creates_no_job(client):
    before = client.get("/v1/jobs").json()["count"]

    client.post("/v1/jobs", json={"kind": "grpo", "config": {"grpo": {"group_size": 1}}})

    assert client.get("/v1/jobs").json()["count"] == before


# -- reading and cancelling --------------------------------------------------------------------


def test_get_unknown_job_is_404(client):
    response = client.get("/v1/jobs/job-doesnotexist")

    assert_envelope(response, 404, "not_found", "job_id")


def test_cancel_unknown_job_is_404(client):
    assert_envelope(client.post("/v1/jobs/job-doesnotexist/cancel"), 404, "not_found", "job_id")


def test_metrics_of_unknown_job_is_404(client):
    assert_envelope(client.get("/v1/jobs/job-doesnotexist/metrics"), 404, "not_found")


def test_list_jobs_bad_state_is_422(client):
    assert_envelope(
        client.get("/v1/jobs", params={"state": "done"}), 422, "invalid_request", "query.state"
    )


@pytest.mark.envs
def test_evaluate_job_random_policy_succeeds_with_success_rate_and_ci(evaluate_job):
    assert evaluate_job["state"] == "succeeded", evaluate_job["error"]
    result = evaluate_job["result"]
    assert result["policy"] == "random"
    assert result["episodes"] == 5
    assert result["ci95_low"] <= result["success_rate"] <= result["ci95_high"]
    assert result["real_steps"] == pytest.approx(result["mean_length"] * 5)
    assert evaluate_job["progress"] == 1.0
    assert evaluate_job["config"]["evaluate"]["episodes"] == 5


@pytest.mark.envs
def test_cancel_finished_job_is_409(client, evaluate_job):
    response = client.post(f"/v1/jobs/{evaluate_job['job_id']}/cancel")

    assert_envelope(response, 409, "conflict", "job_id")
    assert client.get(f"/v1/jobs/{evaluate_job['job_id']}").json()["state"] == "succeeded"


@pytest.mark.envs
def test_list_jobs_state_filter_returns_only_that_state(client, evaluate_job, failed_job):
    succeeded = client.get("/v1/jobs", params={"state": "succeeded"}).json()
    failed = client.get("/v1/jobs", params={"state": "failed"}).json()

    assert evaluate_job["job_id"] in [j["job_id"] for j in succeeded["data"]]
    assert {j["state"] for j in succeeded["data"]} == {"succeeded"}
    assert succeeded["count"] == len(succeeded["data"])
    assert [j["job_id"] for j in failed["data"]] == [failed_job["job_id"]]
    assert failed_job["job_id"] not in [j["job_id"] for j in succeeded["data"]]


@pytest.mark.envs
def test_job_metrics_of_evaluate_job_is_an_empty_curve(client, evaluate_job):
    response = client.get(f"/v1/jobs/{evaluate_job['job_id']}/metrics")

    assert response.status_code == 200
    assert response.json() == {"data": [], "count": 0}


def test_submit_grpo_fills_missing_service_urls_from_settings(client):
    with_service_urls = client.app.state.with_service_urls

    config = with_service_urls("grpo", {"grpo": {}, "services": {"replay_store": "http://r"}})

    assert config["services"] == {
        "experience_model": "http://127.0.0.1:9",
        "replay_store": "http://r",
        "task_generator": "http://127.0.0.1:9",
    }
    assert with_service_urls("evaluate", EVALUATE) == EVALUATE


@pytest.mark.envs
def test_failing_job_is_recorded_failed_with_its_error(client, failed_job):
    assert failed_job["state"] == "failed"
    assert "no config.json in /nonexistent/checkpoint" in failed_job["error"]
    assert failed_job["result"] is None
