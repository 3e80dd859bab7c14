"""``dreamgym export`` against a live replay store (real PostgreSQL), read back by ``datasets``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dreamgym.cli.main import app as cli
from dreamgym.clients import ReplayStoreClient
from dreamgym.export import SCHEMA_VERSION, TrajectoryRecord
from dreamgym.testing.live import serve_app

datasets = pytest.importorskip("datasets")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live_url(replay_settings: Any) -> Iterator[str]:
    """A live replay store on this module's database."""
    from replay_store.main import create_app

    with serve_app(create_app(replay_settings)) as url:
        yield url


@pytest.fixture()
def replay_url(live_url: str, make_trajectory: Callable[..., Any]) -> str:
    """The live store holding two real and one synthetic trajectory (ingest is idempotent)."""
    with ReplayStoreClient(live_url, max_retries=0) as client:
        client.ingest(
            [
                make_trajectory(task="find the coin", game_seed=1),
                make_trajectory(task="open the door", actions=("look",), won=False),
                make_trajectory(task="take the key", source="synthetic", policy="agent"),
            ]
        )
    return live_url


@pytest.mark.parametrize(("suffix", "loader"), [(".parquet", "parquet"), (".jsonl", "json")])
def test_export_writes_every_trajectory_loadable_by_datasets(
    replay_url: str, tmp_path: Path, suffix: str, loader: str
) -> None:
    out = tmp_path / f"all{suffix}"

    result = CliRunner().invoke(cli, ["export", str(out), "--replay-store-url", replay_url])
    rows = datasets.load_dataset(loader, data_files=str(out), cache_dir=str(tmp_path / "hf"))
    records = [TrajectoryRecord.model_validate(r) for r in rows["train"].to_list()]

    assert result.exit_code == 0, result.output
    assert "exported 3 trajectories" in result.output
    assert [r.task.instruction for r in records] == [
        "find the coin",
        "open the door",
        "take the key",
    ]
    assert {r.schema_version for r in records} == {SCHEMA_VERSION}
    assert [r.episode_return for r in records] == [1.0, 0.0, 1.0]
    assert records[1].turns[0].action == "look" and records[1].success is False
    assert all(r.timings.created_at is not None for r in records)


def test_export_filters_and_limits(replay_url: str, tmp_path: Path) -> None:
    synthetic, first = tmp_path / "synthetic.jsonl", tmp_path / "first.jsonl"

    runner = CliRunner()
    runner.invoke(
        cli, ["export", str(synthetic), "--replay-store-url", replay_url, "--source", "synthetic"]
    )
    runner.invoke(cli, ["export", str(first), "--replay-store-url", replay_url, "--limit", "1"])

    assert [
        TrajectoryRecord.model_validate_json(x).provenance.source
        for x in synthetic.read_text().splitlines()
    ] == ["synthetic"]
    assert len(first.read_text().splitlines()) == 1


def test_export_rejects_an_unknown_suffix(replay_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["export", str(tmp_path / "x.csv"), "--replay-store-url", replay_url]
    )

    assert result.exit_code == 2
    assert ".jsonl or .parquet" in result.output
