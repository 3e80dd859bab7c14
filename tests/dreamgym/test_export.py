"""Trajectory export: records, and JSONL / Parquet round trips through ``datasets``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from dreamgym.export import (
    SCHEMA_VERSION,
    TrajectoryRecord,
    TrajectoryWriter,
    TurnExtras,
    format_of,
    read_records,
    to_record,
)
from dreamgym.types import Trajectory

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")

EXPORTED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def make_trajectory(actions: tuple[str, ...] = ("go north", "take coin"), won: bool = True):
    observations = [f"Room {i}." for i in range(len(actions) + 1)]
    last = len(actions) - 1
    return Trajectory.model_validate(
        {
            "trajectory_id": f"traj-{len(actions)}-{won}",
            "task": "Find the coin.",
            "task_id": "twx-coin/train/3",
            "transitions": [
                {
                    "step": i,
                    "observation": observations[i],
                    "admissible_actions": [a, "look"],
                    "action": a,
                    "next_observation": observations[i + 1],
                    "reward": 1.0 if (i == last and won) else 0.0,
                    "terminated": i == last,
                    "won": won if i == last else None,
                    "reasoning": "because" if i == last else None,
                }
                for i, a in enumerate(actions)
            ],
            "provenance": {
                "environment": "twx-coin",
                "game_seed": 3,
                "split": "train",
                "policy": "agent",
                "source": "synthetic",
                "policy_version": "step-4",
            },
        }
    )


def with_tokens() -> TrajectoryRecord:
    extras = [
        TurnExtras(
            prompt_token_ids=[1, 2, 3],
            action_token_ids=[7, 8],
            action_logprobs=[-0.25, -1.5],
            latency_ms=12.5,
        ),
        TurnExtras(
            prompt_token_ids=[1, 2, 3, 4],
            action_token_ids=[9],
            action_logprobs=[-0.125],
            latency_ms=7.5,
        ),
    ]
    return to_record(
        make_trajectory(),
        episode_id="ep-1",
        turn_extras=extras,
        created_at=datetime(2026, 2, 1, tzinfo=UTC),
        exported_at=EXPORTED_AT,
    )


def without_tokens() -> TrajectoryRecord:
    return to_record(make_trajectory(("look", "look", "look"), won=False), exported_at=EXPORTED_AT)


def test_to_record_summarises_the_trajectory() -> None:
    record = with_tokens()

    assert record.schema_version == SCHEMA_VERSION
    assert record.rewards == [0.0, 1.0] and record.episode_return == 1.0
    assert record.length == 2 and record.success is True
    assert record.task.task_id == "twx-coin/train/3" and record.task.environment == "twx-coin"
    assert record.provenance.policy_version == "step-4"
    assert record.turns[1].action_logprobs == [-0.125] and record.turns[1].reasoning == "because"
    assert record.timings.total_latency_ms == 20.0
    assert record.timings.created_at == datetime(2026, 2, 1, tzinfo=UTC)


def test_to_record_without_extras_has_null_tokens() -> None:
    record = without_tokens()

    assert all(t.action_token_ids is None and t.action_logprobs is None for t in record.turns)
    assert record.timings.total_latency_ms is None and record.success is False


def test_to_record_rejects_extras_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="1 entries for 2 transitions"):
        to_record(make_trajectory(), turn_extras=[TurnExtras()])


def test_turn_extras_need_one_logprob_per_token() -> None:
    with pytest.raises(ValidationError, match="2 values for 1 action_token_ids"):
        TurnExtras(action_token_ids=[1], action_logprobs=[-1.0, -2.0])


@pytest.mark.parametrize(("loader", "suffix"), [("json", ".jsonl"), ("parquet", ".parquet")])
def test_export_round_trips_through_datasets(tmp_path: Path, loader: str, suffix: str) -> None:
    records = [with_tokens(), without_tokens()]
    path = tmp_path / f"export{suffix}"
    with TrajectoryWriter(path) as out:
        for record in records:
            out.write(record)

    ds = datasets.load_dataset(loader, data_files=str(path), cache_dir=str(tmp_path / "hf"))
    rows = ds["train"].to_list()

    assert out.count == 2 and ds["train"].num_rows == 2
    assert [TrajectoryRecord.model_validate(row) for row in rows] == records
    assert rows[0]["turns"][0]["action_token_ids"] == [7, 8]
    assert ds["train"][1]["episode_return"] == 0.0


def test_parquet_export_carries_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    with TrajectoryWriter(path, row_group_size=1) as out:
        out.write(with_tokens())
        out.write(without_tokens())

    metadata = pq.read_schema(path).metadata

    assert metadata[b"dreamgym.schema_version"] == SCHEMA_VERSION.encode()
    assert pq.ParquetFile(path).num_row_groups == 2
    assert list(read_records(path)) == [with_tokens(), without_tokens()]


def test_empty_parquet_export_is_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    TrajectoryWriter(path).close()

    assert pq.read_table(path).num_rows == 0


def test_read_records_refuses_another_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(
        with_tokens()
        .model_copy(update={"schema_version": "dreamgym.trajectory/0"})
        .model_dump_json()
        + "\n"
    )

    with pytest.raises(ValidationError, match="schema_version"):
        list(read_records(path))


@pytest.mark.parametrize(
    ("path", "fmt", "expected"),
    [("a.jsonl", None, "jsonl"), ("a.parquet", None, "parquet"), ("a.bin", "parquet", "parquet")],
)
def test_format_of(path: str, fmt: str | None, expected: str) -> None:
    assert format_of(path, fmt) == expected


def test_format_of_unknown_suffix() -> None:
    with pytest.raises(ValueError, match=".jsonl or .parquet"):
        format_of("a.csv")
