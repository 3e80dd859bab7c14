"""Idempotency keys of trajectories and retrieval keys of transitions (pure functions).

- The **content hash** of a trajectory is the SHA-256 of the canonical JSON of its content (task,
  task_id, transitions, provenance — everything but ``trajectory_id``). Canonical means: the
  validated model dumped in JSON mode (defaults filled in, so an omitted field and its default hash
  the same), keys sorted, no whitespace, UTF-8.
- The **trajectory id** is the client's ``trajectory_id`` or ``"traj-" + content hash``, so
  re-sending the same trajectory is idempotent.
- The **retrieval key** is the text embedded as φ(s_t, a_t) (DreamGym, arXiv 2511.03773, Eq. 4);
  one function builds it for stored transitions and for queries so both sides embed the same text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from dreamgym.types import Trajectory

__all__ = [
    "TRAJECTORY_ID_PREFIX",
    "PreparedTrajectory",
    "canonical_content_json",
    "content_hash",
    "prepare_trajectory",
    "retrieval_key",
    "trajectory_retrieval_keys",
]

TRAJECTORY_ID_PREFIX = "traj-"


def canonical_content_json(trajectory: Trajectory) -> str:
    """Canonical JSON of a trajectory's content (everything but ``trajectory_id``).

    Args:
        trajectory: a validated trajectory.

    Returns:
        Compact JSON with sorted keys; equal for trajectories that differ only in their id or in
        whether defaulted fields were sent explicitly.
    """
    content = trajectory.model_dump(mode="json", exclude={"trajectory_id"})
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(trajectory: Trajectory) -> str:
    """SHA-256 hex digest (64 characters) of :func:`canonical_content_json`."""
    return hashlib.sha256(canonical_content_json(trajectory).encode("utf-8")).hexdigest()


def retrieval_key(task: str, observation: str, action: str) -> str:
    """The text embedded as φ(s_t, a_t) for a transition or a query (arXiv 2511.03773, Eq. 4).

    The action comes first: sentence encoders truncate long inputs (all-MiniLM-L6-v2 at 256 word
    pieces), and a long observation must not push the action — half of the key — out of it.

    Args:
        task: task instruction τ.
        observation: abstract observation of s_t.
        action: action a_t.

    Returns:
        ``"Action: <a>\\nObservation: <o>\\nTask: <τ>"`` with surrounding whitespace stripped
        from each part.
    """
    return f"Action: {action.strip()}\nObservation: {observation.strip()}\nTask: {task.strip()}"


def trajectory_retrieval_keys(trajectory: Trajectory) -> list[str]:
    """Retrieval keys of every transition of ``trajectory``, in step order (length S)."""
    return [retrieval_key(trajectory.task, t.observation, t.action) for t in trajectory.transitions]


@dataclass(frozen=True)
class PreparedTrajectory:
    """A trajectory with its idempotency keys resolved.

    Attributes:
        trajectory_id: the id it is stored under (client-given or content-derived).
        content_hash: SHA-256 of its canonical content.
        trajectory: the trajectory, with ``trajectory_id`` set.
    """

    trajectory_id: str
    content_hash: str
    trajectory: Trajectory


def prepare_trajectory(trajectory: Trajectory) -> PreparedTrajectory:
    """Resolve the content hash and id of ``trajectory``.

    Returns:
        A :class:`PreparedTrajectory` whose ``trajectory.trajectory_id`` is the resolved id.
    """
    digest = content_hash(trajectory)
    trajectory_id = trajectory.trajectory_id or f"{TRAJECTORY_ID_PREFIX}{digest}"
    return PreparedTrajectory(
        trajectory_id=trajectory_id,
        content_hash=digest,
        trajectory=trajectory.model_copy(update={"trajectory_id": trajectory_id}),
    )
