"""``dreamgym experiment``: option parsing into the experiment config (the run is replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import dreamgym.experiment.runner as runner_module
from dreamgym.cli.main import app


@pytest.fixture()
def captured(monkeypatch, tmp_path):
    seen: dict = {}

    def fake_run(cfg, out_dir, **kwargs):
        seen.update(cfg=cfg, out_dir=out_dir, **kwargs)
        md = Path(out_dir) / "experiment.md"
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text("# table\n")
        return {"json": Path(out_dir) / "experiment.json", "md": md, "plots": Path(out_dir)}

    monkeypatch.setattr(runner_module, "run_experiment", fake_run)
    return seen


def test_experiment_options_reach_the_config(captured, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "experiment",
            "--preset",
            "small",
            "--env",
            "twx-coin,twx-twc",
            "--env",
            "tw-cooking",
            "--seeds",
            "3,4,5",
            "--rows",
            "before_rl,dreamgym",
            "--out",
            str(tmp_path / "out"),
            "--job-backend",
            "local",
        ],
    )

    assert result.exit_code == 0, result.output
    cfg = captured["cfg"]
    assert cfg.environments == ("twx-coin", "twx-twc", "tw-cooking")
    assert cfg.seeds == (3, 4, 5) and cfg.rows == ("before_rl", "dreamgym")
    assert (captured["preset_name"], captured["job_backend"]) == ("small", "local")
    assert "# table" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "medium"], "unknown preset 'medium'"),
        (["--rows", "dreamgym_s2r"], "add dreamgym"),
    ],
)
def test_experiment_bad_options_are_usage_errors(captured, args, message):
    result = CliRunner().invoke(app, ["experiment", *args])

    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert captured == {}
