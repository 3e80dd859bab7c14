"""``/v1/transitions``: uniform sampling and keyset-paginated export (SFT data)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from dreamgym.server.auth import TeamDep
from replay_store.api.deps import ReplayServiceDep
from replay_store.schemas import (
    MAX_PAGE_SIZE,
    DataSource,
    ErrorResponse,
    RetrievalFilters,
    Split,
    TransitionPage,
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
    after_id: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 1000,
) -> TransitionPage:
    """One page of the team's transitions by id; pass ``next_after_id`` back as ``after_id``."""
    filters = RetrievalFilters(environment=environment, source=source, split=split)
    return replay.page_transitions(filters, after_id=after_id, limit=limit, team=team)
