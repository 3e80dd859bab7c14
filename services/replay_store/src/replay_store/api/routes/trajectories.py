"""``/v1/trajectories``: ingest (idempotent, all or nothing), read one, list summaries."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from dreamgym.server.auth import TeamDep
from replay_store.api.deps import ReplayServiceDep
from replay_store.api.idempotency import IdempotencyDep
from replay_store.domain.ports import TrajectoryFilters
from replay_store.schemas import (
    DataSource,
    ErrorResponse,
    IngestResult,
    Trajectory,
    TrajectoryIngestRequest,
    TrajectoryList,
)

router = APIRouter(tags=["trajectories"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorResponse},
    404: {"model": ErrorResponse},
    409: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    429: {"model": ErrorResponse},
}


@router.post("/trajectories", response_model=IngestResult, responses=_ERRORS)
def ingest_trajectories(
    body: TrajectoryIngestRequest, replay: ReplayServiceDep, team: TeamDep, idem: IdempotencyDep
) -> IngestResult:
    """Store trajectories for the caller's team; re-sending one is a duplicate, not a copy.

    The batch is one transaction: a malformed trajectory (422), an id the team already stores
    with other content (409) or a batch over the team's quota (429) stores nothing. With
    ``REPLAY_STORE_MAX_TRAJECTORIES`` the oldest (``fifo``) or lowest-priority (``priority``)
    stored trajectories are evicted with their transitions in the same transaction. An
    ``Idempotency-Key`` header makes a repeat return the first response without a second write.
    """
    return idem.run(body, lambda: replay.ingest(body.trajectories, team=team), IngestResult)


@router.get(
    "/trajectories/{trajectory_id:path}",
    response_model=Trajectory,
    response_model_exclude_none=False,
    responses=_ERRORS,
)
def read_trajectory(trajectory_id: str, replay: ReplayServiceDep, team: TeamDep) -> Trajectory:
    """Read one of the team's trajectories with all its transitions (404 for other teams')."""
    return replay.get_trajectory(trajectory_id, team=team)


@router.get("/trajectories", response_model=TrajectoryList, responses=_ERRORS)
def list_trajectories(
    replay: ReplayServiceDep,
    team: TeamDep,
    environment: str | None = None,
    source: DataSource | None = None,
    policy: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TrajectoryList:
    """List the team's trajectory summaries, oldest first; ``count`` is the total matching."""
    filters = TrajectoryFilters(environment=environment, source=source, policy=policy)
    return replay.list_trajectories(filters, limit=limit, offset=offset, team=team)
