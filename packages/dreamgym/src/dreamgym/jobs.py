"""Long-running jobs in child processes, with file-backed state (no broker needed).

A service registers job *kinds* (``"grpo" -> "agent_trainer.jobs.grpo:run"``); ``submit`` writes a
:class:`JobRecord`, starts a spawned child process that imports the target and calls
``target(config: dict, ctx: JobContext) -> dict``, and a monitor thread reaps children. Everything
a client asks about a job (state, progress, latest metrics, checkpoint, result, error) is read from
``<root>/<job_id>/status.json``, which only the job's own process writes while it runs; per-step
metrics are appended to ``metrics.jsonl``.

Semantics: a job is run at most once at a time (one process per record); cancellation sets a flag
the job polls (:meth:`JobContext.raise_if_cancelled`) and, after ``cancel_grace_s``, terminates the
process; a process that dies without a final state is marked ``failed`` with its exit code.
This runner is the embedded default; :class:`dreamgym.celery_runner.CeleryJobRunner` keeps the
same record, context and runner API (:class:`JobRunner`) with the state in Redis and the jobs on
Celery workers; :func:`make_job_runner` picks one from a service's settings.
"""

from __future__ import annotations

import importlib
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from dreamgym.errors import ConflictError, InvalidRequestError, NotFoundError
from dreamgym.types import WireModel
from dreamgym.usage import UsageMeter

__all__ = [
    "JobCancelled",
    "JobContext",
    "JobRecord",
    "JobRunner",
    "JobState",
    "LocalJobRunner",
    "make_job_runner",
]

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


def _now() -> str:
    return datetime.now(UTC).isoformat()


class JobRecord(WireModel):
    """Everything known about a job.

    Attributes:
        job_id: unique id.
        kind: registered job kind.
        state: ``queued`` → ``running`` → ``succeeded`` | ``failed`` | ``cancelled``.
        config: the validated job configuration.
        progress: fraction done in [0, 1].
        message: human-readable progress line.
        metrics: the latest metrics the job reported.
        checkpoint: path of the latest checkpoint, if any.
        result: the job's return value once succeeded.
        error: failure description once failed.
        pid: process id of the job's body (on ``worker`` for Celery jobs).
        attempts: how many times the body was started (retries and redeliveries after a lost
            worker count; always 0 or 1 for the local runner).
        worker: the Celery worker that runs or ran the job (``None`` for the local runner).
        team: the team that submitted the job (only that team can read or cancel it).
        usage: resources the job's body used, set when it ended (``wall_s``, ``cpu_s`` of the
            job process and its descendants, ``gpu_s``, ``peak_rss_mb``; see
            :mod:`dreamgym.usage`).
    """

    job_id: str
    kind: str
    state: JobState = "queued"
    config: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    progress: float = 0.0
    message: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    checkpoint: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None
    attempts: int = 0
    worker: str | None = None
    team: str = "default"
    usage: dict[str, Any] | None = None


class JobCancelled(Exception):
    """Raised inside a job when its cancellation was requested."""


