"""Job API: submit, read, list, cancel, metrics."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from dreamgym.errors import ErrorResponse
from dreamgym.jobs import JobRecord, JobRunner, JobState
from dreamgym.types import WireModel

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_ERRORS = {code: {"model": ErrorResponse} for code in (404, 409, 422, 503)}


class JobSubmitRequest(WireModel):
    """Body of ``POST /v1/jobs``: the job kind and its configuration."""

    kind: Literal["collect", "fidelity", "grpo", "ppo", "evaluate"]
    config: dict[str, Any] = Field(default_factory=dict)


class JobList(WireModel):
    """Jobs, newest first."""

    data: list[JobRecord]
    count: int


def _runner(request: Request) -> JobRunner:
    return request.app.state.runner  # type: ignore[no-any-return]


RunnerDep = Annotated[JobRunner, Depends(_runner)]


@router.post("", response_model=JobRecord, status_code=201, responses=_ERRORS)
def submit_job(body: JobSubmitRequest, runner: RunnerDep, request: Request) -> JobRecord:
    """Validate the config (422 naming the field) and start the job."""
    config = request.app.state.with_service_urls(body.kind, body.config)
    return runner.submit(body.kind, config)


@router.get("", response_model=JobList)
def list_jobs(runner: RunnerDep, state: Annotated[JobState | None, Query()] = None) -> JobList:
    """All jobs, optionally filtered by state."""
    jobs = runner.list(state)
    return JobList(data=jobs, count=len(jobs))


@router.get("/{job_id}", response_model=JobRecord, responses=_ERRORS)
def get_job(job_id: str, runner: RunnerDep) -> JobRecord:
    """State, progress, latest metrics, checkpoint, result or error."""
    return runner.get(job_id)


@router.post("/{job_id}/cancel", response_model=JobRecord, responses=_ERRORS)
def cancel_job(job_id: str, runner: RunnerDep) -> JobRecord:
    """Request cancellation (the job stops at its next check, or is terminated)."""
    return runner.cancel(job_id)


@router.get("/{job_id}/metrics", responses=_ERRORS)
def job_metrics(job_id: str, runner: RunnerDep) -> dict[str, Any]:
    """Every metrics row the job logged (training curve)."""
    rows = runner.metrics(job_id)
    return {"data": rows, "count": len(rows)}
