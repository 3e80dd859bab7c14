"""API keys on the agent trainer: /v1 routes need a team's key when auth is enabled.

Every job belongs to the team whose key submitted it: another team gets 404 for it (read, cancel,
metrics) and never sees it in a list; the key is forwarded to the job but never returned; a team
over its active-job quota gets 429 with ``Retry-After``.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agent_trainer.main import create_app
from agent_trainer.settings import Settings

pytestmark = pytest.mark.integration


def test_jobs_need_a_valid_key_and_health_does_not(tmp_path, auth_database_url, make_team):
    settings = Settings(
        data_dir=tmp_path,
        json_logs=False,
        log_level="WARNING",
        auth_enabled=True,
        auth_database_url=auth_database_url,
        auth_cache_ttl_s=0,
    )
    _, key = make_team("trainer")

    with TestClient(create_app(settings)) as client:
        anonymous = client.get("/v1/jobs")
        wrong = client.get("/v1/jobs", headers={"Authorization": "Bearer wrong"})
        with_key = client.get("/v1/jobs", headers={"Authorization": f"Bearer {key}"})
        health = client.get("/healthz")

    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert with_key.status_code == 200
    assert health.status_code == 200


EVALUATE = {
    "evaluate": {"environment": "twx-coin", "policy": "random", "episodes": 3, "max_steps": 5}
}
FIDELITY = {"environment": "twx-coin", "episodes": 1, "max_steps": 3}


def auth_settings(tmp_path, auth_database_url, **overrides) -> Settings:
    return Settings(
        data_dir=tmp_path,
        json_logs=False,
        log_level="WARNING",
        auth_enabled=True,
        auth_database_url=auth_database_url,
        auth_cache_ttl_s=0,
        max_running_jobs=2,
        experience_model_url="http://127.0.0.1:9",
        replay_store_url="http://127.0.0.1:9",
        task_generator_url="http://127.0.0.1:9",
        **overrides,
    )


def test_a_job_is_invisible_to_other_teams(tmp_path, auth_database_url, make_team):
    team_a, key_a = make_team("lab-a")
    _, key_b = make_team("lab-b")
    a, b = ({"Authorization": f"Bearer {k}"} for k in (key_a, key_b))

    with TestClient(create_app(auth_settings(tmp_path, auth_database_url))) as client:
        job = client.post("/v1/jobs", json={"kind": "evaluate", "config": EVALUATE}, headers=a)
        job_id = job.json()["job_id"]
        own = client.get(f"/v1/jobs/{job_id}", headers=a)
        other = {
            "get": client.get(f"/v1/jobs/{job_id}", headers=b),
            "cancel": client.post(f"/v1/jobs/{job_id}/cancel", headers=b),
            "metrics": client.get(f"/v1/jobs/{job_id}/metrics", headers=b),
        }
        unknown = client.get("/v1/jobs/job-000000000000", headers=b)
        listed_a = [j["job_id"] for j in client.get("/v1/jobs", headers=a).json()["data"]]
        listed_b = [j["job_id"] for j in client.get("/v1/jobs", headers=b).json()["data"]]
        still_there = client.get(f"/v1/jobs/{job_id}", headers=a).json()

    assert job.status_code == 201 and job.json()["team"] == team_a
    assert own.status_code == 200
    for name, response in other.items():
        assert response.status_code == 404, name
        assert response.json()["error"]["type"] == unknown.json()["error"]["type"] == "not_found"
    assert other["get"].json()["error"]["message"] == f"job '{job_id}' does not exist"
    assert listed_a == [job_id] and listed_b == []
    assert still_there["state"] != "cancelled"  # team B's cancel did nothing


def test_the_submitting_key_reaches_the_job_but_no_response(tmp_path, auth_database_url, make_team):
    _, key = make_team("lab-c")
    headers = {"Authorization": f"Bearer {key}"}

    with TestClient(create_app(auth_settings(tmp_path, auth_database_url))) as client:
        job = client.post(
            "/v1/jobs", json={"kind": "fidelity", "config": FIDELITY}, headers=headers
        )
        job_id = job.json()["job_id"]
        read = client.get(f"/v1/jobs/{job_id}", headers=headers)
        listed = client.get("/v1/jobs", headers=headers)
        stored = client.app.state.runner.get(job_id)

    assert job.status_code == 201, job.text
    assert stored.config["services"]["api_key"] == key  # what the job's clients send
    for text in (job.text, read.text, listed.text):
        assert key not in text and "api_key" not in text
    assert read.json()["config"]["services"]["replay_store"] == "http://127.0.0.1:9"


def test_active_job_quota_answers_429_with_retry_after(tmp_path, auth_database_url, make_team):
    team_d, key_a = make_team("lab-d")
    _, key_b = make_team("lab-e")
    a, b = ({"Authorization": f"Bearer {k}"} for k in (key_a, key_b))
    settings = auth_settings(
        tmp_path, auth_database_url, max_active_jobs_per_team=1, quota_retry_after_s=7
    )
    body = {"kind": "evaluate", "config": EVALUATE}

    with TestClient(create_app(settings)) as client:
        first = client.post("/v1/jobs", json=body, headers=a)
        second = client.post("/v1/jobs", json=body, headers=a)
        other_team = client.post("/v1/jobs", json=body, headers=b)
        client.post(f"/v1/jobs/{first.json()['job_id']}/cancel", headers=a)
        client.post(f"/v1/jobs/{other_team.json()['job_id']}/cancel", headers=b)

    assert first.status_code == 201
    assert second.status_code == 429
    assert second.headers["retry-after"] == "7"
    assert second.json()["error"]["type"] == "quota_exceeded"
    assert team_d in second.json()["error"]["message"]
    assert other_team.status_code == 201  # quotas are per team
