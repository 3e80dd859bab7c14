"""Wire models of the task generator.

The request/response bodies are shared with the typed client, so they live in the core package
(:mod:`dreamgym.task_types`) and are re-exported here; tasks themselves are
:class:`dreamgym.types.Task`. ORM rows never appear on the wire.
"""

from dreamgym.errors import ErrorResponse
from dreamgym.task_types import (
    RejectedVariation,
    TaskDetailResponse,
    TaskGenerateRequest,
    TaskGenerateResponse,
    TaskListResponse,
    TaskOutcomeRequest,
    TaskOutcomeResponse,
    TaskRegisterRequest,
    TaskRegisterResponse,
    TaskSampleRequest,
    TaskSampleResponse,
    TaskScore,
    TaskScoreListResponse,
)
from dreamgym.types import Split, Task, TaskOrigin

__all__ = [
    "ERROR_RESPONSES",
    "ErrorResponse",
    "RejectedVariation",
    "Split",
    "Task",
    "TaskDetailResponse",
    "TaskGenerateRequest",
    "TaskGenerateResponse",
    "TaskListResponse",
    "TaskOrigin",
    "TaskOutcomeRequest",
    "TaskOutcomeResponse",
    "TaskRegisterRequest",
    "TaskRegisterResponse",
    "TaskSampleRequest",
    "TaskSampleResponse",
    "TaskScore",
    "TaskScoreListResponse",
]

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorResponse} for code in (401, 404, 409, 422, 429, 502, 503)
}
"""OpenAPI ``responses=`` entry declaring the error envelope on every route."""
