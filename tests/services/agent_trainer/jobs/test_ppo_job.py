"""Tests of the ``ppo`` job body (agent_trainer.jobs.ppo) with the service clients replaced.

The HTTP clients and the imagined pool are swapped for the scripted doubles of ``factories``;
the job's own wiring (config validation, policy, value head, checkpoints, resume) is real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import agent_trainer.jobs.training as training
from agent_trainer.jobs import JOB_KINDS, ppo
from agent_trainer.jobs.schemas import VALIDATORS
from agent_trainer.value_head import VALUE_HEAD_FILE, ValueHead
from dreamgym.jobs import JobContext, JobRecord

from ..factories import TINY, ScriptedPool, make_task

pytestmark = pytest.mark.model


class FakeExperienceModel:
    def __init__(self, *args, **kwargs) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class FakeTaskGenerator:
    def __init__(self, *args, **kwargs) -> None:
        self.reports: list[tuple] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def sample(self, batch_size, *, split, seed, environment):
        return [make_task(i % 2) for i in range(batch_size)]

    def report_outcomes(self, task_id, rewards, policy_version) -> None:
        self.reports.append((task_id, rewards, policy_version))


class FakeReplayStore(FakeTaskGenerator):
    def ingest(self, trajectories) -> None:
        self.reports.append(len(trajectories))


@pytest.fixture()
def fake_services(monkeypatch):
    monkeypatch.setattr(training, "AsyncExperienceModelClient", FakeExperienceModel)
    monkeypatch.setattr(training, "ImaginedEnvPool", lambda client, **_: ScriptedPool())
    monkeypatch.setattr(training, "TaskGeneratorClient", FakeTaskGenerator)
    monkeypatch.setattr(training, "ReplayStoreClient", FakeReplayStore)


def job_context(tmp_path, config) -> JobContext:
    ctx = JobContext(tmp_path, "job-ppo")
    record = JobRecord(job_id="job-ppo", kind="ppo", config=config)
    (ctx.workdir / "status.json").write_text(record.model_dump_json())
    return ctx


def job_config(iterations: int) -> dict:
    ppo_section = {
        "iterations": iterations,
        "tasks_per_iteration": 2,
        "group_size": 2,
        "max_steps": 2,
        "minibatch_size": 16,
        "curriculum_every": 0,
        "checkpoint_every": 1,
        "policy": {"model": TINY, "init_seed": 0},
    }
    return VALIDATORS["ppo"]({"ppo": ppo_section, "services": {"replay_store": "http://x"}})


def test_ppo_job_kind_is_registered():
    assert JOB_KINDS["ppo"] == "agent_trainer.jobs.ppo:run"


def test_ppo_job_trains_checkpoints_value_head_and_resumes(tmp_path, fake_services):
    first_config = job_config(iterations=2)
    result = ppo.run(first_config, job_context(tmp_path, first_config))
    final = result["final_checkpoint"]
    saved_head = ValueHead.load(final)

    config = job_config(iterations=3)
    resumed = ppo.run(config, job_context(tmp_path, config))

    assert (result["iterations"], result["real_env_steps"], result["resumed_from"]) == (2, 0, None)
    assert result["initial_checkpoint"].endswith("iter-00000")
    assert (tmp_path / "job-ppo" / "run" / "checkpoints" / "iter-00000" / VALUE_HEAD_FILE).exists()
    assert resumed["resumed_from"] == final and resumed["iterations"] == 3
    rows = [json.loads(x) for x in Path(result["metrics_file"]).read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert all("loss/value" in r for r in rows)
    assert any(float(p.detach().abs().sum()) > 0 for p in saved_head.parameters())


def test_ppo_job_starts_from_a_checkpoints_value_head(tmp_path, fake_services, monkeypatch):
    first_config = job_config(iterations=1)
    source = ppo.run(first_config, job_context(tmp_path / "a", first_config))["final_checkpoint"]
    seen = []
    real_trainer = ppo.PPOTrainer

    def spy(*args, **kwargs):
        trainer = real_trainer(*args, **kwargs)
        seen.append([p.detach().clone() for p in trainer.value_head.parameters()])
        return trainer

    monkeypatch.setattr(ppo, "PPOTrainer", spy)
    config = job_config(iterations=1)
    config["ppo"]["policy"]["model"] = source
    ppo.run(config, job_context(tmp_path / "b", config))

    for mine, saved in zip(seen[0], ValueHead.load(source).parameters(), strict=True):
        torch.testing.assert_close(mine, saved.detach())
