"""``dreamgym up``: the checkpoint option and a failed start (the stack itself is replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import dreamgym.stack.local as local_module
from dreamgym.cli.main import app


class FakeStack:
    instances: list[FakeStack] = []

    def __init__(self, config, fail: bool = False) -> None:
        self.config = config
        self.fail = fail
        self.stopped = False
        FakeStack.instances.append(self)

    def up(self, log=print):
        if self.fail:
            raise RuntimeError("experience_model exited with code 3; see logs/experience_model.log")
        return {"experience_model": "http://127.0.0.1:8001"}

    def down(self) -> None:
        self.stopped = True


@pytest.fixture()
def stacks(monkeypatch):
    FakeStack.instances = []
    monkeypatch.setattr(local_module, "LocalStack", FakeStack)
    return FakeStack.instances


def test_a_relative_checkpoint_path_is_served_as_an_absolute_one(stacks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "demo" / "experience_model").mkdir(parents=True)

    result = CliRunner().invoke(
        app, ["up", "--data-dir", "stack", "--experience-model-path", "runs/demo/experience_model"]
    )

    assert result.exit_code == 0, result.output
    expected = str((tmp_path / "runs" / "demo" / "experience_model").resolve())
    assert stacks[0].config.experience_model_path == expected
    assert stacks[0].config.task_generator_model_path == expected


def test_a_missing_checkpoint_folder_is_a_usage_error(stacks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(app, ["up", "--experience-model-path", "runs/nowhere"])

    assert result.exit_code == 2
    assert "no checkpoint folder" in result.output
    assert stacks == []


def test_a_failed_start_stops_what_started_and_exits_1_without_a_traceback(
    stacks, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local_module, "LocalStack", lambda config: FakeStack(config, fail=True))

    result = CliRunner().invoke(app, ["up", "--data-dir", str(Path("stack"))])

    assert result.exit_code == 1
    assert "stack did not start" in result.output and "exited with code 3" in result.output
    assert "Traceback" not in result.output
    assert stacks[0].stopped
