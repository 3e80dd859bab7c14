"""``GET /v1/stats``: table statistics."""

from __future__ import annotations

from fastapi import APIRouter

from replay_store.api.deps import ReplayServiceDep
from replay_store.schemas import ReplayStats

router = APIRouter(tags=["stats"])


@router.get("/stats", response_model=ReplayStats)
def read_stats(replay: ReplayServiceDep) -> ReplayStats:
    """Trajectory/transition counts by source, environment and policy; success rate per policy."""
    return replay.stats()
