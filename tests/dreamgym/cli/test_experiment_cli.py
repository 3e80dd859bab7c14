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


def test_experiment_passes_the_judge_from_the_environment(captured, monkeypatch, tmp_path):
    monkeypatch.setenv("DREAMGYM_JUDGE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("DREAMGYM_JUDGE_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv("DREAMGYM_JUDGE_API_KEY", "sk-judge")

    result = CliRunner().invoke(app, ["experiment", "--out", str(tmp_path / "out")])

    assert result.exit_code == 0, result.output
    assert captured["judge"] == {
        "base_url": "http://vllm:8000/v1",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "api_key": "sk-judge",
    }


def test_experiment_without_judge_variables_passes_no_judge(captured, monkeypatch, tmp_path):
    monkeypatch.delenv("DREAMGYM_JUDGE_URL", raising=False)

    result = CliRunner().invoke(app, ["experiment", "--out", str(tmp_path / "out")])

    assert result.exit_code == 0, result.output
    assert captured["judge"] is None


def test_experiment_judge_url_without_model_is_a_usage_error(captured, monkeypatch):
    monkeypatch.setenv("DREAMGYM_JUDGE_URL", "http://vllm:8000/v1")
    monkeypatch.delenv("DREAMGYM_JUDGE_MODEL", raising=False)

    result = CliRunner().invoke(app, ["experiment"])

    assert result.exit_code == 2
    assert "DREAMGYM_JUDGE_MODEL" in " ".join(result.output.split())
    assert captured == {}
