"""Prometheus scrape endpoint (see :mod:`experience_model.adapters.metrics` for the metrics)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from experience_model.adapters.metrics import CONTENT_TYPE_LATEST
from experience_model.api.deps import RuntimeDep

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response)
def metrics(runtime: RuntimeDep) -> Response:
    """Serving metrics in the Prometheus text format (503 while the model is loading)."""
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)
