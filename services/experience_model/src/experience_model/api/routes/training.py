"""Experience-model jobs run next to the service: SFT (paper Eq. 5) and teacher annotation.

``POST /v1/training-jobs`` starts a job (in a child process, or on a Celery worker with
``EXPERIENCE_MODEL_JOB_BACKEND=celery``) of one of two kinds:

- ``sft`` (default): fine-tune the experience model on replay-store transitions; when it
  succeeds, load the new checkpoint with ``POST /v1/model:reload`` (``result.checkpoint``);
- ``annotate``: a teacher writes reasoning traces for the real transitions that lack one
  (:mod:`experience_model.training.annotate`); run it before ``sft``.

Each job is visible only to the team that submitted it: another team's job id answers 404 exactly
like an unknown one, and listings only hold the caller's jobs. The submitting key is forwarded to
the job as ``config.api_key`` (its replay-store and task-generator clients read and write the
team's own data) and is never part of a response. A team over its active-job quota
(``EXPERIENCE_MODEL_MAX_ACTIVE_JOBS_PER_TEAM``) gets 429 with ``Retry-After``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from dreamgym.errors import ErrorResponse, NotFoundError, QuotaExceededError
from dreamgym.jobs import JobRecord, JobRunner, JobState
from dreamgym.types import WireModel
from experience_model.api.deps import CallerDep

router = APIRouter(prefix="/v1/training-jobs", tags=["training"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (401, 404, 409, 422, 429, 503)
}
_ACTIVE: frozenset[str] = frozenset({"queued", "running"})
API_KEY_FIELD = "api_key"
"""Config field the submitting key is forwarded in (never shown in responses)."""


class TrainingJobRequest(WireModel):
    """Body of ``POST /v1/training-jobs``: the job kind and its config (``SFTConfig`` for
    ``sft``, ``AnnotateConfig`` for ``annotate``)."""

    kind: Literal["sft", "annotate"] = "sft"
    config: dict[str, Any] = Field(default_factory=dict)


class TrainingJobList(WireModel):
    """The caller's team's training jobs, newest first."""

    data: list[JobRecord]
    count: int


def _runner(request: Request) -> JobRunner:
    return request.app.state.training_runner  # type: ignore[no-any-return]


RunnerDep = Annotated[JobRunner, Depends(_runner)]


def public(record: JobRecord) -> JobRecord:
    """``record`` without the forwarded API key (what every response shows)."""
    if API_KEY_FIELD not in record.config:
        return record
    clean = {k: v for k, v in record.config.items() if k != API_KEY_FIELD}
    return record.model_copy(update={"config": clean})


def owned(runner: JobRunner, job_id: str, team: str) -> JobRecord:
    """The job if ``team`` owns it; another team's job is indistinguishable from a missing one.

    Raises:
        NotFoundError: unknown id, or a job of another team (404).
    """
    record = runner.get(job_id)
    if record.team != team:
        raise NotFoundError(f"job '{job_id}' does not exist", param="job_id")
    return record


def with_api_key(config: dict[str, Any], api_key: str | None) -> dict[str, Any]:
    """``config`` carrying the submitting key for the job's clients (unchanged without one)."""
    return config if api_key is None else {**config, API_KEY_FIELD: api_key}


@router.post("", response_model=JobRecord, status_code=201, responses=_ERRORS)
def start_training(
    body: TrainingJobRequest, runner: RunnerDep, request: Request, caller: CallerDep
) -> JobRecord:
    """Validate the job's config (422 naming the field) and start it for the caller's team.

    Raises:
        QuotaExceededError: the team already has its quota of queued + running jobs (429).
    """
    settings = request.app.state.settings
    limit = settings.max_active_jobs_per_team
    if limit is not None:
        active = sum(1 for r in runner.list() if r.team == caller.team and r.state in _ACTIVE)
        if active >= limit:
            raise QuotaExceededError(
                f"team '{caller.team}' already has {active} queued or running training jobs "
                f"(limit {limit})",
                retry_after_s=settings.quota_retry_after_s,
            )
    config = with_api_key(body.config, caller.api_key)
    return public(runner.submit(body.kind, config, team=caller.team))


@router.get("", response_model=TrainingJobList, responses=_ERRORS)
def list_training(
    runner: RunnerDep, caller: CallerDep, state: Annotated[JobState | None, Query()] = None
) -> TrainingJobList:
    """The caller's team's training jobs, optionally filtered by state, newest first."""
    jobs = [public(r) for r in runner.list(state) if r.team == caller.team]
    return TrainingJobList(data=jobs, count=len(jobs))


@router.get("/{job_id}", response_model=JobRecord, responses=_ERRORS)
def get_training(job_id: str, runner: RunnerDep, caller: CallerDep) -> JobRecord:
    """Progress, latest loss, result (checkpoint path) or error."""
    return public(owned(runner, job_id, caller.team))


@router.post("/{job_id}/cancel", response_model=JobRecord, responses=_ERRORS)
def cancel_training(job_id: str, runner: RunnerDep, caller: CallerDep) -> JobRecord:
    """Request cancellation."""
    owned(runner, job_id, caller.team)
    return public(runner.cancel(job_id))
