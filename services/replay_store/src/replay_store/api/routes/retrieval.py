"""``POST /v1/retrieve``: top-k stored transitions nearest to (task, observation, action) keys."""

from __future__ import annotations

from fastapi import APIRouter

from dreamgym.server.auth import TeamDep
from replay_store.api.deps import ReplayServiceDep
from replay_store.schemas import ErrorResponse, RetrievalRequest, RetrievalResponse

router = APIRouter(tags=["retrieval"])


@router.post(
    "/retrieve", response_model=RetrievalResponse, responses={422: {"model": ErrorResponse}}
)
def retrieve(body: RetrievalRequest, replay: ReplayServiceDep, team: TeamDep) -> RetrievalResponse:
    """Top-k of the team's transitions per query by cosine similarity of φ(s, a) (Eq. 4)."""
    return RetrievalResponse(results=replay.retrieve(body.queries, body.k, body.filters, team=team))
