"""Task registry, curriculum sampling and outcome reporting.

- ``POST /v1/tasks`` — register tasks (idempotent by ``task_id``)
- ``GET /v1/tasks`` — list tasks by split / origin / environment
- ``POST /v1/tasks:sample`` — a λ-capped train batch or a uniform eval batch
- ``GET /v1/tasks/{task_id}`` — one task with its score, group count and lineage
- ``POST /v1/tasks/{task_id}/outcomes`` — report one rollout group's rewards

Task ids may contain ``/`` (``twx-coin/train/3``): the path parameter takes the rest of the path.
Every route works on the caller's team only (its API key; ``default`` without authentication):
another team's task id is a 404. Handlers are plain ``def``: FastAPI runs them in worker threads,
off the event loop.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from dreamgym.server.auth import TeamDep
from task_generator.api.deps import CurriculumDep
from task_generator.schemas import (
    ERROR_RESPONSES,
    Split,
    TaskDetailResponse,
    TaskListResponse,
    TaskOrigin,
    TaskOutcomeRequest,
    TaskOutcomeResponse,
    TaskRegisterRequest,
    TaskRegisterResponse,
    TaskSampleRequest,
    TaskSampleResponse,
)

__all__ = ["router"]

router = APIRouter(tags=["tasks"], responses=ERROR_RESPONSES)


@router.post("/tasks", response_model=TaskRegisterResponse, summary="Register tasks")
def register_tasks(
    body: TaskRegisterRequest, curriculum: CurriculumDep, team: TeamDep
) -> TaskRegisterResponse:
    """Store the team's tasks in one transaction; known ids with equal content are duplicates.

    A known id with different content is a 409, more new tasks than the team's quota allows a
    429 (with ``Retry-After``); either way nothing is stored.
    """
    return curriculum.register(body.tasks, team=team)


@router.get("/tasks", response_model=TaskListResponse, summary="List tasks")
def list_tasks(
    curriculum: CurriculumDep,
    team: TeamDep,
    split: Split | None = None,
    origin: TaskOrigin | None = None,
    environment: Annotated[str | None, Query(min_length=1)] = None,
    parent_task_id: Annotated[str | None, Query(min_length=1)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TaskListResponse:
    """A page of tasks in creation order (``parent_task_id``: the variations of that task);
    ``count`` counts every matching task."""
    return curriculum.list_tasks(
        team=team,
        split=split,
        origin=origin,
        environment=environment,
        limit=limit,
        offset=offset,
        parent_task_id=parent_task_id,
    )


@router.post("/tasks:sample", response_model=TaskSampleResponse, summary="Sample a task batch")
def sample_tasks(
    body: TaskSampleRequest, curriculum: CurriculumDep, team: TeamDep
) -> TaskSampleResponse:
    """Train: seed + generated tasks, at most floor(λ·B) generated. Eval: uniform eval seeds."""
    return curriculum.sample(body, team=team)


@router.get("/tasks/{task_id:path}", response_model=TaskDetailResponse, summary="Get a task")
def get_task(task_id: str, curriculum: CurriculumDep, team: TeamDep) -> TaskDetailResponse:
    """The task, its curriculum score (Eq. 7), number of outcome groups and ancestors."""
    return curriculum.task_detail(task_id, team=team)


@router.post(
    "/tasks/{task_id:path}/outcomes",
    response_model=TaskOutcomeResponse,
    summary="Report a rollout group's rewards",
)
def report_outcomes(
    task_id: str, body: TaskOutcomeRequest, curriculum: CurriculumDep, team: TeamDep
) -> TaskOutcomeResponse:
    """Append one group of outcome rewards; the response holds the task's new score."""
    return curriculum.record_outcome(task_id, body.rewards, body.policy_version, team=team)
