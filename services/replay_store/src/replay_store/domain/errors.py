"""Replay-store errors (subclasses of the shared :mod:`dreamgym.errors` families)."""

from __future__ import annotations

from dreamgym.errors import ConflictError, InvalidRequestError, NotFoundError, QuotaExceededError

__all__ = [
    "IdempotencyKeyInUseError",
    "IdempotencyKeyReusedError",
    "LimitExceededError",
    "PriorityTargetNotFoundError",
    "TrajectoryConflictError",
    "TrajectoryNotFoundError",
    "TrajectoryQuotaExceededError",
    "TransitionNotFoundError",
]


class TrajectoryNotFoundError(NotFoundError):
    """The caller's team stores no trajectory under this id (404, also for other teams' ids)."""

    error_type = "trajectory_not_found"

    def __init__(self, trajectory_id: str) -> None:
        super().__init__(f"trajectory_id '{trajectory_id}' does not exist", param="trajectory_id")
        self.trajectory_id = trajectory_id


class TransitionNotFoundError(NotFoundError):
    """The caller's team stores no transition under this id (404, also for other teams' ids)."""

    error_type = "transition_not_found"

    def __init__(self, transition_id: int, param: str = "id") -> None:
        super().__init__(f"transition {transition_id} does not exist", param=param)
        self.transition_id = transition_id


class TrajectoryConflictError(ConflictError):
    """A trajectory id is already stored (or repeated in the batch) with different content (409)."""

    error_type = "trajectory_conflict"

    def __init__(self, trajectory_id: str, index: int) -> None:
        super().__init__(
            f"trajectory_id '{trajectory_id}' already exists with different content "
            f"(body.trajectories.{index}); trajectory ids are immutable, use a new id",
            param=f"body.trajectories.{index}.trajectory_id",
        )
        self.trajectory_id = trajectory_id
        self.index = index


class LimitExceededError(InvalidRequestError):
    """A request exceeds a limit configured on this deployment (422)."""

    error_type = "limit_exceeded"

    def __init__(self, field: str, value: int, maximum: int) -> None:
        super().__init__(f"{field} must be <= {maximum} on this server, got {value}", param=field)
        self.value = value
        self.maximum = maximum


class TrajectoryQuotaExceededError(QuotaExceededError):
    """Storing the batch would take the team past its trajectory quota (429); nothing stored."""

    error_type = "trajectory_quota_exceeded"

    def __init__(
        self, team: str, stored: int, adding: int, quota: int, retry_after_s: float
    ) -> None:
        super().__init__(
            f"team '{team}' stores {stored} trajectories; storing {adding} more would exceed its "
            f"quota of {quota} (REPLAY_STORE_MAX_TRAJECTORIES_PER_TEAM)",
            param="body.trajectories",
            retry_after_s=retry_after_s,
        )
        self.team = team
        self.stored = stored
        self.adding = adding
        self.quota = quota


class PriorityTargetNotFoundError(NotFoundError):
    """A priority update names ids the team does not store (404); nothing was updated."""

    error_type = "priority_target_not_found"

    def __init__(self, kind: str, missing: list[str]) -> None:
        shown = ", ".join(f"'{m}'" for m in missing[:5]) + (" ..." if len(missing) > 5 else "")
        super().__init__(
            f"{len(missing)} {kind} id(s) do not exist: {shown}; no priority was updated",
            param="body.priorities",
        )
        self.missing = missing


class IdempotencyKeyReusedError(InvalidRequestError):
    """An ``Idempotency-Key`` was sent again with a different request (422)."""

    error_type = "idempotency_key_reused"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"Idempotency-Key '{key}' was already used with a different request body or path; "
            "use a new key for a new request",
            param="header.Idempotency-Key",
        )


class IdempotencyKeyInUseError(ConflictError):
    """The first request with this ``Idempotency-Key`` is still running (409); retry later."""

    error_type = "idempotency_key_in_use"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"a request with Idempotency-Key '{key}' is still in progress; retry later",
            param="header.Idempotency-Key",
        )
