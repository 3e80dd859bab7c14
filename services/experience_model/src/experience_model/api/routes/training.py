"""Experience-model jobs run next to the service: SFT (paper Eq. 5) and teacher annotation.

``POST /v1/training-jobs`` starts a job (in a child process, or on a Celery worker with
``EXPERIENCE_MODEL_JOB_BACKEND=celery``) of one of two kinds:

- ``sft`` (default): fine-tune the experience model on replay-store transitions; when it
  succeeds, load the new checkpoint with ``POST /v1/model:reload`` (``result.checkpoint``);
- ``annotate``: a teacher writes reasoning traces for the real transitions that lack one
  (:mod:`experience_model.training.annotate`); run it before ``sft``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from dreamgym.errors import ErrorResponse
from dreamgym.jobs import JobRecord, JobRunner
from dreamgym.types import WireModel

router = APIRouter(prefix="/v1/training-jobs", tags=["training"])


class TrainingJobRequest(WireModel):
    """Body of ``POST /v1/training-jobs``: the job kind and its config (``SFTConfig`` for
    ``sft``, ``AnnotateConfig`` for ``annotate``)."""

    kind: Literal["sft", "annotate"] = "sft"
    config: dict[str, Any] = Field(default_factory=dict)


def _runner(request: Request) -> JobRunner:
    return request.app.state.training_runner  # type: ignore[no-any-return]


RunnerDep = Annotated[JobRunner, Depends(_runner)]


@router.post(
    "", response_model=JobRecord, status_code=201, responses={422: {"model": ErrorResponse}}
)
def start_training(body: TrainingJobRequest, runner: RunnerDep) -> JobRecord:
    """Validate the job's config (422 naming the field) and start it."""
    return runner.submit(body.kind, body.config)


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
