"""Typed clients of the agent trainer's job API (sync and async) and job-waiting helpers.

>>> with AgentTrainerClient("http://localhost:8004") as trainer:  # doctest: +SKIP
...     job = trainer.submit("grpo", {"iterations": 2})
...     wait_for_job(trainer.get_job, job.job_id, timeout_s=600)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from dreamgym.clients.base import AsyncServiceClient, ServiceClient
from dreamgym.jobs import FINAL_STATES, JobRecord

__all__ = [
    "AgentTrainerClient",
    "AsyncAgentTrainerClient",
    "JobFailedError",
    "wait_for_job",
    "wait_for_job_async",
]


class JobFailedError(RuntimeError):
    """A job ended ``failed`` or ``cancelled``; ``record`` holds its error."""

    def __init__(self, record: JobRecord) -> None:
        super().__init__(
            f"job {record.job_id} ({record.kind}) {record.state}: "
            f"{(record.error or record.message or '').strip()[-2000:]}"
        )
        self.record = record


def _finished(record: JobRecord) -> bool:
    """True once ``record`` succeeded; raises :class:`JobFailedError` if it failed or was
    cancelled; False while it is still queued or running."""
    if record.state not in FINAL_STATES:
        return False
    if record.state != "succeeded":
        raise JobFailedError(record)
    return True


def wait_for_job(
    get: Callable[[str], JobRecord],
    job_id: str,
    *,
    poll_s: float = 1.0,
    timeout_s: float = 3600.0,
    on_update: Callable[[JobRecord], None] | None = None,
) -> JobRecord:
    """Poll ``get(job_id)`` until the job is final.

    Raises:
        JobFailedError: the job failed or was cancelled.
        TimeoutError: not finished within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        record = get(job_id)
        if on_update is not None:
            on_update(record)
        if _finished(record):
            return record
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {record.state} after {timeout_s:.0f}s")
        time.sleep(poll_s)


async def wait_for_job_async(
    get: Callable[[str], Awaitable[JobRecord]],
    job_id: str,
    *,
    poll_s: float = 1.0,
    timeout_s: float = 3600.0,
    on_update: Callable[[JobRecord], None] | None = None,
) -> JobRecord:
    """Await ``get(job_id)`` until the job is final (see :func:`wait_for_job`).

    Raises:
        JobFailedError: the job failed or was cancelled.
        TimeoutError: not finished within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        record = await get(job_id)
        if on_update is not None:
            on_update(record)
        if _finished(record):
            return record
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {record.state} after {timeout_s:.0f}s")
        await asyncio.sleep(poll_s)


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/v1/jobs/{quote(job_id, safe='')}{suffix}"


def _submit_body(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "config": config}


class AgentTrainerClient(ServiceClient):
    """Submit and follow trainer jobs (``collect``, ``fidelity``, ``grpo``, ``evaluate``)."""

    def submit(self, kind: str, config: dict[str, Any]) -> JobRecord:
        """Start a job (422 naming the field for a bad config)."""
        data = self.request("POST", "/v1/jobs", json=_submit_body(kind, config))
        return JobRecord.model_validate(data)

    def get_job(self, job_id: str) -> JobRecord:
        """A job's record."""
        return JobRecord.model_validate(self.request("GET", _job_path(job_id)))

    def list_jobs(self, state: str | None = None) -> list[JobRecord]:
        """Jobs, newest first."""
        data = self.request("GET", "/v1/jobs", params={"state": state} if state else None)
        return [JobRecord.model_validate(j) for j in data["data"]]

    def cancel(self, job_id: str) -> JobRecord:
        """Request cancellation."""
        return JobRecord.model_validate(self.request("POST", _job_path(job_id, "/cancel")))

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """All metric rows a job logged."""
        return list(self.request("GET", _job_path(job_id, "/metrics"))["data"])


class AsyncAgentTrainerClient(AsyncServiceClient):
    """Asynchronous client; same methods as :class:`AgentTrainerClient`, awaitable."""

    async def submit(self, kind: str, config: dict[str, Any]) -> JobRecord:
        """Start a job (422 naming the field for a bad config)."""
        data = await self.request("POST", "/v1/jobs", json=_submit_body(kind, config))
        return JobRecord.model_validate(data)

    async def get_job(self, job_id: str) -> JobRecord:
        """A job's record."""
        return JobRecord.model_validate(await self.request("GET", _job_path(job_id)))

    async def list_jobs(self, state: str | None = None) -> list[JobRecord]:
        """Jobs, newest first."""
        data = await self.request("GET", "/v1/jobs", params={"state": state} if state else None)
        return [JobRecord.model_validate(j) for j in data["data"]]

    async def cancel(self, job_id: str) -> JobRecord:
        """Request cancellation."""
        data = await self.request("POST", _job_path(job_id, "/cancel"))
        return JobRecord.model_validate(data)

    async def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """All metric rows a job logged."""
        return list((await self.request("GET", _job_path(job_id, "/metrics")))["data"])
