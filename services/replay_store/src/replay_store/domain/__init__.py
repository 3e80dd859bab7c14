"""Pure replay-store logic: idempotency keys, retrieval keys, sampling and the service facade.

Nothing here does I/O directly: the :class:`~replay_store.domain.service.ReplayService` talks to
storage and embeddings through the :mod:`~replay_store.domain.ports` protocols.
"""

from replay_store.domain.keys import (
    PreparedTrajectory,
    content_hash,
    prepare_trajectory,
    retrieval_key,
    trajectory_retrieval_keys,
)
from replay_store.domain.sampling import uniform_sample_indices

__all__ = [
    "PreparedTrajectory",
    "content_hash",
    "prepare_trajectory",
    "retrieval_key",
    "trajectory_retrieval_keys",
    "uniform_sample_indices",
]
