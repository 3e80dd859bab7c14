"""Typed clients of the agent trainer's job API (and a job-waiting helper)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from dreamgym.clients.base import ServiceClient
from dreamgym.jobs import FINAL_STATES, JobRecord

__all__ = ["AgentTrainerClient", "JobFailedError", "wait_for_job"]


class JobFailedError(RuntimeError):
    """A job ended ``failed`` or ``cancelled``; ``record`` holds its error."""

    def __init__(self, record: JobRecord) -> None:
        super().__init__(
            f"job {record.job_id} ({record.kind}) {record.state}: "
            f"{(record.error or record.message or '').strip()[-2000:]}"
        )
        self.record = record


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
        if record.state in FINAL_STATES:
            if record.state != "succeeded":
                raise JobFailedError(record)
            return record
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {record.state} after {timeout_s:.0f}s")
        time.sleep(poll_s)


class AgentTrainerClient(ServiceClient):
    """Submit and follow trainer jobs (``collect``, ``fidelity``, ``grpo``, ``evaluate``)."""

    def submit(self, kind: str, config: dict[str, Any]) -> JobRecord:
        """Start a job (422 naming the field for a bad config)."""
        return JobRecord.model_validate(
            self.request("POST", "/v1/jobs", json={"kind": kind, "config": config})
        )

    def get_job(self, job_id: str) -> JobRecord:
        """A job's record."""
        return JobRecord.model_validate(self.request("GET", f"/v1/jobs/{quote(job_id)}"))

    def list_jobs(self, state: str | None = None) -> list[JobRecord]:
        """Jobs, newest first."""
        data = self.request("GET", "/v1/jobs", params={"state": state} if state else None)
        return [JobRecord.model_validate(j) for j in data["data"]]

    def cancel(self, job_id: str) -> JobRecord:
        """Request cancellation."""
        return JobRecord.model_validate(self.request("POST", f"/v1/jobs/{quote(job_id)}/cancel"))

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """All metric rows a job logged."""
        return list(self.request("GET", f"/v1/jobs/{quote(job_id)}/metrics")["data"])
