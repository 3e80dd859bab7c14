"""``/v1/transitions``: uniform sampling, keyset-paginated export (SFT data) and reasoning traces.

``PATCH /v1/transitions`` stores teacher reasoning traces (paper Eq. 5) on many transitions at
once, all or nothing; ``PATCH /v1/transitions/{transition_id}`` on one. Both are idempotent and
keep an existing trace unless ``overwrite`` is set.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from dreamgym.server.auth import TeamDep
from replay_store.api.deps import ReplayServiceDep
from replay_store.schemas import (
    MAX_PAGE_SIZE,
    DataSource,
    ErrorResponse,
    RetrievalFilters,
    Split,
    TransitionPage,
    TransitionReasoningPatch,
    TransitionReasoningRequest,
    TransitionReasoningResponse,
    TransitionRecord,
    TransitionSampleRequest,
    TransitionSampleResponse,
)

router = APIRouter(tags=["transitions"])


@router.post(
    "/transitions:sample",
    response_model=TransitionSampleResponse,
    responses={422: {"model": ErrorResponse}},
)
def sample_transitions(
    body: TransitionSampleRequest, replay: ReplayServiceDep, team: TeamDep
) -> TransitionSampleResponse:
    """Draw ``n`` distinct transitions (uniform, prioritized or recency; seeded) with P(i)."""
    return replay.sample(
        body.n,
        body.filters,
        seed=body.seed,
        team=team,
        strategy=body.strategy,
        alpha=body.alpha,
        half_life=body.half_life,
    )


@router.get(
    "/transitions", response_model=TransitionPage, responses={422: {"model": ErrorResponse}}
)
def list_transitions(
    replay: ReplayServiceDep,
    team: TeamDep,
    environment: str | None = None,
    source: DataSource | None = None,
    split: Split | None = None,
    has_reasoning: bool | None = None,
    after_id: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 1000,
) -> TransitionPage:
    """One page of the team's transitions by id; pass ``next_after_id`` back as ``after_id``."""
    filters = RetrievalFilters(
        environment=environment, source=source, split=split, has_reasoning=has_reasoning
    )
    return replay.page_transitions(filters, after_id=after_id, limit=limit, team=team)


@router.patch(
    "/transitions",
    response_model=TransitionReasoningResponse,
    responses={404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
def annotate_transitions(
    body: TransitionReasoningRequest, replay: ReplayServiceDep, team: TeamDep
) -> TransitionReasoningResponse:
    """Store reasoning traces on the team's transitions (404 naming the first unknown id)."""
    return replay.annotate(body.updates, overwrite=body.overwrite, team=team)


@router.patch(
    "/transitions/{transition_id}",
    response_model=TransitionRecord,
    responses={404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
def annotate_transition(
    transition_id: Annotated[int, Path(ge=1)],
    body: TransitionReasoningPatch,
    replay: ReplayServiceDep,
    team: TeamDep,
) -> TransitionRecord:
    """Store one reasoning trace; returns the transition as stored afterwards."""
    return replay.annotate_one(transition_id, body.reasoning, overwrite=body.overwrite, team=team)
