"""``Annotated`` dependency aliases read from ``app.state`` (set by the lifespan)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from dreamgym.errors import BackendUnavailableError
from experience_model.domain.service import EpisodeService

__all__ = ["EpisodeServiceDep", "RuntimeDep", "get_episode_service", "get_runtime"]


def get_runtime(request: Request) -> Any:
    """The app's :class:`experience_model.main.Runtime` (503 while the model is loading)."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None or runtime.episodes is None:
        raise BackendUnavailableError("experience model is loading", retry_after_s=2.0)
    return runtime


def get_episode_service(request: Request) -> EpisodeService:
    """The app's :class:`EpisodeService`."""
    return get_runtime(request).episodes  # type: ignore[no-any-return]


EpisodeServiceDep = Annotated[EpisodeService, Depends(get_episode_service)]
RuntimeDep = Annotated[Any, Depends(get_runtime)]
