"""Priority updates: sampling priorities of transitions, eviction priorities of trajectories.

- ``POST /v1/transitions:update-priorities`` — ``strategy="prioritized"`` samples by them;
- ``POST /v1/trajectories:update-priorities`` — ``REPLAY_STORE_EVICTION_POLICY=priority``
  evicts the lowest first.

Priorities are > 0 (default 1.0 for new rows). Each update is all or nothing: an id the team
does not store is a 404 and nothing changes. Both honour ``Idempotency-Key``.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from dreamgym.errors import InvalidRequestError
from dreamgym.server.auth import TeamDep
from dreamgym.types import WireModel
from replay_store.api.deps import ReplayServiceDep
from replay_store.api.idempotency import IdempotencyDep
from replay_store.schemas import ErrorResponse

router = APIRouter(tags=["priorities"])

MAX_PRIORITY_UPDATES = 10_000

_ERRORS: dict[int | str, dict[str, object]] = {
    404: {"model": ErrorResponse},
    409: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
}


class TransitionPriority(WireModel):
    """New sampling priority of one transition (``id`` as returned by sample/export)."""

    id: int = Field(ge=1)
    priority: float = Field(gt=0.0, allow_inf_nan=False)


class TrajectoryPriority(WireModel):
    """New eviction priority of one trajectory."""

    trajectory_id: str = Field(min_length=1)
    priority: float = Field(gt=0.0, allow_inf_nan=False)


class TransitionPriorityUpdate(WireModel):
    """Body of ``POST /v1/transitions:update-priorities`` (ids unique)."""

    priorities: list[TransitionPriority] = Field(min_length=1, max_length=MAX_PRIORITY_UPDATES)


class TrajectoryPriorityUpdate(WireModel):
    """Body of ``POST /v1/trajectories:update-priorities`` (ids unique)."""

    priorities: list[TrajectoryPriority] = Field(min_length=1, max_length=MAX_PRIORITY_UPDATES)


class PriorityUpdateResult(WireModel):
    """Number of rows whose priority was set."""

    updated: int = Field(ge=0)


def _unique(ids: list[object]) -> None:
    seen: set[object] = set()
    for i, value in enumerate(ids):
        if value in seen:
            raise InvalidRequestError(
                f"id {value!r} appears twice in body.priorities", param=f"body.priorities.{i}"
            )
        seen.add(value)


@router.post(
    "/transitions:update-priorities", response_model=PriorityUpdateResult, responses=_ERRORS
)
def update_transition_priorities(
    body: TransitionPriorityUpdate, replay: ReplayServiceDep, team: TeamDep, idem: IdempotencyDep
) -> PriorityUpdateResult:
    """Set sampling priorities of the team's transitions (all or nothing; 404 for unknown ids)."""
    _unique([p.id for p in body.priorities])
    updates = {p.id: p.priority for p in body.priorities}
    return idem.run(
        body,
        lambda: PriorityUpdateResult(
            updated=replay.update_transition_priorities(updates, team=team)
        ),
        PriorityUpdateResult,
    )


@router.post(
    "/trajectories:update-priorities", response_model=PriorityUpdateResult, responses=_ERRORS
)
def update_trajectory_priorities(
    body: TrajectoryPriorityUpdate, replay: ReplayServiceDep, team: TeamDep, idem: IdempotencyDep
) -> PriorityUpdateResult:
    """Set eviction priorities of the team's trajectories (all or nothing; 404 unknown ids)."""
    _unique([p.trajectory_id for p in body.priorities])
    updates = {p.trajectory_id: p.priority for p in body.priorities}
    return idem.run(
        body,
        lambda: PriorityUpdateResult(
            updated=replay.update_trajectory_priorities(updates, team=team)
        ),
        PriorityUpdateResult,
    )
