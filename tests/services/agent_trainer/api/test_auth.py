"""API keys on the agent trainer: /v1 routes need a team's key when auth is enabled.

Jobs are not scoped by team yet (see the teams section of the README); this checks the shared
wiring only.
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
