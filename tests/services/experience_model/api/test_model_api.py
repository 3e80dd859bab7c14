"""API tests of model admin, health, readiness, the OpenAPI schema and training-job routes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dreamgym.testing.fakes import FakeLLMBackend
from experience_model.domain.prompts import FORMAT_VERSION
from experience_model.main import create_app

from ..factories import scripted_responder
from .helpers import assert_envelope, reset, step


def test_healthz_is_ok(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_readyz_with_loaded_model_is_ready(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_app_before_lifespan_is_not_ready_and_routes_answer_503(settings_for):
    app = create_app(settings_for(), backend=FakeLLMBackend(responder=scripted_responder))
    client = TestClient(app)  # not entered: the lifespan has not built the runtime

    ready = client.get("/readyz")
    episodes = client.post("/v1/episodes/ep-x/step", json={"action": "look"})

    assert ready.status_code == 503
    assert ready.json()["failing"] == {"model": "model not loaded"}
    assert_envelope(episodes, 503, "backend_unavailable")
    assert "Retry-After" in episodes.headers


def test_openapi_lists_every_route(client):
    paths = client.get("/openapi.json").json()["paths"]

    assert {"post"} <= set(paths["/v1/episodes"])
    assert {"post"} <= set(paths["/v1/episodes/{episode_id}/step"])
    assert {"get", "delete"} <= set(paths["/v1/episodes/{episode_id}"])
    assert "post" in paths["/v1/transitions:predict"]
    assert "get" in paths["/v1/model"]
    assert "post" in paths["/v1/model:reload"]
    assert "post" in paths["/v1/training-jobs"]
    assert "/healthz" in paths and "/readyz" in paths


def test_model_info_reports_settings_and_live_episodes(make_client):
    client = make_client(model_path="tiny:layers=1", retrieval_k=3, history_length=4)
    reset(client)
    reset(client)

    info = client.get("/v1/model").json()

    assert info["backend"] == "fake"
    assert info["model_path"] == "tiny:layers=1"
    assert info["format_version"] == FORMAT_VERSION
    assert info["retrieval_k"] == 3
    assert info["history_length"] == 4
    assert info["live_episodes"] == 2


def test_model_info_live_episodes_drops_after_close(client):
    ep = reset(client)

    client.delete(f"/v1/episodes/{ep['episode_id']}")

    assert client.get("/v1/model").json()["live_episodes"] == 0


def test_model_reload_missing_checkpoint_is_404_naming_model_path(make_client, tmp_path):
    client = make_client(backend="transformers", model_path="tiny")
    missing = tmp_path / "no-such-checkpoint"

    response = client.post("/v1/model:reload", json={"model_path": str(missing)})

    error = assert_envelope(response, 404, "not_found", "model_path")
    assert str(missing) in error["message"]
    assert client.get("/v1/model").json()["model_path"] == "tiny"


def test_model_reload_empty_path_is_422(client):
    response = client.post("/v1/model:reload", json={"model_path": ""})

    assert_envelope(response, 422, "invalid_request", "body.model_path")


def test_model_reload_swaps_backend_and_keeps_episodes(make_client):
    original = FakeLLMBackend(responder=scripted_responder)
    client = make_client(original)
    ep = reset(client)

    response = client.post("/v1/model:reload", json={"model_path": "checkpoints/new"})
    stepped = step(client, ep["episode_id"], "look")

    assert response.status_code == 200, response.text
    assert response.json()["model_path"] == "checkpoints/new"
    assert stepped.status_code == 200
    assert original.calls == []  # the step was served by the reloaded backend


@pytest.mark.model
def test_model_reload_tiny_model_serves_next_step(make_client):
    original = FakeLLMBackend(responder=scripted_responder)
    client = make_client(original, backend="transformers", max_new_tokens=4, parse_retries=0)
    ep = reset(client)

    response = client.post(
        "/v1/model:reload", json={"model_path": "tiny:layers=1,hidden=32,heads=2,intermediate=64"}
    )
    stepped = step(client, ep["episode_id"], "look")

    assert response.status_code == 200, response.text
    assert original.calls == []
    # 4 tokens of an untrained model cannot hold the five-tag format.
    assert_envelope(stepped, 502, "malformed_transition")
    assert client.get(f"/v1/episodes/{ep['episode_id']}").json()["state"]["step"] == 0


def test_training_job_invalid_config_is_422_naming_config_field(client):
    response = client.post("/v1/training-jobs", json={"config": {"output_dir": "x"}})

    error = assert_envelope(response, 422, "invalid_request", "config.replay_store_url")
    assert "replay_store_url" in error["message"]


def test_training_job_unknown_id_is_404(client):
    response = client.get("/v1/training-jobs/job-missing")

    assert_envelope(response, 404, "not_found", "job_id")
