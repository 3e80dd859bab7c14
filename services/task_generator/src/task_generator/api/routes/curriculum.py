"""Curriculum scores and task generation.

- ``GET /v1/curriculum/scores`` — scored tasks ranked by reward variance V_τ (Eq. 7)
- ``POST /v1/curriculum:generate`` — vary the highest-variance tasks with the LLM (Eq. 6)

Handlers are plain ``def``: database work and LLM generation run in worker threads.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from task_generator.api.deps import CurriculumDep, TaskGeneratorDep
from task_generator.schemas import (
    ERROR_RESPONSES,
    TaskGenerateRequest,
    TaskGenerateResponse,
    TaskScoreListResponse,
)

__all__ = ["router"]

router = APIRouter(tags=["curriculum"], responses=ERROR_RESPONSES)


@router.get(
    "/curriculum/scores", response_model=TaskScoreListResponse, summary="Rank tasks by score"
)
def list_scores(
    curriculum: CurriculumDep,
    environment: Annotated[str | None, Query(min_length=1)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> TaskScoreListResponse:
    """Tasks with at least one outcome group, by score descending (ties by task id)."""
    return curriculum.ranking(environment=environment, limit=limit)


@router.post(
    "/curriculum:generate", response_model=TaskGenerateResponse, summary="Generate task variations"
)
def generate_tasks(body: TaskGenerateRequest, generator: TaskGeneratorDep) -> TaskGenerateResponse:
    """Generate n variations of each of the m highest-variance train tasks and store valid ones.

    503 when no LLM backend is configured; 200 with an empty ``created`` and a ``message`` when
    no task has a score above 0.
    """
    return generator.generate(body)
