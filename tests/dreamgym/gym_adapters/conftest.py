"""A real experience-model app (fake LLM backend) served by uvicorn for the Gymnasium adapters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dreamgym.clients import ExperienceModelClient
from dreamgym.llm.base import SamplingParams
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from dreamgym.types import Task
from experience_model.domain.prompts import render_step_target
from experience_model.main import create_app
from experience_model.settings import Settings

WIN, LOSE, GARBAGE = "take coin", "jump into the pit", "speak gibberish"


def make_task(index: int = 0) -> Task:
    """A seed task whose initial observation names its index."""
    return Task(
        task_id=f"twx-coin/train/{index}",
        environment="twx-coin",
        instruction=f"Find the coin in game {index}.",
        initial_observation=f"You are in the kitchen of game {index}.",
        initial_admissible_actions=["move north", WIN],
        game_seed=index,
    )


def responder(prompt: str, params: SamplingParams) -> str:
    """Deterministic experience model: WIN → reward 1, LOSE → terminal 0, GARBAGE → unparseable."""
    del params
    action = next(
        line.removeprefix("Action: ") for line in prompt.splitlines() if line.startswith("Action: ")
    )
    if action == WIN:
        return render_step_target(
            next_observation="You won.",
            next_admissible_actions=[],
            reward=1.0,
            terminated=True,
            reasoning="the coin is taken",
        )
    if action == LOSE:
        return render_step_target(
            next_observation="You fell.", next_admissible_actions=[], reward=0.0, terminated=True
        )
    if action == GARBAGE:
        return "no idea"
    return render_step_target(
        next_observation=f"You did {action}.",
        next_admissible_actions=["move south", WIN],
        reward=0.0,
        terminated=False,
    )


class RecordingTransport(httpx.HTTPTransport):
    """An HTTP transport that records ``(method, path)`` of every request."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.method, request.url.path))
        return super().handle_request(request)


@pytest.fixture(scope="module")
def em_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a live experience model with the scripted fake backend."""
    fields: dict[str, Any] = {
        "backend": "fake",
        "data_dir": Path(tmp_path_factory.mktemp("em")),
        "json_logs": False,
        "log_level": "WARNING",
        "replay_store_url": None,
        "parse_retries": 0,
        "max_batch_wait_ms": 1.0,
        "default_max_steps": 5,
    }
    app = create_app(Settings(**fields), backend=FakeLLMBackend(responder=responder))
    with serve_app(app) as url:
        yield url


@pytest.fixture()
def transport() -> RecordingTransport:
    return RecordingTransport()


@pytest.fixture()
def client(em_url: str, transport: RecordingTransport) -> Iterator[ExperienceModelClient]:
    """A client of the live service that records its requests (no retries)."""
    with ExperienceModelClient(em_url, transport=transport, max_retries=0) as c:
        yield c
