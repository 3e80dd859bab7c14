"""The trainer's job API with ``job_backend="celery"``: a real Redis and a real ``cpu`` worker.

Only a ``cpu`` worker runs, so routing is visible: the random-policy ``evaluate`` job (``cpu``)
runs for real on 5 held-out TextWorldExpress games, while a ``grpo`` job (``gpu``) stays queued
until it is cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from agent_trainer.main import create_app
from agent_trainer.settings import Settings
from dreamgym.stack.workers import CeleryWorker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

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
def redis_url(redis_server: object) -> Iterator[str]:
    url = redis_server.url(7)  # type: ignore[attr-defined]
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="module")
def cpu_worker(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(
        "cpu-api",
        ["cpu"],
        env={"DREAMGYM_CELERY_BROKER_URL": redis_url},
        log_path=tmp_path_factory.mktemp("logs") / "cpu.log",
    ).start()
    worker.wait_ready(redis_url)
    yield worker
    worker.kill()


@pytest.fixture(scope="module")
def client(
    redis_url: str, cpu_worker: CeleryWorker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("agent-trainer"),
        json_logs=False,
        log_level="WARNING",
        job_backend="celery",
        redis_url=redis_url,
        experience_model_url="http://127.0.0.1:9",
        replay_store_url="http://127.0.0.1:9",
        task_generator_url="http://127.0.0.1:9",
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def wait_until_finished(client: TestClient, job_id: str, timeout_s: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = client.get(f"/v1/jobs/{job_id}").json()
        if record["state"] in ("succeeded", "failed", "cancelled"):
            return record
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not finish in {timeout_s} s: {record}")


def test_settings_celery_backend_without_redis_is_refused(tmp_path):
    with pytest.raises(ValueError, match="AGENT_TRAINER_REDIS_URL"):
        Settings(data_dir=tmp_path, job_backend="celery")


def test_readyz_with_reachable_job_store_is_ready(client):
    assert client.get("/readyz").json()["status"] == "ready"


def test_submit_bad_config_is_422_naming_the_field_and_enqueues_nothing(client, redis_url):
    before = client.get("/v1/jobs").json()["count"]

    response = client.post(
        "/v1/jobs", json={"kind": "evaluate", "config": {"evaluate": {"episodes": 0}}}
    )

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "config.evaluate.episodes"
    assert client.get("/v1/jobs").json()["count"] == before
    assert redis.Redis.from_url(redis_url).llen("gpu") == 0


def test_grpo_job_waits_on_the_gpu_queue_and_is_cancelled_while_queued(client, redis_url):
    response = client.post("/v1/jobs", json={"kind": "grpo", "config": {"grpo": {}}})
    job_id = response.json()["job_id"]
    time.sleep(2.0)  # the idle cpu worker must not take it

    queued = client.get(f"/v1/jobs/{job_id}").json()
    on_gpu_queue = redis.Redis.from_url(redis_url).llen("gpu")
    cancelled = client.post(f"/v1/jobs/{job_id}/cancel")

    assert response.status_code == 201, response.text
    assert queued["state"] == "queued"
    assert on_gpu_queue == 1
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    assert client.get(f"/v1/jobs/{job_id}").json()["state"] == "cancelled"
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 409


@pytest.mark.envs
def test_evaluate_job_runs_on_the_cpu_worker_and_is_listed_by_state(client):
    response = client.post("/v1/jobs", json={"kind": "evaluate", "config": EVALUATE})
    assert response.status_code == 201, response.text

    record = wait_until_finished(client, response.json()["job_id"])
    succeeded = client.get("/v1/jobs", params={"state": "succeeded"}).json()
    running = client.get("/v1/jobs", params={"state": "running"}).json()

    assert record["state"] == "succeeded", record["error"]
    assert record["worker"].startswith("cpu-api@")
    assert record["result"]["episodes"] == 5
    assert record["result"]["ci95_low"] <= record["result"]["success_rate"]
    assert record["progress"] == 1.0
    assert [j["job_id"] for j in succeeded["data"]] == [record["job_id"]]
    assert running == {"data": [], "count": 0}
