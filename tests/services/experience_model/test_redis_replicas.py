"""Episodes in Redis across real service processes: a restart mid-episode, and two replicas.

Each service is ``python -m experience_model`` on the fake backend (it echoes the current state,
reward 0) with ``EXPERIENCE_MODEL_REDIS_URL`` pointing at the session's real Redis, talked to over
HTTP. A restart is a ``SIGKILL``: nothing is flushed on the way down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dreamgym.stack.ports import free_port

from .factories import make_task, task_json

pytestmark = pytest.mark.integration


class ServiceProcess:
    """One ``python -m experience_model`` process on ``port`` (restartable)."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.env = env | {"EXPERIENCE_MODEL_PORT": str(self.port)}
        self.log = workdir / f"experience-model-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30.0)

    def start(self) -> ServiceProcess:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "experience_model"],
                cwd=self.workdir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout_s: float = 90.0) -> ServiceProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"service exited ({self.proc.returncode}):\n{self.log.read_text()}")
            try:
                if self.http.get("/readyz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        pytest.fail(f"service not ready after {timeout_s:.0f}s:\n{self.log.read_text()}")

    def kill(self) -> None:
        """``SIGKILL`` and wait: no lifespan shutdown, nothing flushed."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.http.close()

    # -- API ---------------------------------------------------------------------------------
    def reset(self, **fields: Any) -> str:
        body = {"task": task_json(make_task(fields.pop("index", 0))), **fields}
        response = self.http.post("/v1/episodes", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["episode_id"])

    def step(self, episode_id: str, action: str) -> httpx.Response:
        return self.http.post(f"/v1/episodes/{episode_id}/step", json={"action": action})

    def episode(self, episode_id: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/episodes/{episode_id}")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]


@pytest.fixture()
def start_service(redis_url: str, tmp_path: Path) -> Iterator[Callable[..., list[ServiceProcess]]]:
    """Factory: ``start_service(n, **settings)`` → ``n`` ready replicas sharing the test Redis."""
    started: list[ServiceProcess] = []
    base = {k: v for k, v in os.environ.items() if not k.startswith("EXPERIENCE_MODEL_")}

    def start(n: int = 1, **settings: Any) -> list[ServiceProcess]:
        env = base | {
            "EXPERIENCE_MODEL_BACKEND": "fake",
            "EXPERIENCE_MODEL_HOST": "127.0.0.1",
            "EXPERIENCE_MODEL_REDIS_URL": redis_url,
            "EXPERIENCE_MODEL_DATA_DIR": str(tmp_path / "data"),
            "EXPERIENCE_MODEL_JSON_LOGS": "false",
            "EXPERIENCE_MODEL_LOG_LEVEL": "WARNING",
            "EXPERIENCE_MODEL_MAX_BATCH_WAIT_MS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        env |= {f"EXPERIENCE_MODEL_{k.upper()}": str(v) for k, v in settings.items()}
        replicas = [ServiceProcess(tmp_path, env).start() for _ in range(n)]
        started.extend(replicas)
        return [r.wait_ready() for r in replicas]

    yield start
    for replica in started:
        replica.stop()


def test_restarted_service_continues_the_episode_mid_way(start_service):
    (service,) = start_service()
    episode_id = service.reset(seed=3, max_steps=5)
    first = service.step(episode_id, "move north")
    assert first.status_code == 200, first.text

    service.kill()
    service.start().wait_ready()
    before = service.episode(episode_id)
    second = service.step(episode_id, "move south")

    assert [t["action"] for t in before["transitions"]] == ["move north"]
    assert before["state"]["step"] == 1
    assert second.status_code == 200, second.text
    transition = second.json()["transition"]
    assert transition["step"] == 1
    assert transition["observation"] == first.json()["transition"]["next_observation"]
    after = service.episode(episode_id)
    assert [t["action"] for t in after["transitions"]] == ["move north", "move south"]
    assert after["transitions"][0] == first.json()["transition"]
    assert after["state"]["step"] == 2 and after["max_steps"] == 5
    assert service.http.get("/v1/model").json()["live_episodes"] == 1


def test_two_replicas_serve_one_episode_alternately(start_service):
    a, b = start_service(2, max_live_episodes=2)
    episode_id = a.reset(max_steps=4)

    steps = [replica.step(episode_id, f"move {i}") for i, replica in enumerate((b, a, b, a))]
    finished = b.step(episode_id, "move again")

    assert [s.status_code for s in steps] == [200] * 4, [s.text for s in steps]
    assert [s.json()["transition"]["step"] for s in steps] == [0, 1, 2, 3]
    assert steps[-1].json()["truncated"] is True
    assert finished.status_code == 409
    assert finished.json()["error"]["type"] == "episode_finished"
    seen_by_a, seen_by_b = a.episode(episode_id), b.episode(episode_id)
    assert seen_by_a == seen_by_b
    assert [t["action"] for t in seen_by_a["transitions"]] == [f"move {i}" for i in range(4)]
    assert a.http.get("/v1/stats").json()["live_episodes"] == 1
    assert b.http.get("/v1/model").json()["live_episodes"] == 1

    other = b.reset(index=1)  # capacity (2) is counted across both replicas
    full = a.http.post("/v1/episodes", json={"task": task_json(make_task(2))})
    assert full.status_code == 429
    assert full.json()["error"]["type"] == "capacity_reached"
    assert "retry-after" in full.headers

    assert b.http.delete(f"/v1/episodes/{episode_id}").status_code == 204
    assert a.http.get(f"/v1/episodes/{episode_id}").status_code == 404
    assert a.episode(other)["task_id"] == make_task(1).task_id
    assert a.http.get("/v1/model").json()["live_episodes"] == 1
