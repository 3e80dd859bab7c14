"""SFT training jobs with ``job_backend="celery"``: records in a real Redis, messages on ``gpu``.

No worker runs here (an SFT run is the e2e test's business): the tests check that the service
validates, records and routes the job, and cancels it while it is queued.
"""

from __future__ import annotations

import pytest
import redis

from experience_model.settings import Settings

from .helpers import assert_envelope

pytestmark = pytest.mark.integration

SFT = {"replay_store_url": "http://127.0.0.1:9", "output_dir": "/tmp/sft-out", "steps": 5}


@pytest.fixture()
def celery_client(make_client, redis_url):
    return make_client(job_backend="celery", redis_url=redis_url)


def test_settings_celery_backend_without_redis_is_refused(tmp_path):
    with pytest.raises(ValueError, match="EXPERIENCE_MODEL_REDIS_URL"):
        Settings(data_dir=tmp_path, job_backend="celery")


def test_training_job_is_recorded_in_redis_and_queued_on_gpu(celery_client, redis_url):
    response = celery_client.post("/v1/training-jobs", json={"config": SFT})

    job = response.json()
    stored = redis.Redis.from_url(redis_url).get(
        f"dreamgym:jobs:experience_model:job:{job['job_id']}"
    )
    assert response.status_code == 201, response.text
    assert (job["kind"], job["state"], job["config"]) == ("sft", "queued", SFT)
    assert stored is not None
    assert redis.Redis.from_url(redis_url).llen("gpu") == 1
    assert celery_client.get(f"/v1/training-jobs/{job['job_id']}").json() == job


def test_training_job_bad_config_is_422_and_records_nothing(celery_client, redis_url):
    response = celery_client.post("/v1/training-jobs", json={"config": {"output_dir": "x"}})

    assert_envelope(response, 422, "invalid_request", "config.replay_store_url")
    assert redis.Redis.from_url(redis_url).keys("dreamgym:jobs:*") == []
    assert redis.Redis.from_url(redis_url).llen("gpu") == 0


def test_queued_training_job_cancel_is_cancelled(celery_client):
    job_id = celery_client.post("/v1/training-jobs", json={"config": SFT}).json()["job_id"]

    response = celery_client.post(f"/v1/training-jobs/{job_id}/cancel")

    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    assert celery_client.get(f"/v1/training-jobs/{job_id}").json()["state"] == "cancelled"
