"""``GET /v1/stats``: table statistics."""

from __future__ import annotations

from fastapi import APIRouter

from dreamgym.server.auth import TeamDep
from replay_store.api.deps import ReplayServiceDep
from replay_store.schemas import ReplayStats

router = APIRouter(tags=["stats"])


@router.get("/stats", response_model=ReplayStats)
def read_stats(replay: ReplayServiceDep, team: TeamDep) -> ReplayStats:
    """The team's trajectory/transition counts by source, environment and policy; success rates."""
    return replay.stats(team=team)
