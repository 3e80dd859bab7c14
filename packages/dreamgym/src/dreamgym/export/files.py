"""Export files: streaming JSONL / Parquet writers, a reader, and the replay-store export.

Parquet needs ``pyarrow`` (the ``export`` extra); its schema is :func:`arrow_schema`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dreamgym.export.records import SCHEMA_VERSION, TrajectoryRecord, to_record

if TYPE_CHECKING:
    import pyarrow as pa

    from dreamgym.clients.replay_store import ReplayStoreClient

__all__ = [
    "ExportFormat",
    "TrajectoryWriter",
    "arrow_schema",
    "export_from_replay_store",
    "format_of",
    "read_records",
]

ExportFormat = Literal["jsonl", "parquet"]


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
