"""Experience-model training jobs (SFT, paper Eq. 5) run next to the service.

``POST /v1/training-jobs`` starts an SFT job (in a child process, or on a ``gpu`` Celery worker
with ``EXPERIENCE_MODEL_JOB_BACKEND=celery``); when it succeeds, load the new
checkpoint with ``POST /v1/model:reload`` (``result.checkpoint``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from dreamgym.errors import ErrorResponse
from dreamgym.jobs import JobRecord, JobRunner
from dreamgym.types import WireModel

router = APIRouter(prefix="/v1/training-jobs", tags=["training"])


class TrainingJobRequest(WireModel):
    """Body of ``POST /v1/training-jobs``: an SFT config (see ``SFTConfig``)."""

    config: dict[str, Any] = Field(default_factory=dict)


def _runner(request: Request) -> JobRunner:
    return request.app.state.training_runner  # type: ignore[no-any-return]


RunnerDep = Annotated[JobRunner, Depends(_runner)]


@router.post(
    "", response_model=JobRecord, status_code=201, responses={422: {"model": ErrorResponse}}
)
def start_training(body: TrainingJobRequest, runner: RunnerDep) -> JobRecord:
    """Validate the SFT config (422 naming the field) and start training."""
    return runner.submit("sft", body.config)


@router.get("/{job_id}", response_model=JobRecord, responses={404: {"model": ErrorResponse}})
def get_training(job_id: str, runner: RunnerDep) -> JobRecord:
    """Progress, latest loss, result (checkpoint path) or error."""
    return runner.get(job_id)


@router.post(
    "/{job_id}/cancel",
    response_model=JobRecord,
    responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
)
def cancel_training(job_id: str, runner: RunnerDep) -> JobRecord:
    """Request cancellation."""
    return runner.cancel(job_id)
