"""The Celery app that runs DreamGym jobs on workers: ``celery -A dreamgym.celery_app:app worker``.

One task, ``dreamgym.run_job``, runs any registered job kind: its message names the owning
service (``namespace``), the job id, the ``"module:function"`` target and the shared job folder;
the configuration, state, progress, metrics and result live in Redis
(:class:`~dreamgym.job_store.RedisJobStore` on the broker's Redis), so any service replica reads
what any worker writes. Services enqueue on two queues: ``gpu`` (training, SFT, evaluation with a
model, fidelity) and ``cpu`` (collection, bookkeeping); run one worker pool per queue::

    DREAMGYM_CELERY_BROKER_URL=redis://redis:6379/4 celery -A dreamgym.celery_app:app worker -Q gpu

Fault handling (the run lock makes every path safe against duplicate deliveries):

- ``acks_late`` + ``reject_on_worker_lost``: a message is acknowledged when the job ended; a
  killed pool process requeues it at once, a dead worker's unacknowledged message is restored
  after ``visibility_timeout_s``; the redelivered job resumes from its checkpoint (its folder is
  the same; GRPO continues from ``run/checkpoints/latest``).
- a per-job Redis lock (TTL ``lock_ttl_s``, extended by a heartbeat thread): a delivery that
  finds the lock held is re-sent after ``lock_ttl_s`` instead of running the body a second time,
  and takes over once a dead holder's lock expired.
- bounded retries: a transient error (connection, timeout, 429/503/504 of another service) is
  retried with exponential backoff while ``attempts <= max_retries``; redeliveries after lost
  workers count as attempts too, so no job loops forever.
- cancellation: the job polls its Redis flag (:meth:`JobContext.cancelled`); a job still running
  ``cancel_grace_s`` after the flag was seen is marked ``cancelled`` and terminated through
  ``revoke(terminate=True)``.

Worker settings come from ``DREAMGYM_CELERY_*`` environment variables (:class:`CelerySettings`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import redis
from celery import Celery, Task
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from redis.exceptions import LockError

from dreamgym.errors import BackendUnavailableError, CapacityError, StepTimeoutError
from dreamgym.job_store import ACTIVE_STATES, RedisJobStore
from dreamgym.jobs import FINAL_STATES, JobCancelled, JobContext, JobRecord, _now
from dreamgym.usage import UsageMeter

__all__ = [
    "QUEUES",
    "RUN_JOB",
    "CelerySettings",
    "RedisJobContext",
    "app",
    "create_celery_app",
    "is_retryable",
]

logger = logging.getLogger(__name__)

RUN_JOB = "dreamgym.run_job"
QUEUES = ("gpu", "cpu")
# Transient failures worth another attempt; anything else fails the job at once.
RETRYABLE: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    httpx.TransportError,
    redis.ConnectionError,
    redis.TimeoutError,
    BackendUnavailableError,
    CapacityError,
    StepTimeoutError,
)


class CelerySettings(BaseSettings):
    """Worker and broker settings (environment variables ``DREAMGYM_CELERY_*``).

    Attributes:
        broker_url: Redis URL of the broker; job state lives in the same Redis.
        result_backend: Celery result backend (default: the broker URL).
        visibility_timeout_s: seconds after which a dead worker's unacknowledged message is
            delivered again (the run lock keeps a live worker's job from running twice).
        lock_ttl_s: lifetime of a job's run lock without heartbeat; a dead holder's job can be
            taken over this long after it died.
        cancel_grace_s: seconds a job may keep running after its cancellation flag was seen
            before it is terminated.
        max_retries: attempts after the first (errors and lost workers); then the job fails.
        retry_backoff_s / retry_backoff_max_s: exponential backoff between retries (seconds).
        job_modules: comma-separated module prefixes a job target may come from.
        finished_job_ttl_s: seconds a finished job's record and metric curve stay in Redis
            (default 30 days; its files on disk are not touched).
    """

    model_config = SettingsConfigDict(env_prefix="DREAMGYM_CELERY_", extra="ignore")

    broker_url: str = "redis://127.0.0.1:6379/0"
    result_backend: str | None = None
    visibility_timeout_s: float = Field(default=300.0, gt=0)
    lock_ttl_s: float = Field(default=30.0, gt=0)
    cancel_grace_s: float = Field(default=5.0, ge=0)
    max_retries: int = Field(default=2, ge=0, le=100)
    retry_backoff_s: float = Field(default=10.0, ge=0)
    retry_backoff_max_s: float = Field(default=600.0, ge=0)
    job_modules: str = "agent_trainer.jobs,experience_model.training"
    finished_job_ttl_s: float = Field(default=30 * 86400.0, gt=0)

    @property
    def heartbeat_s(self) -> float:
        """Seconds between lock extensions and cancellation checks."""
        return min(1.0, self.lock_ttl_s / 3)

    def allowed_modules(self) -> list[str]:
        """The job-module prefixes as a list."""
        return [m.strip() for m in self.job_modules.split(",") if m.strip()]


def is_retryable(exc: BaseException) -> bool:
    """Whether a job error is transient (another attempt may succeed)."""
    return isinstance(exc, RETRYABLE)


class RedisJobContext(JobContext):
    """The :class:`JobContext` of a Celery job: record, metrics and cancellation in Redis.

    ``workdir`` (``<root>/<job_id>``) is on the shared data directory: checkpoints written there
    are what a redelivered job resumes from.
    """

    def __init__(
        self,
        store: RedisJobStore,
        root: Path,
        job_id: str,
        lost: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(root, job_id)
        self.store = store
        self._lost = lost

    def _update(self, **fields: Any) -> JobRecord:
        updated = self.store.transition(self.job_id, {"running"}, **fields)
        return updated or self.store.get(self.job_id)  # type: ignore[return-value]

    def log_metrics(self, step: int, metrics: Any) -> None:
        """Append one row to the job's metrics in Redis and make it the latest metrics."""
        row = {"step": step, "time": time.time(), **metrics}
        self.store.append_metrics(self.job_id, row)
        self.report(metrics=row)

    def cancelled(self) -> bool:
        """True once cancellation was requested (or this process lost the job's run lock)."""
        return self._lost() or self.store.cancel_requested(self.job_id)


class _Heartbeat(threading.Thread):
    """Extends the job's run lock and enforces the cancellation grace period."""

    def __init__(
        self,
        store: RedisJobStore,
        job_id: str,
        lock: Any,
        settings: CelerySettings,
        terminate: Callable[[], None],
    ) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{job_id}")
        self.store, self.job_id, self.lock = store, job_id, lock
        self.settings, self.terminate = settings, terminate
        self.lost = False
        self._stop_event = threading.Event()
        self._cancel_seen: float | None = None
        self._terminated_at: float | None = None

    def stop(self) -> None:
        """Stop and wait for the thread (before the lock is released and the store closed)."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=10.0)

    def is_lost(self) -> bool:
        return self.lost

    def run(self) -> None:
        while not self._stop_event.wait(self.settings.heartbeat_s):
            if self._terminated_at is not None:  # cancelled: waiting for the revoke to kill us
                if time.monotonic() - self._terminated_at > max(5.0, self.settings.cancel_grace_s):
                    os.kill(os.getpid(), signal.SIGKILL)  # revoke did not reach the pool
                continue
            try:
                self.lock.reacquire()
                self._check_cancel()
            except LockError:  # the lock expired and someone else may run the job: stop
                logger.error("job %s lost its run lock; stopping", self.job_id)
                self.lost = True
                return
            except redis.RedisError as exc:  # a Redis blip: the lock TTL covers a few misses
                logger.warning("job %s heartbeat failed: %s", self.job_id, exc)

    def _check_cancel(self) -> None:
        now = time.monotonic()
        if not self.store.cancel_requested(self.job_id):
            return
        self._cancel_seen = self._cancel_seen or now
        if now - self._cancel_seen < self.settings.cancel_grace_s:
            return
        waited = now - self._cancel_seen
        logger.warning("job %s ignored cancellation for %.1fs; terminating", self.job_id, waited)
        self.store.transition(
            self.job_id,
            {"running"},
            state="cancelled",
            finished_at=_now(),
            message="cancelled (terminated after the grace period)",
        )
        self._terminated_at = now
        with contextlib.suppress(LockError, redis.RedisError):
            self.lock.release()
        self.terminate()


def _import_target(target: str, allowed: list[str]) -> Callable[[dict[str, Any], JobContext], Any]:
    module, _, name = target.partition(":")
    if not any(module == p or module.startswith(p + ".") for p in allowed):
        raise PermissionError(
            f"job target {target!r} is outside the allowed modules {allowed} "
            "(DREAMGYM_CELERY_JOB_MODULES)"
        )
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


@contextlib.contextmanager
def _job_log(path: Path, job_id: str) -> Iterator[None]:
    """Also write the job's log records as JSON lines to ``path`` while it runs."""
    from dreamgym.server.logging import JsonFormatter  # noqa: PLC0415

    handler = logging.FileHandler(path)
    handler.setFormatter(JsonFormatter(f"job:{job_id}"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


def _finish(store: RedisJobStore, job_id: str, **fields: Any) -> None:
    store.transition(job_id, {"running"}, finished_at=_now(), **fields)


def _run_locked(
    task: Task,
    store: RedisJobStore,
    settings: CelerySettings,
    heartbeat: _Heartbeat,
    *,
    job_id: str,
    target: str,
    root: str,
    queue: str,
) -> str:
    """Run the body of a job whose run lock this process holds; returns the outcome."""
    if store.cancel_requested(job_id):
        store.transition(
            job_id, ACTIVE_STATES, state="cancelled", finished_at=_now(), message="cancelled"
        )
        return "cancelled before it ran"
    record = store.get(job_id)
    if record is None or record.state in FINAL_STATES:
        return "already finished"
    if record.attempts > settings.max_retries:
        store.transition(
            job_id,
            ACTIVE_STATES,
            state="failed",
            finished_at=_now(),
            error=f"gave up after {record.attempts} attempts: the last one ended without a "
            "result (its worker was lost)",
        )
        return "failed: too many attempts"
    resumed = record.state == "running"  # it was running when its worker was lost
    record = store.transition(
        job_id,
        ACTIVE_STATES,
        state="running",
        attempts=record.attempts + 1,
        started_at=record.started_at or _now(),
        pid=os.getpid(),
        worker=task.request.hostname,
        message=f"resumed after a lost worker (attempt {record.attempts + 1})" if resumed else "",
    )
    if record is None:
        return "finished elsewhere"
    if record.attempts > 1:
        store.mark_attempt(job_id, record.attempts)
    ctx = RedisJobContext(store, Path(root), job_id, lost=heartbeat.is_lost)
    meter = UsageMeter()
    with _job_log(ctx.workdir / "job.log", job_id):
        try:
            fn = _import_target(target, settings.allowed_modules())
            result = fn(dict(record.config), ctx)
        except JobCancelled:
            if heartbeat.lost:  # stopped because another process may run it now: write nothing
                return "lost its run lock"
            _finish(store, job_id, state="cancelled", message="cancelled", usage=meter.read())
            return "cancelled"
        except Exception as exc:
            if heartbeat.lost:
                return "lost its run lock"
            if is_retryable(exc) and record.attempts <= settings.max_retries:
                countdown = min(
                    settings.retry_backoff_max_s,
                    settings.retry_backoff_s * 2 ** (record.attempts - 1),
                )
                store.transition(
                    job_id,
                    {"running"},
                    state="queued",
                    message=f"attempt {record.attempts} failed ({type(exc).__name__}: {exc}); "
                    f"retrying in {countdown:.0f}s",
                )
                raise task.retry(exc=exc, countdown=countdown, queue=queue) from exc
            _finish(
                store,
                job_id,
                state="failed",
                error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-4000:]}",
                usage=meter.read(),
            )
            return "failed"
    if heartbeat.lost:
        return "lost its run lock"
    _finish(store, job_id, state="succeeded", progress=1.0, result=result or {}, usage=meter.read())
    return "succeeded"


def _deliver(
    task: Task, settings: CelerySettings, *, namespace: str, job_id: str, **kwargs: str
) -> dict[str, str]:
    """Handle one delivery of a job message (the body of :data:`RUN_JOB`)."""
    store = RedisJobStore.from_url(
        settings.broker_url, namespace, finished_ttl_s=settings.finished_job_ttl_s
    )
    try:
        record = store.get(job_id)
        if record is None or record.state in FINAL_STATES:
            state = record.state if record else "unknown"
            return {"job_id": job_id, "outcome": f"skipped ({state})"}
        lock = store.lock(job_id, settings.lock_ttl_s)
        if not lock.acquire(blocking=False):  # another process runs it: look again later
            task.apply_async(
                kwargs={"namespace": namespace, "job_id": job_id, **kwargs},
                task_id=task.request.id,
                queue=kwargs["queue"],
                countdown=settings.lock_ttl_s,
            )
            return {"job_id": job_id, "outcome": "running elsewhere; re-checked later"}

        def terminate() -> None:
            task.app.control.revoke(job_id, terminate=True, signal="SIGTERM")

        heartbeat = _Heartbeat(store, job_id, lock, settings, terminate)
        heartbeat.start()
        try:
            outcome = _run_locked(task, store, settings, heartbeat, job_id=job_id, **kwargs)
        finally:
            heartbeat.stop()
            with contextlib.suppress(LockError, redis.RedisError):
                lock.release()
        return {"job_id": job_id, "outcome": outcome}
    finally:
        store.close()


def create_celery_app(settings: CelerySettings | None = None) -> Celery:
    """A Celery app with DreamGym's reliability settings and the :data:`RUN_JOB` task.

    Services build one with their own broker URL to enqueue; workers use :data:`app`.
    """
    s = settings or CelerySettings()
    celery = Celery("dreamgym")
    restore_s = max(1, int(min(10.0, s.visibility_timeout_s / 3)))
    celery.conf.update(
        broker_url=s.broker_url,
        result_backend=s.result_backend or s.broker_url,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_default_queue="cpu",
        task_create_missing_queues=True,
        worker_prefetch_multiplier=1,
        worker_max_tasks_per_child=1,  # a fresh process per job: no leaked models or GPU memory
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": s.visibility_timeout_s,
            "unacked_restore_interval": restore_s,
            "unacked_restore_throttle": 1,
        },
        task_publish_retry_policy={
            "max_retries": 3,
            "interval_start": 0.2,
            "interval_step": 0.5,
            "interval_max": 2.0,
        },
        result_expires=7 * 24 * 3600,
    )

    @celery.task(
        name=RUN_JOB,
        shared=False,  # each app keeps its own settings
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        max_retries=s.max_retries,
    )
    def run_job(
        self: Task, namespace: str, job_id: str, target: str, root: str, queue: str = "cpu"
    ) -> dict[str, str]:
        return _deliver(
            self, s, namespace=namespace, job_id=job_id, target=target, root=root, queue=queue
        )

    return celery


app = create_celery_app()
