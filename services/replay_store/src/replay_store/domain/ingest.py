"""Ingest planning: deduplicate a batch and classify it against the store (pure functions).

Rules (idempotency by content):

- the same id with the same content is a duplicate; with different content it is a conflict (409);
- the same content under a different id is a duplicate of the stored trajectory (content hashes are
  unique), reported under the stored id;
- the same rules hold inside one batch, in request order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dreamgym.errors import InvalidRequestError
from dreamgym.types import Trajectory
from replay_store.domain.errors import TrajectoryConflictError
from replay_store.domain.keys import PreparedTrajectory, prepare_trajectory

__all__ = ["BatchPlan", "StorePlan", "plan_against_store", "plan_batch", "unstorable_field"]

_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class BatchPlan:
    """A batch without in-batch duplicates.

    Attributes:
        unique: distinct trajectories, in first-seen order.
        refs: for each input trajectory, the index into ``unique`` it resolves to.
        first_index: for each unique trajectory, its index in the request (for error messages).
    """

    unique: list[PreparedTrajectory]
    refs: list[int]
    first_index: list[int]


@dataclass(frozen=True)
class StorePlan:
    """What to write and which id each unique trajectory ends up stored under.

    Attributes:
        new: trajectories to insert.
        stored_ids: for each unique trajectory of the batch, its stored id.
    """

    new: list[PreparedTrajectory]
    stored_ids: list[str]


def unstorable_field(value: object, path: str) -> tuple[str, str] | None:
    """Find the first value a PostgreSQL row cannot hold faithfully.

    Args:
        value: a JSON-like value (``model_dump()`` output).
        path: dotted location of ``value``, e.g. ``"body.trajectories.3"``.

    Returns:
        ``(path, reason)`` of the first text with a NUL character, integer outside BIGINT, or
        non-finite float; ``None`` when everything is storable.
    """
    if isinstance(value, str):
        return (path, "text must not contain NUL (\\u0000) characters") if "\x00" in value else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not _BIGINT_MIN <= value <= _BIGINT_MAX:
        return path, "integer is outside the 64-bit range"
    if isinstance(value, float) and not math.isfinite(value):
        return path, "number must be finite"
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = unstorable_field(item, f"{path}.{key}")
        if found is not None:
            return found
    return None


def plan_batch(trajectories: Sequence[Trajectory]) -> BatchPlan:
    """Check storability, resolve ids and drop in-batch duplicates.

    Raises:
        InvalidRequestError: a value cannot be stored; ``param`` is its path
            (``body.trajectories.<i>...``).
        TrajectoryConflictError: one id appears twice with different content.
    """
    for i, trajectory in enumerate(trajectories):
        found = unstorable_field(trajectory.model_dump(), f"body.trajectories.{i}")
        if found is not None:
            raise InvalidRequestError(f"{found[0]}: {found[1]}", param=found[0])
    unique: list[PreparedTrajectory] = []
    refs: list[int] = []
    first_index: list[int] = []
    by_id: dict[str, int] = {}
    by_hash: dict[str, int] = {}
    for i, trajectory in enumerate(trajectories):
        prepared = prepare_trajectory(trajectory)
        j = by_id.get(prepared.trajectory_id)
        if j is not None and unique[j].content_hash != prepared.content_hash:
            raise TrajectoryConflictError(prepared.trajectory_id, index=i)
        if j is None:
            j = by_hash.get(prepared.content_hash)
        if j is None:
            j = len(unique)
            unique.append(prepared)
            first_index.append(i)
            by_id[prepared.trajectory_id] = j
            by_hash[prepared.content_hash] = j
        refs.append(j)
    return BatchPlan(unique=unique, refs=refs, first_index=first_index)


def plan_against_store(batch: BatchPlan, stored: Mapping[str, str]) -> StorePlan:
    """Split the unique trajectories into new ones and duplicates of stored ones.

    Args:
        batch: the output of :func:`plan_batch`.
        stored: ``trajectory_id → content_hash`` of stored rows matching any id or hash of the
            batch.

    Raises:
        TrajectoryConflictError: an id is stored with different content.
    """
    id_by_hash = {digest: tid for tid, digest in stored.items()}
    new: list[PreparedTrajectory] = []
    stored_ids: list[str] = []
    for prepared, index in zip(batch.unique, batch.first_index, strict=True):
        stored_hash = stored.get(prepared.trajectory_id)
        if stored_hash is not None and stored_hash != prepared.content_hash:
            raise TrajectoryConflictError(prepared.trajectory_id, index=index)
        if stored_hash is not None:
            stored_ids.append(prepared.trajectory_id)
        elif prepared.content_hash in id_by_hash:
            stored_ids.append(id_by_hash[prepared.content_hash])
        else:
            new.append(prepared)
            stored_ids.append(prepared.trajectory_id)
    return StorePlan(new=new, stored_ids=stored_ids)
