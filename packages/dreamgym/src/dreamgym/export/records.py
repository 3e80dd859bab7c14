"""Export records: the versioned row schema of one trajectory and how to build it.

See :mod:`dreamgym.export` for the schema; :func:`to_record` turns a
:class:`~dreamgym.types.Trajectory` (plus optional per-turn :class:`TurnExtras`) into a
:class:`TrajectoryRecord`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dreamgym.types import Trajectory

__all__ = [
    "SCHEMA_VERSION",
    "ProvenanceRecord",
    "TaskRecord",
    "TimingRecord",
    "TrajectoryRecord",
    "TurnExtras",
    "TurnRecord",
    "to_record",
]

SCHEMA_VERSION = "dreamgym.trajectory/1"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnExtras(_Record):
    """Per-turn data a trajectory does not carry (policy tokens, timing).

    Attributes:
        prompt_token_ids: the policy prompt's token ids.
        action_token_ids: the sampled action's token ids.
        action_logprobs: log-probability (nats) of each action token, same length as the ids.
        latency_ms: wall time of the experience-model step, ms.
    """

    prompt_token_ids: list[int] | None = None
    action_token_ids: list[int] | None = None
    action_logprobs: list[float] | None = None
    latency_ms: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _same_length(self) -> TurnExtras:
        ids, logprobs = self.action_token_ids, self.action_logprobs
        if ids is not None and logprobs is not None and len(ids) != len(logprobs):
            raise ValueError(
                f"action_logprobs has {len(logprobs)} values for {len(ids)} action_token_ids"
            )
        return self


class TurnRecord(TurnExtras):
    """One turn: the transition plus its :class:`TurnExtras`."""

    step: int = Field(ge=0)
    observation: str
    admissible_actions: list[str]
    action: str
    next_observation: str
    reward: float
    terminated: bool
    truncated: bool
    won: bool | None = None
    reasoning: str | None = None


class TaskRecord(_Record):
    """The task of a trajectory."""

    task_id: str | None = None
    instruction: str
    environment: str


class ProvenanceRecord(_Record):
    """Where a trajectory came from (:class:`dreamgym.types.Provenance`)."""

    environment: str
    game_seed: int | None = None
    split: str | None = None
    policy: str
    source: str
    policy_version: str | None = None


class TimingRecord(_Record):
    """When the trajectory was stored and exported, and its summed step latency (ms).

    Timestamps are UTC (ISO-8601 in JSONL, ``timestamp[us, UTC]`` in Parquet); a naive
    timestamp read back (``datasets``' JSON loader drops the zone) is taken as UTC.
    """

    created_at: datetime | None = None
    exported_at: datetime
    total_latency_ms: float | None = None

    @field_validator("created_at", "exported_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class TrajectoryRecord(_Record):
    """One exported trajectory (see the module docstring for the schema)."""

    schema_version: str = SCHEMA_VERSION
    trajectory_id: str | None = None
    episode_id: str | None = None
    task: TaskRecord
    turns: list[TurnRecord] = Field(min_length=1)
    rewards: list[float]
    episode_return: float
    length: int = Field(ge=1)
    success: bool
    provenance: ProvenanceRecord
    timings: TimingRecord

    @model_validator(mode="after")
    def _known_version(self) -> TrajectoryRecord:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {self.schema_version!r} is not {SCHEMA_VERSION!r}; "
                "export again with this DreamGym version"
            )
        return self


def to_record(
    trajectory: Trajectory,
    *,
    episode_id: str | None = None,
    turn_extras: Sequence[TurnExtras] | None = None,
    created_at: datetime | None = None,
    exported_at: datetime | None = None,
) -> TrajectoryRecord:
    """Build the export row of a trajectory.

    Args:
        trajectory: the trajectory (e.g. from the replay store or a rollout).
        episode_id: the experience-model episode it was played in, if imagined.
        turn_extras: one :class:`TurnExtras` per transition (tokens, log-probs, latency).
        created_at: when it was stored (the replay store's ``created_at``).
        exported_at: export time (default: now, UTC).

    Raises:
        ValueError: ``turn_extras`` does not have one entry per transition.
    """
    extras = (
        list(turn_extras)
        if turn_extras is not None
        else [TurnExtras()] * len(trajectory.transitions)
    )
    if len(extras) != len(trajectory.transitions):
        raise ValueError(
            f"turn_extras has {len(extras)} entries for {len(trajectory.transitions)} transitions"
        )
    turns = [
        TurnRecord(**t.model_dump(exclude={"next_admissible_actions"}), **x.model_dump())
        for t, x in zip(trajectory.transitions, extras, strict=True)
    ]
    latencies = [t.latency_ms for t in turns if t.latency_ms is not None]
    p = trajectory.provenance
    return TrajectoryRecord(
        trajectory_id=trajectory.trajectory_id,
        episode_id=episode_id,
        task=TaskRecord(
            task_id=trajectory.task_id, instruction=trajectory.task, environment=p.environment
        ),
        turns=turns,
        rewards=[t.reward for t in turns],
        episode_return=trajectory.episode_return,
        length=len(turns),
        success=trajectory.success,
        provenance=ProvenanceRecord(**p.model_dump()),
        timings=TimingRecord(
            created_at=created_at,
            exported_at=exported_at or datetime.now(UTC),
            total_latency_ms=sum(latencies) if latencies else None,
        ),
    )
