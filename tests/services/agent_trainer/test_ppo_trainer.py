"""Tests of agent_trainer.ppo_trainer: turn-level GAE plumbing, learning, value head, checkpoints.

The policy is a real tiny causal LM; the environment, task generator and replay store are the
scripted doubles of ``factories``.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

import agent_trainer.ppo_trainer as ppo_module
from agent_trainer.config import PolicyConfig, PPOConfig
from agent_trainer.policy import Decision
from agent_trainer.policy_io import load_policy_model
from agent_trainer.ppo_trainer import PPOTrainer, bootstrap_decision, turn_level_gae
from agent_trainer.rollout import Rollout
from agent_trainer.value_head import VALUE_HEAD_FILE, ValueHead
from dreamgym.types import Transition

from .factories import (
    TINY,
    RecordingReplaySink,
    RecordingTaskSource,
    ScriptedPool,
    action_probabilities,
    make_state,
    make_task,
)

pytestmark = pytest.mark.model


def small_config(**overrides) -> PPOConfig:
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
        "policy": PolicyConfig(model=TINY, init_seed=0),
    }
    return PPOConfig(**(fields | overrides))


def make_trainer(make_policy, tmp_path, *, pool=None, config=None, policy=None, **kwargs):
    source = RecordingTaskSource([make_task(0), make_task(1)])
    sink = RecordingReplaySink()
    trainer = PPOTrainer(
        config or small_config(),
        policy=policy or make_policy(seed=0),
        pool=pool or ScriptedPool(),
        task_source=source,
        replay=sink,
        run_dir=tmp_path / "run-p",
        **kwargs,
    )
    return trainer, source, sink


def transition(step: int, reward: float, *, terminated: bool, truncated: bool = False):
    return Transition(
        step=step,
        observation=f"o{step}",
        admissible_actions=["a", "b"],
        action="a",
        next_observation=f"o{step + 1}",
        next_admissible_actions=["a", "b"],
        reward=reward,
        terminated=terminated,
        truncated=truncated,
    )


def played(*transitions: Transition, actions=("a", "b")) -> Rollout:
    return Rollout(
        task=make_task(0),
        group_index=0,
        state=make_state(actions, step=len(transitions)),
        transitions=list(transitions),
    )


# -- turn-level GAE ----------------------------------------------------------------------------


def test_turn_level_gae_hand_values_for_terminated_and_truncated_episodes():
    ended = played(transition(0, 0.0, terminated=False), transition(1, 1.0, terminated=True))
    cut = played(transition(0, 0.5, terminated=False, truncated=True))
    values = torch.tensor([0.2, 0.6, 0.1])  # V(s0), V(s1) of `ended`; V(s0) of `cut`
    # ended: δ1 = 1 − .6 = .4; δ0 = 0 + .9·.6 − .2 = .34; Â0 = .34 + .9·.5·.4 = .52
    # cut:   δ0 = .5 + .9·2 − .1 = 2.2 (bootstraps from V(s_T) = 2)

    advantages, returns = turn_level_gae(
        [ended, cut], values, torch.tensor([99.0, 2.0]), gamma=0.9, gae_lambda=0.5
    )

    torch.testing.assert_close(advantages, torch.tensor([0.52, 0.4, 2.2]))
    torch.testing.assert_close(returns, advantages + values)


def test_turn_level_gae_wrong_number_of_values_raises():
    with pytest.raises(ValueError, match=r"\(2,\)"):
        turn_level_gae(
            [played(transition(0, 1.0, terminated=False), transition(1, 0.0, terminated=True))],
            torch.zeros(3),
            torch.zeros(1),
            gamma=1.0,
            gae_lambda=1.0,
        )


def test_bootstrap_decision_only_for_episodes_cut_by_the_step_limit(policy):
    ended = played(transition(0, 1.0, terminated=True))
    cut = played(transition(0, 0.0, terminated=False, truncated=True))
    stuck = played(transition(0, 0.0, terminated=False), actions=())

    decision = bootstrap_decision(policy, cut)

    assert bootstrap_decision(policy, ended) is None
    assert bootstrap_decision(policy, stuck) is None
    assert decision.prompt_ids == policy.prompt_ids(cut.state, cut.history())
    assert decision.completion_ids == []


# -- the update uses the sampled tokens --------------------------------------------------------


@pytest.fixture()
def spy_ppo_loss(monkeypatch):
    """Every call of ppo_loss inside the trainer, with its arguments."""
    calls = []
    real = ppo_module.ppo_loss

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(ppo_module, "ppo_loss", spy)
    return calls


def test_ppo_batch_holds_the_sampled_decisions_of_valid_rollouts(make_policy, tmp_path):
    pool = ScriptedPool(episode_length=2, fail_handles=[1], fail_at_step=2)
    trainer, *_ = make_trainer(make_policy, tmp_path, pool=pool)
    rollouts = trainer.collect([make_task(0), make_task(1)])

    batch, stats = trainer.build_batch(rollouts)

    expected = [d for r in rollouts if r.valid for d in r.decisions]
    assert [id(d) for d in batch.decisions] == [id(d) for d in expected]  # the very objects
    assert batch.advantages.shape == batch.returns.shape == batch.old_values.shape == (14,)
    assert math.isfinite(stats["advantage/std"])
    torch.testing.assert_close(batch.advantages.mean(), torch.tensor(0.0), atol=1e-5, rtol=0)


def test_ppo_first_minibatch_ratio_is_one_on_the_sampled_ids(make_policy, tmp_path, spy_ppo_loss):
    trainer, *_ = make_trainer(make_policy, tmp_path, pool=ScriptedPool(episode_length=2))

    trainer.step()

    args, _ = spy_ppo_loss[0]
    log_probs, old_log_probs, _, _, mask = args[:5]
    assert bool(mask.any())
    torch.testing.assert_close(log_probs[mask].detach(), old_log_probs[mask], atol=1e-5, rtol=0)


# -- learning ----------------------------------------------------------------------------------


def test_ppo_step_rewarded_first_action_becomes_more_likely(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(group_size=8))
    state = make_task(0).initial_state()
    before = action_probabilities(trainer.policy, state)["take coin"]

    for _ in range(3):
        metrics = trainer.step()
        trainer.iteration += 1

    after = action_probabilities(trainer.policy, state)["take coin"]
    assert after > before + 0.15, (before, after)
    for key in ("loss/policy", "loss/value", "policy/entropy", "policy/grad_norm"):
        assert math.isfinite(metrics[key]), key


def test_ppo_update_value_loss_decreases_on_a_fixed_batch(make_policy, tmp_path):
    config = small_config(vf_coef=1.0, vf_clip=None, learning_rate=3e-3, group_size=8)
    trainer, *_ = make_trainer(make_policy, tmp_path, config=config)
    batch, _ = trainer.build_batch(trainer.collect([make_task(0), make_task(1)]))
    assert float(batch.returns.var()) > 0  # seeded: some rollouts won, some did not

    losses = [trainer.update(batch)["loss/value"] for _ in range(8)]

    # V(s) cannot see the action, so the best value loss is ½·Var(R | prompt), not 0
    by_prompt: dict[tuple[int, ...], list[float]] = {}
    for d, r in zip(batch.decisions, batch.returns.tolist(), strict=True):
        by_prompt.setdefault(tuple(d.prompt_ids), []).append(r)
    best = sum(
        0.5 * sum((r - sum(rs) / len(rs)) ** 2 for r in rs) for rs in by_prompt.values()
    ) / len(batch.decisions)
    assert losses[-1] - best < 0.3 * (losses[0] - best), (best, losses)


def test_ppo_step_with_kl_reference_logs_kl_and_keeps_reference_frozen(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(beta=0.1))
    reference = [p.detach().clone() for p in trainer.reference.parameters()]

    metrics = trainer.step()

    assert math.isfinite(metrics["policy/kl"])
    assert all(map(torch.equal, reference, trainer.reference.parameters()))


def test_ppo_step_updates_value_head_and_reports_curriculum_and_replay(make_policy, tmp_path):
    trainer, source, sink = make_trainer(make_policy, tmp_path)
    head = [p.detach().clone() for p in trainer.value_head.parameters()]

    metrics = trainer.step()

    assert not all(map(torch.equal, head, trainer.value_head.parameters()))
    assert [task_id for task_id, _, _ in source.reports] == ["twx-coin/train/0", "twx-coin/train/1"]
    assert len(sink.trajectories) == 8 and metrics["replay/pushed_trajectories"] == 8
    assert metrics["rollout/env_steps_total"] == 8


def test_ppo_step_all_rollouts_failed_skips_the_update(make_policy, tmp_path):
    # e.g. every rollout cut by a real-step budget: no turn to learn from, nothing crashes
    trainer, source, _ = make_trainer(
        make_policy, tmp_path, pool=ScriptedPool(fail_handles=range(8), fail_at_step=1)
    )
    weights = [p.detach().clone() for p in trainer.policy.model.parameters()]
    head = [p.detach().clone() for p in trainer.value_head.parameters()]

    metrics = trainer.step()

    assert metrics["rollout/valid_fraction"] == 0.0 and "loss/policy" not in metrics
    assert source.reports == []
    assert all(map(torch.equal, weights, trainer.policy.model.parameters()))
    assert all(map(torch.equal, head, trainer.value_head.parameters()))


def test_ppo_config_group_size_one_is_allowed():
    assert small_config(group_size=1).group_size == 1


# -- checkpoints -------------------------------------------------------------------------------


def test_ppo_checkpoint_roundtrip_includes_value_head(make_policy, tmp_path):
    first, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=1))
    first.train()
    path = (first.run_dir / "checkpoints" / "latest").resolve()
    model, tokenizer = load_policy_model(str(path))
    resumed, *_ = make_trainer(
        make_policy,
        tmp_path,
        config=small_config(iterations=2),
        policy=type(first.policy)(model, tokenizer),
    )

    resumed.load_checkpoint(path)

    assert (path / VALUE_HEAD_FILE).exists()
    assert resumed.iteration == 1
    for a, b in zip(first.value_head.parameters(), resumed.value_head.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert any(float(p.detach().abs().sum()) > 0 for p in resumed.value_head.parameters())
    for a, b in zip(
        first.policy.model.parameters(), resumed.policy.model.parameters(), strict=True
    ):
        torch.testing.assert_close(a, b)
    saved, loaded = first.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    decisions = [_decision(first.policy)]
    torch.testing.assert_close(
        first.state_values(decisions), resumed.state_values(decisions), atol=1e-6, rtol=0
    )


def test_ppo_train_writes_config_with_ppo_fields(make_policy, tmp_path):
    trainer, *_ = make_trainer(make_policy, tmp_path, config=small_config(iterations=1))

    trainer.train()

    saved = json.loads((trainer.run_dir / "config.json").read_text())
    assert (saved["gamma"], saved["gae_lambda"], saved["vf_clip"]) == (0.99, 0.95, 0.2)


def test_value_head_save_load_roundtrip(tmp_path):
    head = ValueHead(hidden_size=4)
    with torch.no_grad():
        head.linear.weight.copy_(torch.tensor([[1.0, -2.0, 0.5, 0.0]]))
        head.linear.bias.fill_(0.25)
    hidden = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)

    head.save(tmp_path)
    loaded = ValueHead.load(tmp_path)

    assert loaded(hidden).dtype == torch.float32
    torch.testing.assert_close(loaded(hidden), hidden.float() @ head.linear.weight[0] + 0.25)


def test_value_head_load_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match=VALUE_HEAD_FILE):
        ValueHead.load(tmp_path)


def _decision(policy) -> Decision:
    state = make_task(0).initial_state()
    return Decision(
        action="", prompt_ids=policy.prompt_ids(state, []), completion_ids=[], sampled_log_probs=[]
    )
