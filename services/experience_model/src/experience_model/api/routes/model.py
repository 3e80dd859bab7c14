"""Model admin: what is served, and hot reload of a new checkpoint."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from dreamgym.errors import ErrorResponse
from dreamgym.experience_types import ModelInfo, ReloadRequest
from experience_model.api.deps import RuntimeDep

router = APIRouter(prefix="/v1", tags=["model"])


@router.get("/model", response_model=ModelInfo)
def model_info(runtime: RuntimeDep) -> ModelInfo:
    """Backend, checkpoint and prompt settings in use."""
    return runtime.info()  # type: ignore[no-any-return]


@router.post("/model:reload", response_model=ModelInfo,
             responses={code: {"model": ErrorResponse} for code in (404, 422, 503)})
async def reload_model(body: ReloadRequest, runtime: RuntimeDep) -> ModelInfo:
    """Load another checkpoint (e.g. after experience-model SFT); live episodes are kept."""
    await run_in_threadpool(runtime.reload, body.model_path)
    return runtime.info()  # type: ignore[no-any-return]
