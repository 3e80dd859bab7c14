"""``/v1/trajectories``: ingest (idempotent, all or nothing), read one, list summaries."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from replay_store.api.deps import ReplayServiceDep
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
    404: {"model": ErrorResponse},
    409: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
}


@router.post("/trajectories", response_model=IngestResult, responses=_ERRORS)
def ingest_trajectories(body: TrajectoryIngestRequest, replay: ReplayServiceDep) -> IngestResult:
    """Store trajectories; re-sending one is a duplicate, not a second copy.

    The batch is one transaction: a malformed trajectory (422) or an id already stored with other
    content (409) stores nothing.
    """
    return replay.ingest(body.trajectories)


@router.get(
    "/trajectories/{trajectory_id:path}",
    response_model=Trajectory,
    response_model_exclude_none=False,
    responses=_ERRORS,
)
def read_trajectory(trajectory_id: str, replay: ReplayServiceDep) -> Trajectory:
    """Read one stored trajectory with all its transitions."""
    return replay.get_trajectory(trajectory_id)


@router.get("/trajectories", response_model=TrajectoryList, responses=_ERRORS)
def list_trajectories(
    replay: ReplayServiceDep,
    environment: str | None = None,
    source: DataSource | None = None,
    policy: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TrajectoryList:
    """List trajectory summaries, oldest first; ``count`` is the total matching the filters."""
    filters = TrajectoryFilters(environment=environment, source=source, policy=policy)
    return replay.list_trajectories(filters, limit=limit, offset=offset)
