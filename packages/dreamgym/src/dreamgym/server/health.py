"""``/healthz`` (liveness) and ``/readyz`` (readiness) routes.

``/healthz`` answers 200 while the process serves requests. ``/readyz`` runs the service's
readiness checks (database reachable, model loaded, ...) and answers 503 with the failing checks
named until all pass, which is what Kubernetes readiness probes and ``dreamgym up`` wait on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

__all__ = ["ReadinessCheck", "health_router"]

# A readiness check returns None when ready, or a short reason when not.
ReadinessCheck = Callable[[Request], "str | None | Awaitable[str | None]"]


def health_router(service: str, version: str, checks: dict[str, ReadinessCheck]) -> APIRouter:
    """Build the health router.

    Args:
        service: service name reported in the body.
        version: service version reported in the body.
        checks: name → check; each returns ``None`` when ready or a reason string.

    Returns:
        An :class:`APIRouter` with ``GET /healthz`` and ``GET /readyz``.
    """
    router = APIRouter(tags=["health"])

    @router.get("/healthz", summary="Liveness probe")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service, "version": version}

    @router.get("/readyz", summary="Readiness probe", response_model=None)
    async def readyz(request: Request) -> JSONResponse:
        failing: dict[str, str] = {}
        for name, check in checks.items():
            try:
                result = check(request)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:  # a crashing check means not ready, not a 500
                result = f"{type(exc).__name__}: {exc}"
            if result:
                failing[name] = str(result)
        body = {"status": "ready" if not failing else "not_ready", "service": service}
        if failing:
            body["failing"] = failing  # type: ignore[assignment]
        return JSONResponse(status_code=200 if not failing else 503, content=body)

    return router
