"""Tests of the periodic experience-model refresh (agent_trainer.em_refresh) and its trigger in
the RL loop, with the real typed client over a scripted HTTP transport (no services)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_trainer.config import GRPOConfig
from agent_trainer.em_refresh import (
    RestExperienceModelRefresher,
    build_refresher,
    is_checkpoint_path,
    refresh_sft_config,
)
from agent_trainer.trainer import GRPOTrainer
from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.experience_types import ModelInfo

from .factories import RecordingReplaySink, RecordingTaskSource, ScriptedPool, make_task

SERVED = {
    "backend": "transformers",
    "model_path": "/ckpt/em-0",
    "format_version": "dreamgym-step-v1",
    "retrieval_k": 3,
    "retrieval_source": "real",
    "history_length": 1,
    "live_episodes": 0,
    "use_retrieval": True,
    "use_reasoning": False,
}


class FakeService:
    """Scripted experience-model HTTP API: ``GET /v1/model``, training jobs, reload."""

    def __init__(self, states: list[str], *, result: dict[str, Any] | None = None) -> None:
        self.states = list(states)
        self.result = {"checkpoint": "/ckpt/em-1", "examples": 42} if result is None else result
        self.requests: list[tuple[str, str, Any]] = []
        self.model = dict(SERVED)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        path = request.url.path
        if path == "/v1/model":
            return httpx.Response(200, json=self.model)
        if path == "/v1/model:reload":
            self.model["model_path"] = body["model_path"]
            return httpx.Response(200, json=self.model)
        if path.startswith("/v1/training-jobs"):
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            done = state == "succeeded"
            record = {
                "job_id": "job-1",
                "kind": "sft",
                "state": state,
                "result": self.result if done else None,
                "error": "boom" if state == "failed" else None,
            }
            return httpx.Response(201 if request.method == "POST" else 200, json=record)
        return httpx.Response(404, json={"error": {"type": "not_found", "message": path}})


def refresher(service: FakeService, tmp_path, **kwargs: Any) -> RestExperienceModelRefresher:
    client = ExperienceModelClient(
        "http://em", transport=httpx.MockTransport(service), max_retries=0
    )
    ticks = iter(range(10_000))
    return RestExperienceModelRefresher(
        client,
        replay_store_url="http://rs",
        environment="twx-coin",
        output_root=tmp_path / "em",
        overrides={"steps": 50},
        sleep=lambda s: None,
        clock=lambda: float(next(ticks)),
        **kwargs,
    )


# -- the SFT config ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "checkpoint"),
    [("tiny", False), ("tiny:layers=2", False), ("smollm2-135m", False), ("/runs/em", True)],
)
def test_is_checkpoint_path(path, checkpoint):
    assert is_checkpoint_path(path) is checkpoint


def test_refresh_config_continues_the_served_checkpoint_on_the_grown_buffer():
    config = refresh_sft_config(
        ModelInfo.model_validate(SERVED),
        replay_store_url="http://rs",
        environment="twx-coin",
        output_dir="/out",
        overrides={"steps": 50},
    )

    assert config == {
        "replay_store_url": "http://rs",
        "output_dir": "/out",
        "environment": "twx-coin",
        "data_source": "any",
        "retrieval_k": 3,
        "history_length": 1,
        "use_retrieval": True,
        "use_reasoning": False,
        "base_model": "/ckpt/em-0",
        "tokenizer": "base",
        "steps": 50,
    }


def test_refresh_config_of_a_built_in_model_trains_from_scratch_and_overrides_win():
    served = ModelInfo.model_validate(SERVED | {"model_path": "tiny"})

    config = refresh_sft_config(
        served,
        replay_store_url="http://rs",
        environment="e",
        output_dir="/out",
        overrides={"data_source": "real", "base_model": "tiny:layers=1"},
    )

    assert "tokenizer" not in config
    assert config["base_model"] == "tiny:layers=1"
    assert config["data_source"] == "real"


# -- the refresher ---------------------------------------------------------------------------------


def test_refresh_trains_polls_and_reloads_the_new_checkpoint(tmp_path):
    service = FakeService(["queued", "running", "running", "succeeded"])
    r = refresher(service, tmp_path)

    metrics = r.refresh(iteration=3)

    calls = [(m, p) for m, p, _ in service.requests]
    assert calls == [
        ("GET", "/v1/model"),
        ("POST", "/v1/training-jobs"),
        ("GET", "/v1/training-jobs/job-1"),
        ("GET", "/v1/training-jobs/job-1"),
        ("GET", "/v1/training-jobs/job-1"),
        ("POST", "/v1/model:reload"),
    ]
    submitted = service.requests[1][2]
    assert submitted["kind"] == "sft"
    assert submitted["config"]["output_dir"] == str(tmp_path / "em" / "iter-00003")
    assert submitted["config"]["data_source"] == "any"
    assert service.requests[-1][2] == {"model_path": "/ckpt/em-1"}
    assert metrics["experience_model/refreshes"] == 1.0
    assert metrics["experience_model/refresh_examples"] == 42.0
    assert r.history[0]["checkpoint"] == "/ckpt/em-1"


def test_refresh_failed_job_is_counted_and_nothing_is_reloaded(tmp_path):
    service = FakeService(["running", "failed"])
    r = refresher(service, tmp_path)

    metrics = r.refresh(iteration=0)

    assert metrics == {"experience_model/refresh_failures": 1.0}
    assert ("POST", "/v1/model:reload") not in [(m, p) for m, p, _ in service.requests]
    assert "boom" in r.history[0]["error"]


def test_refresh_times_out_waiting_for_a_job(tmp_path):
    service = FakeService(["running"])
    r = refresher(service, tmp_path, timeout_s=5)

    metrics = r.refresh(iteration=0)

    assert metrics == {"experience_model/refresh_failures": 1.0}
    assert "after timeout" in r.history[0]["error"]
    polls = [p for m, p, _ in service.requests if m == "GET" and "training-jobs" in p]
    assert 3 <= len(polls) <= 6


def test_refresh_service_error_is_counted_not_raised(tmp_path):
    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"type": "unavailable", "message": "down"}})

    client = ExperienceModelClient("http://em", transport=httpx.MockTransport(down), max_retries=0)
    r = RestExperienceModelRefresher(
        client, replay_store_url="http://rs", environment="e", output_root=tmp_path
    )

    assert r.refresh(iteration=0) == {"experience_model/refresh_failures": 1.0}


# -- the trigger in the RL loop ----------------------------------------------------------------


class RecordingRefresher:
    def __init__(self) -> None:
        self.iterations: list[int] = []

    def refresh(self, iteration: int) -> dict[str, float]:
        self.iterations.append(iteration)
        return {"experience_model/refreshes": float(len(self.iterations))}


def config(**overrides: Any) -> GRPOConfig:
    fields = {
        "iterations": 4,
        "tasks_per_iteration": 2,
        "group_size": 2,
        "max_steps": 2,
        "epochs_per_iteration": 1,
        "beta": 0.0,
        "curriculum_every": 0,
        "checkpoint_every": 100,
        "em_refresh_every": 2,
    }
    return GRPOConfig(**(fields | overrides))


@pytest.mark.model
def test_trainer_refreshes_every_n_iterations_and_logs_the_metrics(make_policy, tmp_path):
    refresher_ = RecordingRefresher()
    logged: list[dict[str, Any]] = []
    trainer = GRPOTrainer(
        config(),
        policy=make_policy(seed=0),
        pool=ScriptedPool(),
        task_source=RecordingTaskSource([make_task(0), make_task(1)]),
        replay=RecordingReplaySink(),
        run_dir=tmp_path / "run",
        on_metrics=lambda i, m: logged.append(m),
        em_refresher=refresher_,
    )

    trainer.train()
    trainer.close()

    assert refresher_.iterations == [1, 3]
    assert [m.get("experience_model/refreshes") for m in logged] == [None, 1.0, None, 2.0]


@pytest.mark.model
@pytest.mark.parametrize("case", ["never", "real_pool"])
def test_trainer_does_not_refresh_when_off_or_in_the_real_environment(make_policy, tmp_path, case):
    refresher_ = RecordingRefresher()
    pool = ScriptedPool(real=case == "real_pool")
    trainer = GRPOTrainer(
        config(em_refresh_every=0 if case == "never" else 1),
        policy=make_policy(seed=0),
        pool=pool,
        task_source=RecordingTaskSource([make_task(0)]),
        replay=None,
        run_dir=tmp_path / "run",
        em_refresher=refresher_,
    )
    trainer.iteration = 1

    assert trainer.maybe_refresh_experience_model() == {}
    assert refresher_.iterations == []
    trainer.close()


def test_config_negative_refresh_interval_is_named():
    from agent_trainer.config import ConfigValueError

    with pytest.raises(ConfigValueError) as info:
        config(em_refresh_every=-1)

    assert info.value.fields == ["em_refresh_every"]


def test_build_refresher_only_when_refreshing(tmp_path):
    kwargs = {"api_key": None, "environment": "e", "overrides": {"steps": 5}, "run_dir": tmp_path}

    off = build_refresher("http://em", "http://rs", every=0, **kwargs)
    on = build_refresher("http://em", "http://rs", every=3, **kwargs)

    assert off is None
    assert on is not None and on.output_root == tmp_path / "experience_model"
    assert on.replay_store_url == "http://rs" and on.overrides == {"steps": 5}
    on.client.close()
