"""Trajectory export: JSONL and Parquet files with a versioned schema, loadable by ``datasets``.

One row per trajectory (schema ``dreamgym.trajectory/1``, :class:`TrajectoryRecord`)::

    schema_version  "dreamgym.trajectory/1"
    trajectory_id   str | null        replay-store id
    episode_id      str | null        experience-model episode id (imagined rollouts)
    task            {task_id, instruction, environment}
    turns           [{step, observation, admissible_actions, action, next_observation, reward,
                      terminated, truncated, won, reasoning,
                      prompt_token_ids, action_token_ids, action_logprobs, latency_ms}]
    rewards         [float]            r_1..r_T (= turns[*].reward)
    episode_return  float              sum of rewards
    length          int                T
    success         bool               the last turn is ``won``
    provenance      {environment, game_seed, split, policy, source, policy_version}
    timings         {created_at, exported_at, total_latency_ms}    UTC timestamps / ms

Token ids and log-probs are the policy's (prompt ids and the sampled action's ids and
per-token log-probs, nats), present when the producer had them (the trainer's rollouts) and
``null`` otherwise (trajectories read back from the replay store).

>>> with TrajectoryWriter("runs/export.parquet") as out:  # doctest: +SKIP
...     out.write(to_record(trajectory))
>>> datasets.load_dataset("parquet", data_files="runs/export.parquet")  # doctest: +SKIP

Parquet needs ``pyarrow`` (the ``export`` extra); the Arrow schema is :func:`arrow_schema`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dreamgym.types import Trajectory

if TYPE_CHECKING:
    import pyarrow as pa

    from dreamgym.clients.replay_store import ReplayStoreClient

__all__ = [
    "SCHEMA_VERSION",
    "ExportFormat",
    "TrajectoryRecord",
    "TrajectoryWriter",
    "TurnExtras",
    "arrow_schema",
    "export_from_replay_store",
    "format_of",
    "read_records",
    "to_record",
]

SCHEMA_VERSION = "dreamgym.trajectory/1"
ExportFormat = Literal["jsonl", "parquet"]


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


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a Parquet export (nullable where the record allows ``None``)."""
    import pyarrow as pa  # noqa: PLC0415

    strings, ints, floats = pa.list_(pa.string()), pa.list_(pa.int64()), pa.list_(pa.float64())
    turn = pa.struct(
        [
            ("prompt_token_ids", ints),
            ("action_token_ids", ints),
            ("action_logprobs", floats),
            ("latency_ms", pa.float64()),
            ("step", pa.int64()),
            ("observation", pa.string()),
            ("admissible_actions", strings),
            ("action", pa.string()),
            ("next_observation", pa.string()),
            ("reward", pa.float64()),
            ("terminated", pa.bool_()),
            ("truncated", pa.bool_()),
            ("won", pa.bool_()),
            ("reasoning", pa.string()),
        ]
    )
    task = pa.struct(
        [("task_id", pa.string()), ("instruction", pa.string()), ("environment", pa.string())]
    )
    provenance = pa.struct(
        [
            ("environment", pa.string()),
            ("game_seed", pa.int64()),
            ("split", pa.string()),
            ("policy", pa.string()),
            ("source", pa.string()),
            ("policy_version", pa.string()),
        ]
    )
    timings = pa.struct(
        [
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("exported_at", pa.timestamp("us", tz="UTC")),
            ("total_latency_ms", pa.float64()),
        ]
    )
    return pa.schema(
        [
            ("schema_version", pa.string()),
            ("trajectory_id", pa.string()),
            ("episode_id", pa.string()),
            ("task", task),
            ("turns", pa.list_(turn)),
            ("rewards", floats),
            ("episode_return", pa.float64()),
            ("length", pa.int64()),
            ("success", pa.bool_()),
            ("provenance", provenance),
            ("timings", timings),
        ],
        metadata={"dreamgym.schema_version": SCHEMA_VERSION},
    )


