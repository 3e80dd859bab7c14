"""The job configs the experiment runner submits per row, and how it assembles cells (no
services: the runner's pure parts)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from dreamgym.experiment import PRESETS
from dreamgym.experiment.runner import _Environment
from dreamgym.pipeline import judge_from_env


@pytest.fixture()
def column(tmp_path: Path) -> _Environment:
    env = _Environment(PRESETS["small"], "twx-coin", tmp_path, stack=None, log=lambda m: None)  # type: ignore[arg-type]
    env.em_urls = {"main": "http://em", "no_replay": "http://em-no-replay"}
    return env


def test_real_rows_run_in_the_real_environment_with_budget_b(column):
    cfg = PRESETS["small"]

    for row, kind in (("real_grpo", "grpo"), ("real_ppo", "ppo")):
        got_kind, config = column._rl(row, seed=2)
        section = config[kind]
        assert got_kind == kind
        assert section["environment_mode"] == "real"
        assert section["real_step_budget"] == cfg.real_budget
        assert section["iterations"] == cfg.real_rl["iterations"]
        assert (section["curriculum_every"], section["push_synthetic"]) == (0, False)
        assert section["policy"] == {
            "model": cfg.policy_model,
            "init_seed": 2,
            "history_length": cfg.history_length,
            "device": "cpu",
        }
        assert section["seed"] == 2 and config["services"] == {}


def test_s2r_rows_get_at_most_a_tenth_of_the_budget(column):
    cfg = PRESETS["small"]

    for row in ("dreamgym_s2r", "dreamgym_ppo_s2r"):
        kind, config = column._rl(row, seed=0)
        assert config[kind]["real_step_budget"] == cfg.s2r_steps <= cfg.real_budget / 10
        assert config[kind]["environment_mode"] == "real"


def test_imagined_rows_use_their_own_task_pool_and_ablation_switches(column):
    _, dreamgym = column._rl("dreamgym", seed=1)
    _, no_curriculum = column._rl("no_curriculum", seed=1)
    _, no_replay = column._rl("no_replay", seed=1)
    kind, ppo = column._rl("dreamgym_ppo", seed=1)

    assert dreamgym["grpo"]["task_scope"] == "run"
    assert "environment_mode" not in dreamgym["grpo"] and dreamgym["services"] == {}
    assert dreamgym["grpo"]["curriculum_every"] == PRESETS["small"].rl["curriculum_every"] > 0
    assert no_curriculum["grpo"]["curriculum_every"] == 0
    assert no_replay["services"] == {"experience_model": "http://em-no-replay"}
    assert no_replay["grpo"]["push_synthetic"] is False
    assert kind == "ppo" and ppo["ppo"]["task_scope"] == "run"


def outcome(seed: int, wins: int, n: int = 6) -> dict:
    return {"seed": seed, "success_rate": wins / n, "episodes": n, "mean_reward": wins / n}


def test_cells_aggregate_complete_rows_and_keep_n_a_and_failure_reasons(column):
    for row in column.rows:
        column.outcomes[row] = [outcome(s, s) for s in PRESETS["small"].seeds]
    column.na["no_reasoning"] = "no traces"
    column.failed["real_ppo"] = "seed 1: boom"
    column.outcomes["no_curriculum"] = column.outcomes["no_curriculum"][:2]

    cells = column.cells()

    assert cells["dreamgym"]["status"] == "ok"
    assert cells["dreamgym"]["pooled"]["successes"] == 0 + 1 + 2
    assert cells["no_reasoning"] == {"status": "n/a", "reason": "no traces"}
    assert cells["real_ppo"] == {"status": "failed", "reason": "seed 1: boom"}
    assert cells["no_curriculum"]["status"] == "failed"  # a seed is missing


def test_aborted_column_fails_every_row_but_keeps_n_a(column):
    column.na["no_reasoning"] = "no traces"
    column.abort("environment setup failed: collect failed")

    cells = column.cells()

    assert cells["no_reasoning"]["status"] == "n/a"
    assert {c["status"] for k, c in cells.items() if k != "no_reasoning"} == {"failed"}


class FakeDriver:
    """Records the jobs ``prepare`` submits; every job succeeds with a canned result."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, dict]] = []
        self.urls = {"experience_model": "http://em", "replay_store": "http://rs"}
        self.urls["task_generator"] = "http://tg"
        self.em = SimpleNamespace(reload=lambda path: None)

    def job(self, name, kind, config):
        self.jobs.append((kind, config))
        return SimpleNamespace(result={"kind": kind}, record=SimpleNamespace(usage=None))

    def sft(self, name, config):
        return SimpleNamespace(result={"checkpoint": "/ckpt"}, record=SimpleNamespace(usage=None))


@pytest.mark.parametrize("judge", [None, {"base_url": "http://judge/v1", "model": "m"}])
def test_fidelity_job_carries_the_judge_only_when_given(tmp_path, judge):
    cfg = dataclasses.replace(PRESETS["small"], rows=("dreamgym",))
    column = _Environment(cfg, "twx-coin", tmp_path, None, lambda m: None, judge)  # type: ignore[arg-type]
    driver = FakeDriver()

    column.prepare(driver)  # type: ignore[arg-type]

    fidelity = dict(driver.jobs)["fidelity"]
    assert fidelity.get("judge") == judge
    assert ("judge" in fidelity) is (judge is not None)
    assert fidelity["episodes"] == cfg.fidelity_episodes


def test_judge_from_env_reads_url_model_and_optional_key():
    env = {"DREAMGYM_JUDGE_URL": " http://vllm:8000/v1 ", "DREAMGYM_JUDGE_MODEL": "gpt-4o"}

    assert judge_from_env({}) is None
    assert judge_from_env({"DREAMGYM_JUDGE_URL": ""}) is None
    assert judge_from_env(env) == {"base_url": "http://vllm:8000/v1", "model": "gpt-4o"}
    assert judge_from_env({**env, "DREAMGYM_JUDGE_API_KEY": "k"})["api_key"] == "k"


def test_judge_from_env_url_without_model_raises_naming_the_variable():
    with pytest.raises(ValueError, match="DREAMGYM_JUDGE_MODEL"):
        judge_from_env({"DREAMGYM_JUDGE_URL": "http://vllm:8000/v1"})
