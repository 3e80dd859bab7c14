"""Tests of agent_trainer.trainer.GRPOTrainer with a scripted env pool and recording ports.

The policy is a real tiny causal LM (the trainer's learning is what is tested); the environment,
the task generator and the replay store are the scripted doubles of ``factories``.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

import agent_trainer.trainer as trainer_module
from agent_trainer.config import GRPOConfig
from agent_trainer.rollout import Rollout
from agent_trainer.trainer import GRPOTrainer, build_turn_batch
from dreamgym.llm.models import load_causal_lm

from .factories import (
    RecordingReplaySink,
    RecordingTaskSource,
    ScriptedPool,
    action_probabilities,
    make_task,
)

pytestmark = pytest.mark.model


def small_config(**overrides) -> GRPOConfig:
    fields = {
        "iterations": 2,
        "tasks_per_iteration": 2,
        "group_size": 4,
        "max_steps": 3,
        "learning_rate": 1e-2,
        "epochs_per_iteration": 1,
        "minibatch_size": 64,
        "beta": 0.0,
        "curriculum_every": 0,
        "checkpoint_every": 100,
        "seed": 0,
    }
    return GRPOConfig(**(fields | overrides))


def make_trainer(
    make_policy, tmp_path, *, pool=None, config=None, tasks=None, replay=True, **kwargs
):
    source = RecordingTaskSource(tasks or [make_task(0), make_task(1)])
    sink = RecordingReplaySink() if replay else None
    trainer = GRPOTrainer(
        config or small_config(),
        policy=make_policy(seed=0),
        pool=pool or ScriptedPool(),
        task_source=source,
        replay=sink,
        run_dir=tmp_path / "run-a",
        **kwargs,
    )
    return trainer, source, sink


@pytest.fixture()
def spy_batches(monkeypatch):
    """Every (rollouts, advantages, turn batch) the trainer builds."""
    seen = []

    def spy(rollouts, advantages):
        batch = build_turn_batch(rollouts, advantages)
        seen.append((rollouts, advantages, batch))
        return batch

    monkeypatch.setattr(trainer_module, "build_turn_batch", spy)
    return seen


def coin_probability(trainer, task) -> float:
    return action_probabilities(trainer.policy, task.initial_state())["take coin"]


# -- learning ----------------------------------------------------------------------------------


def test_grpo_step_rewarded_first_action_becomes_more_likely(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(group_size=8))
    task = make_task(0)
    before = coin_probability(trainer, task)

    for _ in range(3):
        metrics = trainer.step()
        trainer.iteration += 1

    after = coin_probability(trainer, task)
    assert after > before + 0.15, (before, after)  # seeded run: about 0.36 -> 0.66
    assert math.isfinite(metrics["loss/policy"]) and math.isfinite(metrics["policy/grad_norm"])


def test_grpo_step_metrics_are_finite_and_namespaced(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path)

    metrics = trainer.step()

    for key in (
        "rollout/episode_return",
        "rollout/success_rate",
        "rollout/valid_fraction",
        "advantage/std",
        "loss/policy",
        "loss/total",
        "policy/grad_norm",
        "time/rollout_s",
        "replay/pushed_trajectories",
        "rollout/env_steps_total",
    ):
        assert math.isfinite(metrics[key]), key
    assert metrics["iteration"] == 0
    assert metrics["rollout/valid_fraction"] == 1.0
    assert metrics["rollout/env_steps_total"] == 8  # 2 tasks x 4 rollouts x 1 step


def test_grpo_step_with_kl_reference_keeps_reference_frozen(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(beta=0.1))
    reference = [p.detach().clone() for p in trainer.reference.parameters()]

    metrics = trainer.step()

    assert math.isfinite(metrics["loss/total"])
    assert all(map(torch.equal, reference, trainer.reference.parameters()))
    assert not all(map(torch.equal, reference, trainer.policy.model.parameters()))


# -- DreamGym loop plumbing --------------------------------------------------------------------


def test_grpo_step_reports_each_tasks_group_rewards_with_policy_version(make_policy, tmp_path):
    pool = ScriptedPool()
    trainer, source, _ = make_trainer(make_policy, tmp_path, pool=pool)

    trainer.step()

    returns = [pool.episode_return(h) for h in range(8)]
    assert source.reports == [
        ("twx-coin/train/0", returns[:4], "run-a@0"),
        ("twx-coin/train/1", returns[4:], "run-a@0"),
    ]
    assert source.samples == [(2, 0)]


def test_grpo_step_pushes_synthetic_trajectories_with_policy_version(make_policy, tmp_path):
    trainer, _, sink = make_trainer(make_policy, tmp_path)
    trainer.step()
    trainer.iteration += 1

    metrics = trainer.step()

    assert [len(b) for b in sink.batches] == [8, 8]
    assert metrics["replay/pushed_trajectories"] == 8
    assert {t.provenance.source for t in sink.trajectories} == {"synthetic"}
    assert [t.provenance.policy_version for t in sink.trajectories] == ["run-a@0"] * 8 + [
        "run-a@1"
    ] * 8
    assert {t.provenance.environment for t in sink.trajectories} == {"twx-coin"}
    assert [t.task_id for t in sink.batches[0]] == ["twx-coin/train/0"] * 4 + [
        "twx-coin/train/1"
    ] * 4


@pytest.mark.parametrize("case", ["real_pool", "disabled", "no_sink"])
def test_grpo_step_does_not_push_real_disabled_or_sinkless(make_policy, tmp_path, case):
    trainer, _, sink = make_trainer(
        make_policy,
        tmp_path,
        pool=ScriptedPool(real=case == "real_pool"),
        config=small_config(push_synthetic=case != "disabled"),
        replay=case != "no_sink",
    )

    metrics = trainer.step()

    assert metrics["replay/pushed_trajectories"] == 0
    assert sink is None or sink.batches == []


def test_grpo_train_calls_curriculum_generate_every_curriculum_every_iterations(
    make_policy, tmp_path
):
    config = small_config(
        iterations=4, curriculum_every=2, curriculum_seed_tasks=3, curriculum_variations=2, seed=7
    )
    trainer, source, _ = make_trainer(make_policy, tmp_path, config=config)

    trainer.train()

    assert source.generations == [(3, 2, 7 + 1), (3, 2, 7 + 3)]
    rows = [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["curriculum/generated_tasks"] for r in rows] == [0, 3, 0, 3]


def test_grpo_train_curriculum_every_zero_never_generates(make_policy, tmp_path):
    trainer, source, _ = make_trainer(
        make_policy, tmp_path, config=small_config(iterations=2, curriculum_every=0)
    )

    trainer.train()

    assert source.generations == []


# -- failed rollouts ---------------------------------------------------------------------------


def test_grpo_step_failed_rollouts_are_masked_not_scored_zero(make_policy, tmp_path, spy_batches):
    pool = ScriptedPool(episode_length=2, fail_handles=[1, 6], fail_at_step=2)
    trainer, source, sink = make_trainer(make_policy, tmp_path, pool=pool)

    metrics = trainer.step()

    ((rollouts, advantages, batch),) = spy_batches
    failed = [i for i, r in enumerate(rollouts) if not r.valid]
    assert failed == [1, 6]
    assert all(len(rollouts[i].decisions) == 1 for i in failed)  # a turn was played first
    assert advantages[failed].tolist() == [0.0, 0.0]
    failed_ids = {id(d) for i in failed for d in rollouts[i].decisions}
    assert not failed_ids & {id(d) for d in batch.decisions}
    assert [len(rewards) for _, rewards, _ in source.reports] == [3, 3]
    assert source.reports[0][1] == [pool.episode_return(h) for h in (0, 2, 3)]
    assert len(sink.trajectories) == 6
    assert metrics["rollout/valid_fraction"] == 6 / 8


def test_grpo_step_failed_rollouts_do_not_change_valid_advantages(
    make_policy, tmp_path, spy_batches
):
    trainer, *_ = make_trainer(
        make_policy, tmp_path, pool=ScriptedPool(fail_handles=[0], fail_at_step=1)
    )

    trainer.step()

    ((rollouts, advantages, _),) = spy_batches
    group = torch.tensor([r.episode_return for r in rollouts[1:4]])
    valid_adv = advantages[1:4]
    assert group.std() > 0  # seeded: the valid members of group 0 disagree
    expected = (group - group.mean()) / group.std(correction=0)  # population std of valid ones
    torch.testing.assert_close(valid_adv, expected, atol=1e-4, rtol=1e-4)
    assert advantages[1:4].sum().abs() < 1e-5


def test_grpo_step_all_rollouts_failed_reports_nothing_and_skips_update(make_policy, tmp_path):
    pool = ScriptedPool(fail_handles=range(8), fail_at_step=1)
    trainer, source, sink = make_trainer(make_policy, tmp_path, pool=pool)
    weights = [p.detach().clone() for p in trainer.policy.model.parameters()]

    metrics = trainer.step()

    assert source.reports == []
    assert sink.batches == []
    assert metrics["rollout/valid_fraction"] == 0.0
    assert "loss/policy" not in metrics
    assert all(map(torch.equal, weights, trainer.policy.model.parameters()))


def test_build_turn_batch_keeps_valid_rollouts_with_nonzero_advantage(policy):
    task = make_task(0)
    decisions = policy.act([task.initial_state()] * 3, [[]] * 3)
    rollouts = [Rollout(task=task, group_index=i, decisions=[decisions[i]]) for i in range(3)]
    rollouts[2].error = "step failed"

    batch = build_turn_batch(rollouts, torch.tensor([0.5, 0.0, 1.0]))

    assert batch.decisions == [decisions[0]]
    assert batch.advantages == [0.5]


# -- checkpoints -------------------------------------------------------------------------------


def test_grpo_train_writes_config_metrics_and_checkpoints(make_policy, tmp_path):
    config = small_config(iterations=3, checkpoint_every=2)
    trainer, *_ = make_trainer(make_policy, tmp_path, config=config)

    trainer.train()

    run = trainer.run_dir
    assert json.loads((run / "config.json").read_text()) == json.loads(json.dumps(config.to_dict()))
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["iter-00002", "iter-00003", "latest"]
    assert (run / "checkpoints" / "latest").resolve() == run / "checkpoints" / "iter-00003"
    state = json.loads((run / "checkpoints" / "iter-00003" / "trainer_state.json").read_text())
    assert state == {"iteration": 3, "env_steps": 24, "real_steps": 0}  # imagined: 0 real


def test_grpo_checkpoint_weights_load_as_the_trained_policy(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=1))
    trainer.train()

    model, _ = load_causal_lm(str(trainer.run_dir / "checkpoints" / "latest"))

    for (name, a), b in zip(
        trainer.policy.model.state_dict().items(), model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)


def test_grpo_load_checkpoint_restores_iteration_optimizer_and_rng(make_policy, tmp_path):
    first, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=2))
    first.train()
    resumed, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=3))

    resumed.load_checkpoint((first.run_dir / "checkpoints" / "latest").resolve())

    assert (resumed.iteration, resumed.env_steps) == (2, first.env_steps)
    assert torch.equal(resumed.generator.get_state(), first.generator.get_state())
    saved, loaded = first.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    for key, state in saved["state"].items():
        for name, value in state.items():
            torch.testing.assert_close(loaded["state"][key][name], value)


def test_grpo_resumed_train_runs_only_the_remaining_iterations(make_policy, tmp_path):
    first, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=2))
    first.train()
    resumed, source, _ = make_trainer(make_policy, tmp_path, config=small_config(iterations=3))
    resumed.load_checkpoint((first.run_dir / "checkpoints" / "latest").resolve())

    resumed.train()

    assert resumed.iteration == 3
    assert len(source.samples) == 1
    rows = (first.run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == [0, 1, 2]


def test_grpo_train_should_stop_ends_before_next_iteration(make_policy, tmp_path):
    calls = []
    trainer, source, _ = make_trainer(
        make_policy,
        tmp_path,
        config=small_config(iterations=5),
        should_stop=lambda: len(calls) >= 2,
        on_metrics=lambda it, m: calls.append(it),
    )

    trainer.train()

    assert calls == [0, 1]
    assert trainer.iteration == 2
    assert (trainer.run_dir / "checkpoints" / "iter-00002").is_dir()


class LoopBoundPool(ScriptedPool):
    """Like an async HTTP client's connection pool: only usable on the loop that first used it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loop = None

    async def reset(self, task, *, seed, max_steps):
        import asyncio

        loop = asyncio.get_running_loop()
        self.loop = self.loop or loop
        if loop is not self.loop:
            raise RuntimeError("Event loop is closed")
        return await super().reset(task, seed=seed, max_steps=max_steps)


def test_async_clients_stay_usable_across_iterations(make_policy, tmp_path):
    pool = LoopBoundPool()
    trainer, *_ = make_trainer(make_policy, tmp_path, pool=pool)

    first = trainer.step()
    trainer.iteration += 1
    second = trainer.step()
    trainer.close()

    assert first["rollout/valid_fraction"] == second["rollout/valid_fraction"] == 1.0
    assert second["rollout/failed"] == 0
