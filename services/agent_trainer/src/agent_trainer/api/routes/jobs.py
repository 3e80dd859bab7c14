"""Job API: submit, read, list, cancel, metrics — each job visible only to the team that owns it.

Another team's job id answers 404 exactly like an unknown one; a team over its active-job quota
gets 429 with ``Retry-After``. The submitting key is forwarded to the job (so it reads and writes
the team's own data on the other services) and is never part of a response; nor is the key of a
``fidelity`` job's LLM judge.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from dreamgym.errors import ErrorResponse, NotFoundError, QuotaExceededError
from dreamgym.jobs import JobRecord, JobRunner, JobState
from dreamgym.server.auth import TeamDep, presented_api_key
from dreamgym.types import WireModel

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_ERRORS = {code: {"model": ErrorResponse} for code in (401, 404, 409, 422, 429, 503)}
_ACTIVE: frozenset[str] = frozenset({"queued", "running"})


class JobSubmitRequest(WireModel):
    """Body of ``POST /v1/jobs``: the job kind and its configuration."""

    kind: Literal["collect", "fidelity", "grpo", "ppo", "evaluate", "bc"]
    config: dict[str, Any] = Field(default_factory=dict)


class JobList(WireModel):
    """Jobs, newest first."""

    data: list[JobRecord]
    count: int


def _runner(request: Request) -> JobRunner:
    return request.app.state.runner  # type: ignore[no-any-return]


RunnerDep = Annotated[JobRunner, Depends(_runner)]


SECRET_SECTIONS = ("services", "judge")
"""Config sections whose ``api_key`` no response shows: the forwarded team key, the judge's key."""


def public(record: JobRecord) -> JobRecord:
    """``record`` without the API keys of :data:`SECRET_SECTIONS` (what every response shows)."""
    config = dict(record.config)
    for name in SECRET_SECTIONS:
        section = config.get(name)
        if isinstance(section, dict) and "api_key" in section:
            config[name] = {k: v for k, v in section.items() if k != "api_key"}
    if config == record.config:
        return record
    return record.model_copy(update={"config": config})


def owned(runner: JobRunner, job_id: str, team: str) -> JobRecord:
    """The job if ``team`` owns it; another team's job is indistinguishable from a missing one.

    Raises:
        NotFoundError: unknown id, or a job of another team (404).
    """
    record = runner.get(job_id)
    if record.team != team:
        raise NotFoundError(f"job '{job_id}' does not exist", param="job_id")
    return record


@router.post("", response_model=JobRecord, status_code=201, responses=_ERRORS)
def submit_job(
    body: JobSubmitRequest, runner: RunnerDep, request: Request, team: TeamDep
) -> JobRecord:
    """Validate the config (422 naming the field) and start the job for the caller's team."""
    settings = request.app.state.settings
    limit = settings.max_active_jobs_per_team
    if limit is not None:
        active = sum(1 for r in runner.list() if r.team == team and r.state in _ACTIVE)
        if active >= limit:
            raise QuotaExceededError(
                f"team '{team}' already has {active} queued or running jobs (limit {limit})",
                retry_after_s=settings.quota_retry_after_s,
            )
    config = request.app.state.with_service_urls(body.kind, body.config)
    key = presented_api_key(request.headers)
    if key is not None and "services" in config:
        config = {**config, "services": {**config["services"], "api_key": key}}
    return public(runner.submit(body.kind, config, team=team))


@router.get("", response_model=JobList, responses=_ERRORS)
def list_jobs(
    runner: RunnerDep, team: TeamDep, state: Annotated[JobState | None, Query()] = None
) -> JobList:
    """The caller's team's jobs, optionally filtered by state, newest first."""
    jobs = [public(r) for r in runner.list(state) if r.team == team]
    return JobList(data=jobs, count=len(jobs))


@router.get("/{job_id}", response_model=JobRecord, responses=_ERRORS)
def get_job(job_id: str, runner: RunnerDep, team: TeamDep) -> JobRecord:
    """State, progress, latest metrics, checkpoint, result or error."""
    return public(owned(runner, job_id, team))


@router.post("/{job_id}/cancel", response_model=JobRecord, responses=_ERRORS)
def cancel_job(job_id: str, runner: RunnerDep, team: TeamDep) -> JobRecord:
    """Request cancellation (the job stops at its next check, or is terminated)."""
    owned(runner, job_id, team)
    return public(runner.cancel(job_id))


@router.get("/{job_id}/metrics", responses=_ERRORS)
def job_metrics(job_id: str, runner: RunnerDep, team: TeamDep) -> dict[str, Any]:
    """Every metrics row the job logged (training curve)."""
    owned(runner, job_id, team)
    rows = runner.metrics(job_id)
    return {"data": rows, "count": len(rows)}
