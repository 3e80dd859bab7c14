"""Typed errors shared by services and clients, and the one error envelope on the wire.

Every service maps :class:`DreamGymError` subclasses to HTTP statuses in one place
(:mod:`dreamgym.server.errors`); clients map the envelope back to the same classes
(:mod:`dreamgym.clients.base`). The envelope follows vLLM's ``ErrorResponse``::

    {"error": {"type": "episode_not_found", "message": "...", "param": "episode_id", "code": 404}}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = [
    "AuthenticationError",
    "BackendUnavailableError",
    "CapacityError",
    "ConflictError",
    "DreamGymError",
    "EpisodeFinishedError",
    "EpisodeNotFoundError",
    "ErrorInfo",
    "ErrorResponse",
    "ForbiddenError",
    "InvalidRequestError",
    "MalformedTransitionError",
    "NotFoundError",
    "QuotaExceededError",
    "StepTimeoutError",
    "error_class_for",
]


class ErrorInfo(BaseModel):
    """Body of the error envelope."""

    type: str
    message: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    """The error envelope every DreamGym service returns on 4xx/5xx."""

    error: ErrorInfo


class DreamGymError(Exception):
    """Base of all DreamGym domain errors.

    Attributes:
        status_code: HTTP status the error maps to.
        error_type: stable machine-readable type string.
        param: the request field the error is about, if any.
        retry_after_s: for 429/503, seconds after which a retry may succeed.
    """

    status_code: int = 500
    error_type: str = "internal_error"

    def __init__(
        self, message: str, *, param: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.retry_after_s = retry_after_s

    def to_response(self) -> ErrorResponse:
        """Build the wire envelope for this error."""
        return ErrorResponse(
            error=ErrorInfo(
                type=self.error_type, message=self.message, param=self.param, code=self.status_code
            )
        )


class InvalidRequestError(DreamGymError):
    """A request is well-formed JSON but semantically invalid (422)."""

    status_code = 422
    error_type = "invalid_request"


class AuthenticationError(DreamGymError):
    """The request carries no API key, or one that is unknown or revoked (401).

    The message never says which of the three it was, so a caller cannot probe for key ids.
    """

    status_code = 401
    error_type = "unauthenticated"


class ForbiddenError(DreamGymError):
    """The caller's team may not perform this action (403), e.g. an operator-only route.

    Only for actions, never for another team's resource: that is a 404, so ids are not disclosed.
    """

    status_code = 403
    error_type = "forbidden"


class NotFoundError(DreamGymError):
    """A named resource does not exist (404)."""

    status_code = 404
    error_type = "not_found"


class EpisodeNotFoundError(NotFoundError):
    """No live episode has this id (unknown, closed or expired after its idle TTL)."""

    error_type = "episode_not_found"

    def __init__(self, episode_id: str) -> None:
        super().__init__(
            f"episode '{episode_id}' does not exist "
            "(unknown, closed, or expired after its idle TTL)",
            param="episode_id",
        )
        self.episode_id = episode_id


class ConflictError(DreamGymError):
    """The request conflicts with the resource's current state (409)."""

    status_code = 409
    error_type = "conflict"


class EpisodeFinishedError(ConflictError):
    """A step was sent to an episode that already terminated or was truncated."""

    error_type = "episode_finished"

    def __init__(self, episode_id: str, reason: str) -> None:
        super().__init__(
            f"episode '{episode_id}' is already {reason}; reset a new episode",
            param="episode_id",
        )
        self.episode_id = episode_id


class MalformedTransitionError(DreamGymError):
    """The experience model's output could not be parsed after all retries (502).

    The episode is left unchanged, so the client can retry the step or mask the rollout; the
    failure is never turned into a reward of 0.
    """

    status_code = 502
    error_type = "malformed_transition"

    def __init__(self, reason: str, raw_text: str = "", attempts: int = 1) -> None:
        super().__init__(
            f"experience model output could not be parsed after {attempts} attempt(s): {reason}"
        )
        self.reason = reason
        self.raw_text = raw_text
        self.attempts = attempts


class CapacityError(DreamGymError):
    """The service is at capacity (429); retry after ``retry_after_s``."""

    status_code = 429
    error_type = "capacity_reached"


class QuotaExceededError(CapacityError):
    """A team's quota (stored trajectories, tasks, live episodes, queued jobs) is used up (429).

    ``retry_after_s`` says when to try again; stored data only frees up when the team deletes it
    or retention evicts it, so for storage quotas the hint is a back-off, not a promise.
    """

    error_type = "quota_exceeded"


class BackendUnavailableError(DreamGymError):
    """A dependency (model, database, another service) is not available (503)."""

    status_code = 503
    error_type = "backend_unavailable"


class StepTimeoutError(DreamGymError):
    """A step exceeded its deadline (504); the episode is unchanged and stays usable."""

    status_code = 504
    error_type = "step_timeout"


_BY_TYPE: dict[str, type[DreamGymError]] = {
    cls.error_type: cls
    for cls in (
        AuthenticationError,
        ForbiddenError,
        InvalidRequestError,
        NotFoundError,
        ConflictError,
        CapacityError,
        QuotaExceededError,
        BackendUnavailableError,
        StepTimeoutError,
    )
}


def error_class_for(error_type: str, status_code: int) -> type[DreamGymError]:
    """Pick the exception class a client raises for an error envelope.

    Args:
        error_type: the envelope's ``type``.
        status_code: the HTTP status.

    Returns:
        The most specific known :class:`DreamGymError` subclass (falls back on the status family).
    """
    if error_type in _BY_TYPE:
        return _BY_TYPE[error_type]
    by_status: dict[int, type[DreamGymError]] = {
        401: AuthenticationError,
        403: ForbiddenError,
        404: NotFoundError,
        409: ConflictError,
        422: InvalidRequestError,
        400: InvalidRequestError,
        429: CapacityError,
        503: BackendUnavailableError,
        504: StepTimeoutError,
    }
    return by_status.get(status_code, DreamGymError)


def envelope(error_type: str, message: str, code: int, param: str | None = None) -> dict[str, Any]:
    """Build an envelope dict directly (for handlers that do not raise)."""
    return ErrorResponse(
        error=ErrorInfo(type=error_type, message=message, param=param, code=code)
    ).model_dump()
