"""Curriculum scores and task generation.

- ``GET /v1/curriculum/scores`` — scored tasks ranked by reward variance V_τ (Eq. 7)
- ``POST /v1/curriculum:generate`` — vary the highest-variance tasks with the LLM (Eq. 6)

Handlers are plain ``def``: database work and LLM generation run in worker threads.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from dreamgym.server.auth import TeamDep, presented_api_key
from task_generator.api.deps import CurriculumDep, TaskGeneratorDep
from task_generator.schemas import (
    ERROR_RESPONSES,
    TaskGenerateRequest,
    TaskGenerateResponse,
    TaskScoreListResponse,
)

__all__ = ["router"]

router = APIRouter(tags=["curriculum"], responses=ERROR_RESPONSES)


def caller_api_key(request: Request) -> str | None:
    """The caller's key when authentication is on (forwarded to the experience model)."""
    state = getattr(request.app.state, "team_auth", None)
    return presented_api_key(request.headers) if state is not None and state.enabled else None


@router.get(
    "/curriculum/scores", response_model=TaskScoreListResponse, summary="Rank tasks by score"
)
def list_scores(
    curriculum: CurriculumDep,
    team: TeamDep,
    environment: Annotated[str | None, Query(min_length=1)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> TaskScoreListResponse:
    """The team's tasks with at least one outcome group, by score descending (ties by task id)."""
    return curriculum.ranking(team=team, environment=environment, limit=limit)


@router.post(
    "/curriculum:generate", response_model=TaskGenerateResponse, summary="Generate task variations"
)
def generate_tasks(
    body: TaskGenerateRequest, generator: TaskGeneratorDep, team: TeamDep, request: Request
) -> TaskGenerateResponse:
    """Generate n variations of each of the team's m highest-variance train tasks; store the
    ones that parse, are new and (with a feasibility checker) the experience model can complete.

    503 when no LLM backend is configured; 502 when the experience model fails the feasibility
    check; 429 when the team's task quota is full; 200 with an empty ``created`` and a
    ``message`` when no task has a score above 0.
    """
    return generator.generate(body, team=team, api_key=caller_api_key(request))
