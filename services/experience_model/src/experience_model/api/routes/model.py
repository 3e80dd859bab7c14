"""Model admin: what is served, and hot reload of a new checkpoint.

Reloading is an operator action: only the teams in ``EXPERIENCE_MODEL_ADMIN_TEAMS`` (default
``default``, the single-user team) may do it; any other team gets 403 ``forbidden``.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from dreamgym.errors import ErrorResponse, ForbiddenError
from dreamgym.experience_types import ModelInfo, ReloadRequest
from dreamgym.server.auth import TeamDep
from experience_model.api.deps import RuntimeDep

router = APIRouter(prefix="/v1", tags=["model"])


@router.get("/model", response_model=ModelInfo)
def model_info(runtime: RuntimeDep) -> ModelInfo:
    """Backend, checkpoint and prompt settings in use."""
    return runtime.info()  # type: ignore[no-any-return]


@router.post(
    "/model:reload",
    response_model=ModelInfo,
    responses={code: {"model": ErrorResponse} for code in (401, 403, 404, 422, 503)},
)
async def reload_model(body: ReloadRequest, runtime: RuntimeDep, team: TeamDep) -> ModelInfo:
    """Load another checkpoint (e.g. after experience-model SFT); live episodes are kept.

    Raises:
        ForbiddenError: the caller's team is not an admin team (403).
    """
    if team not in runtime.settings.admin_teams:
        raise ForbiddenError(
            f"team '{team}' may not reload the model: it is an operator action "
            "(EXPERIENCE_MODEL_ADMIN_TEAMS)"
        )
    await run_in_threadpool(runtime.reload, body.model_path)
    return runtime.info()  # type: ignore[no-any-return]


@router.get("/stats")
def serving_stats(runtime: RuntimeDep) -> dict[str, object]:
    """Batching and timing statistics of recent batches (for tuning and the demo report)."""
    timings = list(runtime.model.timings)
    batcher = runtime.episodes.batcher

    def pct(values: list[float], q: float) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0, 1)

    return {
        "batches": batcher.stats.batches,
        "steps": batcher.stats.items,
        "mean_batch_size": (
            batcher.stats.items / batcher.stats.batches if batcher.stats.batches else None
        ),
        "queue_depth": batcher.queue_depth,
        "rejected_queue_full": batcher.stats.rejected_full,
        "parse_failures": runtime.model.parse_failures,
        "generated_tokens": runtime.model.generated_tokens,
        "live_episodes": runtime.store.live_count(),
        "retrieval_ms_p50": pct([t[1] for t in timings], 0.5),
        "generate_ms_p50": pct([t[2] for t in timings], 0.5),
        "recent_batches": [
            {
                "size": t[0],
                "retrieval_ms": round(t[1] * 1000, 1),
                "generate_ms": round(t[2] * 1000, 1),
            }
            for t in timings[-20:]
        ],
        "retrieval_cache_hits": getattr(runtime.model.retriever, "hits", None),
        "retrieval_cache_misses": getattr(runtime.model.retriever, "misses", None),
    }
