"""The service side of Celery jobs: the :class:`~dreamgym.jobs.JobRunner` API over Redis + Celery.

``submit`` validates the config (422 naming the field), writes the :class:`JobRecord` to Redis and
enqueues :data:`~dreamgym.celery_app.RUN_JOB` on the kind's queue (``route(kind, config)``) with
the job id as the task id; ``get``/``list``/``metrics`` read Redis, so every replica of the
service answers for every job; ``cancel`` sets the job's Redis flag (the worker stops the job, or
terminates it after the grace period) and revokes a job that has not started.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import redis

from dreamgym.celery_app import RUN_JOB, CelerySettings, create_celery_app
from dreamgym.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
)
from dreamgym.job_store import RedisJobStore
from dreamgym.jobs import FINAL_STATES, JobRecord, JobState, Validator, _now

__all__ = ["CeleryJobRunner"]


@contextlib.contextmanager
def _available() -> Iterator[None]:
    """Redis errors become 503 ``backend_unavailable`` (clients retry), never a 500."""
    try:
        yield
    except redis.RedisError as exc:
        raise BackendUnavailableError(
            f"job store unavailable: {type(exc).__name__}: {exc}", retry_after_s=5.0
        ) from exc


class CeleryJobRunner:
    """Run registered job kinds on Celery workers; state in the broker's Redis.

    Args:
        root: job folders (checkpoints, job logs); must be the same path on every worker (a
            shared volume).
        kinds: job kind → ``"module:function"`` target (importable on the workers).
        validators: job kind → config validator (raise ``InvalidRequestError`` → 422).
        broker_url: Redis URL of the Celery broker (and of the job records).
        namespace: the owning service; separates its records from other services' in one Redis.
        route: ``(kind, config) → queue``; default: every job on ``"cpu"``.
        result_backend: Celery result backend (default: ``broker_url``).
    """

    def __init__(
        self,
        root: Path,
        kinds: Mapping[str, str],
        validators: Mapping[str, Validator] | None = None,
        *,
        broker_url: str,
        namespace: str,
        route: Callable[[str, dict[str, Any]], str] | None = None,
        result_backend: str | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.kinds = dict(kinds)
        self.validators = dict(validators or {})
        self.namespace = namespace
        self.route = route or (lambda _kind, _config: "cpu")
        settings = CelerySettings(broker_url=broker_url, result_backend=result_backend)
        self.store = RedisJobStore.from_url(
            broker_url, namespace, timeout_s=5.0, finished_ttl_s=settings.finished_job_ttl_s
        )
        self.app = create_celery_app(settings)

    # -- API ------------------------------------------------------------------------------------
    def submit(self, kind: str, config: dict[str, Any], team: str = "default") -> JobRecord:
        """Validate, record and enqueue a job owned by ``team``.

        Raises:
            InvalidRequestError: unknown kind (param ``kind``) or invalid config.
            BackendUnavailableError: Redis or the broker cannot be reached (503).
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
        queue = self.route(kind, config)
        with _available():
            self.store.create(record)
        try:
            self.app.send_task(
                RUN_JOB,
                kwargs={
                    "namespace": self.namespace,
                    "job_id": record.job_id,
                    "target": self.kinds[kind],
                    "root": str(self.root),
                    "queue": queue,
                },
                task_id=record.job_id,
                queue=queue,
            )
        except Exception as exc:  # the broker refused: the job will never run
            with _available():
                self.store.transition(
                    record.job_id,
                    {"queued"},
                    state="failed",
                    finished_at=_now(),
                    error=f"could not enqueue on '{queue}': {type(exc).__name__}: {exc}",
                )
            raise BackendUnavailableError(
                f"job broker unavailable: {type(exc).__name__}: {exc}", retry_after_s=5.0
            ) from exc
        return self.get(record.job_id)

    def get(self, job_id: str) -> JobRecord:
        """The job's record (404 if unknown)."""
        with _available():
            record = self.store.get(job_id)
        if record is None:
            raise NotFoundError(f"job '{job_id}' does not exist", param="job_id")
        return record

    def list(self, state: JobState | None = None) -> list[JobRecord]:
        """All jobs of this service (optionally in one state), newest first."""
        with _available():
            return self.store.list(state)

    def cancel(self, job_id: str) -> JobRecord:
        """Request cancellation (409 if already finished).

        A queued job is ``cancelled`` at once and its message revoked; a running job is stopped
        by its worker at its next check, or terminated after the workers' grace period.
        """
        record = self.get(job_id)
        if record.state in FINAL_STATES:
            raise ConflictError(f"job '{job_id}' already {record.state}", param="job_id")
        with _available():
            self.store.request_cancel(job_id)
            cancelled = self.store.transition(
                job_id, {"queued"}, state="cancelled", finished_at=_now(), message="cancelled"
            )
        if cancelled is not None:
            with contextlib.suppress(Exception):  # best effort: workers skip final jobs anyway
                self.app.control.revoke(job_id)
        return self.get(job_id)

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """All metric rows the job logged, oldest first."""
        self.get(job_id)
        with _available():
            return self.store.metrics(job_id)

    def ready(self) -> str | None:
        """``None`` when the job store answers, else the reason (for ``/readyz``)."""
        try:
            self.store.ping()
        except redis.RedisError as exc:
            return f"job store unavailable: {type(exc).__name__}"
        return None

    def shutdown(self) -> None:
        """Close connections (jobs keep running on the workers)."""
        with contextlib.suppress(Exception):
            self.app.close()
        self.store.close()
