"""Conversion between ORM rows and :mod:`dreamgym` wire types (ORM rows stay in adapters)."""

from __future__ import annotations

from typing import Any

from dreamgym.types import Provenance, Trajectory, Transition
from replay_store.adapters.orm import TrajectoryRow, TransitionRow
from replay_store.domain.keys import PreparedTrajectory

__all__ = ["record_fields", "to_trajectory", "trajectory_row", "transition_rows_of"]

_TRANSITION_FIELDS = tuple(Transition.model_fields)


def trajectory_row(prepared: PreparedTrajectory, team: str) -> dict[str, object]:
    """Column values of the ``trajectories`` row of ``prepared``, owned by ``team``."""
    trajectory = prepared.trajectory
    return {
        "team": team,
        "trajectory_id": prepared.trajectory_id,
        "content_hash": prepared.content_hash,
        "task": trajectory.task,
        "task_id": trajectory.task_id,
        **trajectory.provenance.model_dump(),
        "num_transitions": len(trajectory.transitions),
        "episode_return": trajectory.episode_return,
        "success": trajectory.success,
    }


def transition_rows_of(
    trajectory: Trajectory, trajectory_id: str, team: str
) -> list[dict[str, object]]:
    """Column values of the ``transitions`` rows of ``trajectory`` (without embeddings)."""
    provenance = trajectory.provenance
    shared = {
        "team": team,
        "trajectory_id": trajectory_id,
        "environment": provenance.environment,
        "source": provenance.source,
        "split": provenance.split,
        "policy": provenance.policy,
    }
    return [{**t.model_dump(), **shared} for t in trajectory.transitions]


def to_trajectory(row: TrajectoryRow) -> Trajectory:
    """The :class:`Trajectory` of a row whose transitions are loaded."""
    return Trajectory(
        trajectory_id=row.trajectory_id,
        task=row.task,
        task_id=row.task_id,
        transitions=[
            Transition(**{name: getattr(t, name) for name in _TRANSITION_FIELDS})
            for t in row.transitions
        ],
        provenance=Provenance.model_validate(row, from_attributes=True),
    )


def record_fields(row: TransitionRow, task: str) -> dict[str, Any]:
    """Fields of a :class:`~dreamgym.replay_types.TransitionRecord` for ``row``."""
    fields = {name: getattr(row, name) for name in _TRANSITION_FIELDS}
    fields.update(
        id=row.id,
        trajectory_id=row.trajectory_id,
        task=task,
        environment=row.environment,
        source=row.source,
        split=row.split,
        policy=row.policy,
    )
    return fields