def format_of(path: Path | str, fmt: ExportFormat | None = None) -> ExportFormat:
    """The export format: ``fmt`` when given, else from the suffix (``.jsonl`` / ``.parquet``).

    Raises:
        ValueError: no format given and the suffix is neither.
    """
    if fmt is not None:
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise ValueError(f"cannot tell the format of '{path}': use a .jsonl or .parquet suffix")


class TrajectoryWriter:
    """Stream :class:`TrajectoryRecord` rows into a JSONL or Parquet file.

    Parquet rows are written in row groups of ``row_group_size``; the file is complete once the
    writer is closed (use it as a context manager).

    Args:
        path: output file (parent folders are created).
        fmt: ``"jsonl"`` or ``"parquet"`` (default: from the suffix).
        row_group_size: Parquet rows per row group.

    Attributes:
        count: rows written so far.
    """

    def __init__(
        self, path: Path | str, fmt: ExportFormat | None = None, *, row_group_size: int = 512
    ) -> None:
        self.path = Path(path)
        self.format = format_of(self.path, fmt)
        self.row_group_size = row_group_size
        self.count = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._rows: list[dict[str, Any]] = []
        self._parquet: Any = None
        self._jsonl = self.path.open("w", encoding="utf-8") if self.format == "jsonl" else None

    def write(self, record: TrajectoryRecord) -> None:
        """Append one row."""
        if self._jsonl is not None:
            row = record.model_dump(mode="json")
            self._jsonl.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            self._rows.append(record.model_dump())
            if len(self._rows) >= self.row_group_size:
                self._flush()
        self.count += 1

    def _flush(self) -> None:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        schema = arrow_schema()
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, schema)
        if self._rows:
            self._parquet.write_table(pa.Table.from_pylist(self._rows, schema=schema))
            self._rows = []

    def close(self) -> None:
        """Finish the file (a Parquet export with no rows still gets its schema)."""
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        elif self.format == "parquet":
            self._flush()
            if self._parquet is not None:
                self._parquet.close()
                self._parquet = None

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path | str, fmt: ExportFormat | None = None) -> Iterator[TrajectoryRecord]:
    """Read an export back as validated records (for checks and tools without ``datasets``).

    Raises:
        ValueError: a row of another ``schema_version``.
    """
    fmt = format_of(path, fmt)
    if fmt == "jsonl":
        with Path(path).open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield TrajectoryRecord.model_validate_json(line)
        return
    import pyarrow.parquet as pq  # noqa: PLC0415

    for row in pq.read_table(path).to_pylist():
        yield TrajectoryRecord.model_validate(row)


def export_from_replay_store(
    client: ReplayStoreClient,
    path: Path | str,
    fmt: ExportFormat | None = None,
    *,
    environment: str | None = None,
    source: Literal["real", "synthetic"] | None = None,
    policy: str | None = None,
    limit: int | None = None,
    page_size: int = 100,
) -> int:
    """Write the replay store's trajectories (oldest first, filtered) to ``path``.

    Returns:
        The number of trajectories written.
    """
    with TrajectoryWriter(path, fmt) as out:
        for summary in _summaries(client, environment, source, policy, limit, page_size):
            trajectory = client.get_trajectory(summary.trajectory_id)
            out.write(to_record(trajectory, created_at=summary.created_at))
        return out.count


def _summaries(
    client: ReplayStoreClient,
    environment: str | None,
    source: Literal["real", "synthetic"] | None,
    policy: str | None,
    limit: int | None,
    page_size: int,
) -> Iterable[Any]:
    offset = 0
    while limit is None or offset < limit:
        size = page_size if limit is None else min(page_size, limit - offset)
        page = client.list_trajectories(
            environment=environment, source=source, policy=policy, limit=size, offset=offset
        )
        yield from page.data
        offset += len(page.data)
        if not page.data or offset >= page.count:
            return
