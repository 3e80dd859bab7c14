"""Request/response models of the replay store API.

The wire models live in :mod:`dreamgym.replay_types` so that this service and
:mod:`dreamgym.clients.replay_store` share one definition; trajectories on the wire are
:class:`dreamgym.types.Trajectory`. This module re-exports them for the routes.
"""

from __future__ import annotations

from dreamgym.errors import ErrorResponse
from dreamgym.replay_types import (
    MAX_PAGE_SIZE,
    IngestResult,
    ReplayStats,
    RetrievalFilters,
    RetrievalQuery,
    RetrievalRequest,
    RetrievalResponse,
    RetrievedTransition,
    TrajectoryIngestRequest,
    TrajectoryList,
    TrajectorySummary,
    TransitionPage,
    TransitionReasoningPatch,
    TransitionReasoningRequest,
    TransitionReasoningResponse,
    TransitionRecord,
    TransitionSampleRequest,
    TransitionSampleResponse,
)
from dreamgym.types import DataSource, Split, Trajectory

__all__ = [
    "MAX_PAGE_SIZE",
    "DataSource",
    "ErrorResponse",
    "IngestResult",
    "ReplayStats",
    "RetrievalFilters",
    "RetrievalQuery",
    "RetrievalRequest",
    "RetrievalResponse",
    "RetrievedTransition",
    "Split",
    "Trajectory",
    "TrajectoryIngestRequest",
    "TrajectoryList",
    "TrajectorySummary",
    "TransitionPage",
    "TransitionReasoningPatch",
    "TransitionReasoningRequest",
    "TransitionReasoningResponse",
    "TransitionRecord",
    "TransitionSampleRequest",
    "TransitionSampleResponse",
]
