"""Real-environment RL (the real-env baseline and sim-to-real, paper §4.3) with a step budget.

The pool is :class:`RealEnvPool` over scripted adapters (budget semantics) and over the real
TextWorldExpress Coin Collector (the trainer end to end); the policy is a real tiny causal LM.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

import agent_trainer.jobs.training as training
from agent_trainer.config import ConfigValueError, GRPOConfig, PPOConfig
from agent_trainer.env_pools import RealEnvPool, RealStepBudgetExhausted
from agent_trainer.jobs import grpo
from agent_trainer.jobs.schemas import VALIDATORS
from agent_trainer.ppo_trainer import PPOTrainer
from agent_trainer.trainer import GRPOTrainer
from dreamgym.envs import make_env
from dreamgym.envs.accounting import real_steps_total
from dreamgym.envs.base import StepResult
from dreamgym.jobs import JobContext, JobRecord
from dreamgym.task_types import TaskListResponse

from .factories import TINY, RecordingReplaySink, RecordingTaskSource, make_state, make_task

# -- the budget of RealEnvPool (scripted adapters) -----------------------------------------------


class CountingEnv:
    """A scripted real adapter: episodes never end; ``step`` sleeps so steps overlap."""

    environment_id = "scripted"

    def __init__(self, fail_on: str | None = None) -> None:
        self.max_steps = 100
        self.steps = 0
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def reset(self, seed: int, split: str = "train"):
        return make_state(), {}

    def step(self, action: str) -> StepResult:
        time.sleep(0.01)
        if action == self.fail_on:
            raise RuntimeError("adapter failed")
        with self.lock:
            self.steps += 1
        return StepResult(make_state(), 0.0, False, False, False)

    def expert_actions(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


def _play(pool: RealEnvPool, episodes: int, steps: int, action: str = "take coin"):
    async def one(i: int):
        handle, _ = await pool.reset(make_task(i), seed=i, max_steps=steps)
        outcomes = []
        try:
            for _ in range(steps):
                try:
                    await pool.step(handle, action)
                    outcomes.append("ok")
                except RealStepBudgetExhausted:
                    outcomes.append("refused")
        finally:
            await pool.close(handle)
        return outcomes

    async def main():
        return await asyncio.gather(*(one(i) for i in range(episodes)))

    return asyncio.run(main())


def test_real_pool_concurrent_steps_never_exceed_the_budget():
    envs: list[CountingEnv] = []

    def factory() -> CountingEnv:
        envs.append(CountingEnv())
        return envs[-1]

    pool = RealEnvPool(factory, max_concurrency=4, step_budget=10)

    outcomes = _play(pool, episodes=4, steps=5)

    flat = [o for episode in outcomes for o in episode]
    assert flat.count("ok") == 10 and flat.count("refused") == 10
    assert pool.real_steps == 10 == sum(e.steps for e in envs)
    assert pool.refused_steps == 10 and pool.budget_exhausted


def test_real_pool_refuses_resets_once_the_budget_is_spent():
    pool = RealEnvPool(CountingEnv, max_concurrency=1, step_budget=2)
    _play(pool, episodes=1, steps=2)

    with pytest.raises(RealStepBudgetExhausted, match="budget of 2 real steps"):
        asyncio.run(pool.reset(make_task(1), seed=0, max_steps=3))


def test_real_pool_failed_step_releases_its_reservation():
    pool = RealEnvPool(lambda: CountingEnv(fail_on="boom"), max_concurrency=1, step_budget=2)

    async def main():
        handle, _ = await pool.reset(make_task(0), seed=0, max_steps=5)
        with pytest.raises(RuntimeError, match="adapter failed"):
            await pool.step(handle, "boom")
        await pool.step(handle, "a")
        await pool.step(handle, "b")
        return handle

    handle = asyncio.run(main())

    assert pool.real_steps == 2 == handle.steps


def test_real_pool_without_budget_is_never_exhausted():
    pool = RealEnvPool(CountingEnv, max_concurrency=2)

    _play(pool, episodes=2, steps=3)

    assert (pool.real_steps, pool.budget_exhausted) == (6, False)


# -- config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"real_step_budget": 10}, "real_step_budget"),
        ({"push_real": True}, "push_real"),
        ({"environment_mode": "real", "real_step_budget": 0}, "real_step_budget"),
        ({"environment_mode": "real", "real_env_concurrency": 0}, "real_env_concurrency"),
        ({"generated_task_fraction": 1.5}, "generated_task_fraction"),
    ],
)
@pytest.mark.parametrize("kind", [GRPOConfig, PPOConfig])
def test_real_mode_config_errors_name_the_field(kind, fields, param):
    with pytest.raises(ConfigValueError) as info:
        kind(**fields)

    assert info.value.fields[0] == param


def test_real_mode_job_config_error_is_located_under_the_section():
    with pytest.raises(Exception) as info:
        VALIDATORS["grpo"]({"grpo": {"real_step_budget": 5}})

    assert info.value.errors()[0]["loc"][:2] == ("grpo", "real_step_budget")  # type: ignore[attr-defined]


# -- GRPO / PPO in the real TextWorldExpress game ------------------------------------------------


def real_config(kind=GRPOConfig, **overrides):
    fields = {
        "environment": "twx-coin",
        "environment_mode": "real",
        "real_step_budget": 23,
        "real_env_concurrency": 2,
        "iterations": 50,
        "tasks_per_iteration": 2,
        "group_size": 2,
        "max_steps": 10,
        "minibatch_size": 64,
        "beta": 0.0,
        "curriculum_every": 1,
        "checkpoint_every": 100,
        "seed": 0,
    }
    return kind(**(fields | overrides))


def twx_pool(config) -> RealEnvPool:
    return RealEnvPool(
        lambda: make_env("twx-coin", max_steps=config.max_steps),
        max_concurrency=config.real_env_concurrency,
        step_budget=config.real_step_budget,
    )


@pytest.mark.model
@pytest.mark.envs
@pytest.mark.parametrize("trainer_cls", [GRPOTrainer, PPOTrainer])
def test_real_mode_training_stops_exactly_at_the_budget(make_policy, tmp_path, trainer_cls):
    config = real_config(PPOConfig if trainer_cls is PPOTrainer else GRPOConfig)
    pool = twx_pool(config)
    sink = RecordingReplaySink()
    source = RecordingTaskSource([make_task(i) for i in range(4)])
    trainer = trainer_cls(
        config,
        policy=make_policy(seed=0),
        pool=pool,
        task_source=source,
        replay=sink,
        run_dir=tmp_path / "run",
    )
    before = real_steps_total()
    try:
        trainer.train()
    finally:
        pool.shutdown()

    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert pool.real_steps == 23 == real_steps_total() - before
    assert 1 <= trainer.iteration < config.iterations
    assert [r["real/env_steps_total"] for r in rows][-1] == 23
    assert [r["real/budget_exhausted"] for r in rows] == [False] * (len(rows) - 1) + [True]
    assert sink.batches == []  # real rollouts are never pushed as synthetic (push_real off)
    assert all(r["replay/pushed_trajectories"] == 0 for r in rows)


@pytest.mark.model
@pytest.mark.envs
def test_real_mode_push_real_ingests_real_trajectories(make_policy, tmp_path):
    config = real_config(real_step_budget=None, iterations=1, push_real=True)
    pool = twx_pool(config)
    sink = RecordingReplaySink()
    trainer = GRPOTrainer(
        config,
        policy=make_policy(seed=0),
        pool=pool,
        task_source=RecordingTaskSource([make_task(5), make_task(6)]),
        replay=sink,
        run_dir=tmp_path / "run",
    )
    try:
        metrics = trainer.step()
    finally:
        pool.shutdown()

    assert metrics["replay/pushed_real_trajectories"] == 4 == len(sink.trajectories)
    assert {t.provenance.source for t in sink.trajectories} == {"real"}
    assert {t.provenance.game_seed for t in sink.trajectories} == {5, 6}
    assert sum(len(t.transitions) for t in sink.trajectories) == pool.real_steps


# -- the grpo job body in real mode (task generator replaced, real game) ------------------------


class SeedTaskGenerator:
    """Lists four train seed tasks; records every curriculum call (real mode makes none)."""

    def __init__(self, *args, **kwargs) -> None:
        self.calls: list[str] = []
        SeedTaskGenerator.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def list_tasks(self, **kwargs):
        assert kwargs["origin"] == "seed" and kwargs["split"] == "train"
        tasks = [make_task(i) for i in range(4)]
        return TaskListResponse(data=tasks[kwargs["offset"] :], count=len(tasks))

    def sample(self, *args, **kwargs):
        self.calls.append("sample")
        raise AssertionError("real mode must not sample generated tasks")

    def report_outcomes(self, *args, **kwargs) -> None:
        self.calls.append("report")

    def generate(self, *args, **kwargs):
        self.calls.append("generate")
        raise AssertionError("real mode must not generate tasks")


class NoReplayStore(SeedTaskGenerator):
    def ingest(self, trajectories) -> None:
        raise AssertionError("nothing is pushed in real mode without push_real")


class NoExperienceModel:
    def __init__(self, *args, **kwargs) -> None:
        raise AssertionError("real mode must not open the experience model")


@pytest.mark.model
@pytest.mark.envs
def test_grpo_job_real_mode_reports_measured_steps_and_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(training, "TaskGeneratorClient", SeedTaskGenerator)
    monkeypatch.setattr(training, "ReplayStoreClient", NoReplayStore)
    monkeypatch.setattr(training, "AsyncExperienceModelClient", NoExperienceModel)
    section = {
        "environment_mode": "real",
        "real_step_budget": 17,
        "real_env_concurrency": 2,
        "iterations": 40,
        "tasks_per_iteration": 2,
        "group_size": 2,
        "max_steps": 10,
        "curriculum_every": 1,
        "checkpoint_every": 100,
        "policy": {"model": TINY, "init_seed": 0},
    }
    config = VALIDATORS["grpo"]({"grpo": section, "services": {"replay_store": "http://x"}})
    ctx = JobContext(tmp_path, "job-real")
    (ctx.workdir / "status.json").write_text(
        JobRecord(job_id="job-real", kind="grpo", config=config).model_dump_json()
    )

    result = grpo.run(config, ctx)

    assert result["environment_mode"] == "real"
    assert (result["real_env_steps"], result["real_step_budget"]) == (17, 17)
    assert result["real_env_steps_this_process"] == 17 and result["budget_exhausted"]
    assert result["imagined_env_steps"] == 0
    assert 1 <= result["iterations"] < 40
    assert SeedTaskGenerator.last.calls == []  # no curriculum in real mode
    assert result["initial_checkpoint"].endswith("iter-00000")
    state = json.loads((tmp_path / "job-real" / "run" / "checkpoints" / "latest" /
                        "trainer_state.json").read_text())  # fmt: skip
    assert state["real_steps"] == 17