class JobContext:
    """Handle a running job uses to report progress and check for cancellation."""

    def __init__(self, root: Path, job_id: str) -> None:
        self.root = root
        self.job_id = job_id
        self.workdir = root / job_id
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _update(self, **fields: Any) -> JobRecord:
        record = _read(self.workdir)
        record = record.model_copy(update=fields)
        _write(self.workdir, record)
        return record

    def report(
        self,
        progress: float | None = None,
        message: str | None = None,
        metrics: Mapping[str, Any] | None = None,
        checkpoint: str | None = None,
    ) -> None:
        """Update progress/message/latest metrics/checkpoint in the job record."""
        fields: dict[str, Any] = {}
        if progress is not None:
            fields["progress"] = max(0.0, min(1.0, float(progress)))
        if message is not None:
            fields["message"] = message
        if metrics is not None:
            fields["metrics"] = dict(metrics)
        if checkpoint is not None:
            fields["checkpoint"] = checkpoint
        self._update(**fields)

    def log_metrics(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append one row to ``metrics.jsonl`` and make it the record's latest metrics."""
        row = {"step": step, "time": time.time(), **metrics}
        with (self.workdir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        self.report(metrics=row)

    def cancelled(self) -> bool:
        """True once cancellation was requested."""
        return (self.workdir / "cancel").exists()

    def raise_if_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if cancellation was requested."""
        if self.cancelled():
            raise JobCancelled(self.job_id)


Validator = Callable[[dict[str, Any]], dict[str, Any]]


class JobRunner(Protocol):
    """What a service needs from a job backend (:class:`LocalJobRunner` or ``CeleryJobRunner``).

    ``submit`` validates and enqueues (``InvalidRequestError`` → 422 naming the field), ``get`` and
    ``metrics`` raise ``NotFoundError`` (404) for unknown ids, ``cancel`` raises
    ``ConflictError`` (409) for finished jobs.
    """

    root: Path

    def submit(self, kind: str, config: dict[str, Any], team: str = "default") -> JobRecord: ...
    def get(self, job_id: str) -> JobRecord: ...
    def list(self, state: JobState | None = None) -> list[JobRecord]: ...
    def cancel(self, job_id: str) -> JobRecord: ...
    def metrics(self, job_id: str) -> list[dict[str, Any]]: ...
    def shutdown(self) -> None: ...


def make_job_runner(
    backend: Literal["local", "celery"],
    root: Path,
    kinds: Mapping[str, str],
    validators: Mapping[str, Validator] | None = None,
    *,
    namespace: str,
    broker_url: str | None = None,
    route: Callable[[str, dict[str, Any]], str] | None = None,
    max_running: int = 1,
) -> JobRunner:
    """The job runner a service's settings ask for.

    Args:
        backend: ``"local"`` (child processes of this service, state in files under ``root``) or
            ``"celery"`` (Celery workers, state in the broker's Redis).
        root: job folders (checkpoints, logs); for Celery a path every worker sees (shared).
        kinds: job kind → ``"module:function"`` target.
        validators: job kind → config validator (see :class:`LocalJobRunner`).
        namespace: the service owning the jobs (separates their records in a shared Redis).
        broker_url: Redis URL of the Celery broker (required for ``"celery"``).
        route: ``(kind, config) → queue`` (``"gpu"`` or ``"cpu"``) for Celery.
        max_running: jobs at once for the local runner (Celery: the workers' concurrency).

    Raises:
        ValueError: ``"celery"`` without a ``broker_url``, or an unknown backend.
    """
    if backend == "local":
        return LocalJobRunner(root, kinds, validators, max_running=max_running)
    if backend == "celery":
        if not broker_url:
            raise ValueError("the celery job backend needs a Redis broker URL")
        from dreamgym.celery_runner import CeleryJobRunner  # noqa: PLC0415 - optional extra

        return CeleryJobRunner(
            root, kinds, validators, broker_url=broker_url, namespace=namespace, route=route
        )
    raise ValueError(f"unknown job backend {backend!r}; valid: 'local', 'celery'")


def _read(workdir: Path) -> JobRecord:
    return JobRecord.model_validate_json((workdir / "status.json").read_text())


def _write(workdir: Path, record: JobRecord) -> None:
    tmp = workdir / f"status.json.{os.getpid()}.tmp"
    tmp.write_text(record.model_dump_json(indent=2))
    tmp.replace(workdir / "status.json")


def _log_to_file(path: Path, job_id: str) -> None:
    """JSON log lines of the job's child process into ``path`` (the job's own log)."""
    from dreamgym.server.logging import JsonFormatter  # noqa: PLC0415

    handler = logging.FileHandler(path)
    handler.setFormatter(JsonFormatter(f"job:{job_id}"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)


def _job_main(root: str, job_id: str, target: str) -> None:
    ctx = JobContext(Path(root), job_id)
    if ctx.cancelled():  # cancelled while queued (after the spawn): never run the body
        return
    record = ctx._update(state="running", started_at=_now(), pid=os.getpid())
    _log_to_file(ctx.workdir / "job.log", job_id)
    meter = UsageMeter()
    try:
        module, _, name = target.partition(":")
        fn = getattr(importlib.import_module(module), name)
        result = fn(dict(record.config), ctx)
        ctx._update(
            state="succeeded",
            progress=1.0,
            result=result or {},
            finished_at=_now(),
            usage=meter.read(),
        )
    except JobCancelled:
        ctx._update(state="cancelled", finished_at=_now(), message="cancelled", usage=meter.read())
    except BaseException as exc:  # the job failed: record it, never crash silently
        ctx._update(
            state="failed",
            finished_at=_now(),
            error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-4000:]}",
            usage=meter.read(),
        )


class LocalJobRunner:
    """Run registered job kinds in spawned child processes.

    Args:
        root: directory holding one folder per job.
        kinds: job kind → ``"module:function"`` target.
        validators: job kind → callable that validates/normalises a config dict (raise
            ``ValueError``/pydantic ``ValidationError`` for bad configs: answered 422).
        max_running: most jobs running at once; more are answered 429 by the caller's quota.
        cancel_grace_s: seconds a cancelled job gets to stop by itself before SIGTERM.
    """

    def __init__(
        self,
        root: Path,
        kinds: Mapping[str, str],
        validators: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
        *,
        max_running: int = 2,
        cancel_grace_s: float = 5.0,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.kinds = dict(kinds)
        self.validators = dict(validators or {})
        self.max_running = max_running
        self.cancel_grace_s = cancel_grace_s
        self._procs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, daemon=True, name="job-monitor")
        self._monitor.start()

    # -- API ------------------------------------------------------------------------------------
    def submit(self, kind: str, config: dict[str, Any], team: str = "default") -> JobRecord:
        """Validate and start a job owned by ``team``.

        Raises:
            InvalidRequestError: unknown kind (param ``kind``) or invalid config (param names the
                config field).
        """
        if kind not in self.kinds:
            raise InvalidRequestError(
                f"unknown job kind '{kind}'; valid kinds: {sorted(self.kinds)}", param="kind"
            )
        validator = self.validators.get(kind)
        if validator is not None:
            config = validator(config)
        record = JobRecord(
            job_id=f"job-{uuid.uuid4().hex[:12]}", kind=kind, config=config, team=team
        )
        workdir = self.root / record.job_id
        workdir.mkdir(parents=True)
        _write(workdir, record)
        with self._lock:
            self._start_queued_locked()
        return self.get(record.job_id)

    def get(self, job_id: str) -> JobRecord:
        """The job's record (404 if unknown)."""
        workdir = self.root / job_id
        if not (workdir / "status.json").exists() or "/" in job_id or job_id.startswith("."):
            raise NotFoundError(f"job '{job_id}' does not exist", param="job_id")
        return _read(workdir)

    def list(self, state: JobState | None = None) -> list[JobRecord]:
        """All jobs (optionally in one state), newest first."""
        records = [_read(p.parent) for p in self.root.glob("*/status.json")]
        if state is not None:
            records = [r for r in records if r.state == state]
        return sorted(records, key=lambda r: r.created_at, reverse=True)

    def cancel(self, job_id: str) -> JobRecord:
        """Request cancellation (409 if already finished)."""
        record = self.get(job_id)
        if record.state in FINAL_STATES:
            raise ConflictError(f"job '{job_id}' already {record.state}", param="job_id")
        (self.root / job_id / "cancel").touch()
        if record.state == "queued":
            _write(
                self.root / job_id,
                record.model_copy(update={"state": "cancelled", "finished_at": _now()}),
            )
        return self.get(job_id)

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """All metric rows the job logged."""
        self.get(job_id)
        path = self.root / job_id / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def shutdown(self) -> None:
        """Stop the monitor and terminate running jobs."""
        self._stop.set()
        with self._lock:
            for proc in self._procs.values():
                if proc.is_alive():
                    proc.terminate()

    # -- internals ------------------------------------------------------------------------------
    def _start_queued_locked(self) -> None:
        running = sum(1 for p in self._procs.values() if p.is_alive())
        queued = sorted(
            (r for r in self.list("queued") if r.job_id not in self._procs),
            key=lambda r: r.created_at,
        )
        for record in queued[: max(0, self.max_running - running)]:
            proc = self._ctx.Process(
                target=_job_main,
                args=(str(self.root), record.job_id, self.kinds[record.kind]),
                name=f"job-{record.job_id}",
                daemon=False,
            )
            proc.start()
            self._procs[record.job_id] = proc

    def _finish_dead_locked(self) -> None:
        for job_id, proc in list(self._procs.items()):
            workdir = self.root / job_id
            if proc.is_alive():
                record = _read(workdir)
                if (workdir / "cancel").exists() and record.state == "running":
                    age = time.time() - (workdir / "cancel").stat().st_mtime
                    if age > self.cancel_grace_s:
                        os.kill(proc.pid, signal.SIGTERM)
                continue
            record = _read(workdir)
            if record.state not in FINAL_STATES:
                cancelled = (workdir / "cancel").exists()
                _write(
                    workdir,
                    record.model_copy(
                        update={
                            "state": "cancelled" if cancelled else "failed",
                            "finished_at": _now(),
                            "error": None
                            if cancelled
                            else f"job process exited with code {proc.exitcode}",
                        }
                    ),
                )
            del self._procs[job_id]

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                try:
                    self._finish_dead_locked()
                    self._start_queued_locked()
                except Exception:  # keep monitoring whatever one record does
                    import logging  # noqa: PLC0415

                    logging.getLogger(__name__).exception("job monitor error")
