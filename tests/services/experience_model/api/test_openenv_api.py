"""The experience model as an OpenEnv environment, driven by the real ``openenv-core`` client.

A live uvicorn server (fake LLM backend) serves the app; ``GenericEnvClient`` and the typed
``ExperienceModelEnvClient`` talk WebSocket to ``/openenv/ws``, raw HTTP covers
``/openenv/{reset,step,state,schema}``, and ``openenv validate --url`` checks the runtime
contract.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dreamgym.openenv_types import ExperienceModelAction
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from experience_model.main import create_app
from experience_model.settings import Settings

from ..factories import GARBAGE, WIN, make_task, scripted_responder, task_json
from .helpers import assert_envelope

pytest.importorskip("openenv.core")
from openenv.core import GenericEnvClient  # noqa: E402

from dreamgym.clients.openenv import ExperienceModelEnvClient  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(
        backend="fake",
        data_dir=Path(tmp_path_factory.mktemp("em")),
        json_logs=False,
        log_level="WARNING",
        replay_store_url=None,
        parse_retries=0,
        max_batch_wait_ms=1.0,
        default_max_steps=5,
    )
    app = create_app(settings, backend=FakeLLMBackend(responder=scripted_responder))
    with serve_app(app) as url:
        yield url


@pytest.fixture()
def openenv_url(base_url: str) -> str:
    return f"{base_url}/openenv"


async def test_generic_client_plays_an_episode_over_websocket(openenv_url: str) -> None:
    async with GenericEnvClient(base_url=openenv_url) as env:
        first = await env.reset(task=task_json(make_task(3)), seed=0)
        moved = await env.step({"text": "move north"})
        won = await env.step({"text": WIN})
        state = await env.state()

    assert first.observation["text"] == "You are in the kitchen of game 3."
    assert first.observation["admissible_actions"] == ["move north", WIN]
    assert (first.reward, first.done) == (None, False)
    assert moved.observation["text"] == "You did move north."
    assert (moved.reward, moved.done) == (0.0, False)
    assert (won.reward, won.done) == (1.0, True)
    assert won.observation["won"] is True and won.observation["reasoning"] == "coin taken"
    assert state["episode_id"] == first.observation["episode_id"]
    assert (state["step_count"], state["terminated"]) == (2, True)


def test_sync_wrapper_of_the_generic_client(openenv_url: str) -> None:
    with GenericEnvClient(base_url=openenv_url).sync() as env:
        env.reset(task=task_json(make_task(1)), seed=1, max_steps=1)
        result = env.step({"text": "look"})
        state = env.state()

    assert result.done is True and result.observation["truncated"] is True
    assert state["max_steps"] == 1


async def test_typed_client_parses_observation_and_state(openenv_url: str) -> None:
    async with ExperienceModelEnvClient(openenv_url) as env:
        reset = await env.reset(task=make_task(2))
        result = await env.step(ExperienceModelAction(text="move north", seed=7))
        state = await env.state()

    assert reset.observation.task == "Find the coin in game 2."
    assert result.observation.text == "You did move north."
    assert result.observation.step == 1 and result.reward == 0.0
    assert state.step_count == 1 and state.task_id == "twx-coin/train/2"


async def test_errors_are_reported_and_the_session_survives(openenv_url: str) -> None:
    async with GenericEnvClient(base_url=openenv_url) as env:
        with pytest.raises(RuntimeError, match="SESSION_ERROR"):
            await env.step({"text": "look"})
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            await env.reset(seed=0)
        await env.reset(task=task_json(make_task(0)))
        with pytest.raises(RuntimeError, match="could not be parsed.*EXECUTION_ERROR"):
            await env.step({"text": GARBAGE})
        await env.step({"text": WIN})
        with pytest.raises(RuntimeError, match="already terminated"):
            await env.step({"text": "look"})
        again = await env.reset(task=task_json(make_task(4)))

    assert again.observation["text"] == "You are in the kitchen of game 4."


async def test_reset_replaces_and_disconnect_closes_the_sessions_episode(
    openenv_url: str, base_url: str
) -> None:
    async with GenericEnvClient(base_url=openenv_url) as env:
        first = (await env.reset(task=task_json(make_task(0)))).observation["episode_id"]
        second = (await env.reset(task=task_json(make_task(1)))).observation["episode_id"]
        replaced = httpx.get(f"{base_url}/v1/episodes/{first}").status_code

    deadline = time.monotonic() + 10
    while httpx.get(f"{base_url}/v1/episodes/{second}").status_code != 404:
        assert time.monotonic() < deadline, "episode still live after the socket closed"
        time.sleep(0.05)
    assert replaced == 404


async def test_concurrent_sessions_are_isolated(openenv_url: str) -> None:
    async with (
        GenericEnvClient(base_url=openenv_url) as a,
        GenericEnvClient(base_url=openenv_url) as b,
    ):
        ra = await a.reset(task=task_json(make_task(5)))
        rb = await b.reset(task=task_json(make_task(6)))
        await a.step({"text": "move north"})
        state_a, state_b = await a.state(), await b.state()

    assert ra.observation["episode_id"] != rb.observation["episode_id"]
    assert (state_a["step_count"], state_b["step_count"]) == (1, 0)


def test_http_reset_step_state_round_trip(openenv_url: str) -> None:
    with httpx.Client(base_url=openenv_url) as http:
        reset = http.post("/reset", json={"task": task_json(make_task(8)), "seed": 3}).json()
        episode_id = reset["observation"]["episode_id"]
        step = http.post(
            "/step", json={"action": {"text": "move north"}, "episode_id": episode_id}
        ).json()
        state = http.get("/state", params={"episode_id": episode_id}).json()

    assert reset["done"] is False and reset["reward"] is None
    assert step["observation"]["text"] == "You did move north." and step["reward"] == 0.0
    assert state["step_count"] == 1 and state["observation"] == "You did move north."


def test_http_errors_use_the_envelope(openenv_url: str) -> None:
    with httpx.Client(base_url=openenv_url) as http:
        missing_task = http.post("/reset", json={"seed": 1})
        unknown = http.post("/step", json={"action": {"text": "x"}, "episode_id": "ep-none"})
        empty_action = http.post("/step", json={"action": {"text": ""}, "episode_id": "ep-x"})

    assert_envelope(missing_task, 422, "invalid_request", "body.task")
    assert_envelope(unknown, 404, "episode_not_found", "episode_id")
    assert_envelope(empty_action, 422, "invalid_request", "body.action.text")


def test_schema_describes_action_observation_and_state(openenv_url: str) -> None:
    schema = httpx.get(f"{openenv_url}/schema").json()

    assert schema["action"]["required"] == ["text"]
    assert {"text", "admissible_actions", "episode_id", "reward", "done"} <= set(
        schema["observation"]["properties"]
    )
    assert {"episode_id", "step_count"} <= set(schema["state"]["properties"])


def test_openenv_validate_cli_accepts_the_running_service(openenv_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", "--url", openenv_url],
        capture_output=True,
        text=True,
        timeout=120,
    )

    report = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert report["passed"] is True and report["mode"] == "simulation"
    assert report["standard_profile"] == "openenv-http/1.x"
