"""Tests of agent_trainer.rollout: multi-turn group rollouts in an env pool (scripted pool)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agent_trainer.rollout import Rollout, collect_rollouts, to_trajectory
from dreamgym.types import Trajectory

from .factories import ScriptedPool, make_task

pytestmark = pytest.mark.model


def collect(policy, pool, tasks, *, group_size=2, max_steps=3, seed=0):
    return asyncio.run(
        collect_rollouts(
            policy,
            pool,
            tasks,
            group_size=group_size,
            max_steps=max_steps,
            seed=seed,
            generator=torch.Generator().manual_seed(0),
        )
    )


class RaisingPolicy:
    def act(self, states, histories, **_):
        raise RuntimeError("policy crashed")


def test_collect_rollouts_order_is_group_contiguous(policy):
    tasks = [make_task(0), make_task(1), make_task(2)]

    rollouts = collect(policy, ScriptedPool(), tasks, group_size=2)

    assert [r.task.task_id for r in rollouts] == [t.task_id for t in tasks for _ in range(2)]
    assert [r.group_index for r in rollouts] == [0, 1] * 3


def test_collect_rollouts_episode_i_resets_with_seed_plus_i_and_max_steps(policy):
    pool = ScriptedPool(max_concurrency=4)

    collect(
        policy,
        pool,
        [make_task(0), make_task(1), make_task(2)],
        group_size=2,
        seed=100,
        max_steps=7,
    )

    assert [(e.task.task_id, e.seed, e.max_steps) for e in pool.episodes] == [
        (f"twx-coin/train/{i // 2}", 100 + i, 7) for i in range(6)
    ]


def test_collect_rollouts_waves_never_exceed_max_concurrency_and_close_all(policy):
    pool = ScriptedPool(max_concurrency=3, episode_length=2)

    rollouts = collect(policy, pool, [make_task(i) for i in range(3)], group_size=2)

    assert pool.max_live == 3
    assert sorted(pool.closed) == list(range(6))
    assert all(r.valid and len(r.transitions) == 2 for r in rollouts)


def test_collect_rollouts_failing_step_masks_that_rollout_and_closes_every_episode(policy):
    pool = ScriptedPool(episode_length=3, fail_handles=[1, 2], fail_at_step=2)

    rollouts = collect(policy, pool, [make_task(0), make_task(1)], group_size=2, max_steps=5)

    assert sorted(pool.closed) == [0, 1, 2, 3]
    assert [r.valid for r in rollouts] == [True, False, False, True]
    assert "step failed: RuntimeError: malformed" in rollouts[1].error
    assert [len(r.transitions) for r in rollouts] == [3, 1, 1, 3]
    assert [len(r.decisions) for r in rollouts] == [3, 1, 1, 3]


def test_collect_rollouts_failing_reset_masks_rollout_and_closes_the_others(policy):
    pool = ScriptedPool(fail_resets=[0])

    rollouts = collect(policy, pool, [make_task(0)], group_size=3)

    assert not rollouts[0].valid and rollouts[0].error.startswith("reset failed")
    assert rollouts[0].transitions == []
    assert [r.valid for r in rollouts[1:]] == [True, True]
    assert sorted(pool.closed) == [1, 2]


def test_collect_rollouts_policy_error_propagates_after_closing_every_episode():
    pool = ScriptedPool()

    with pytest.raises(RuntimeError, match="policy crashed"):
        collect(RaisingPolicy(), pool, [make_task(0), make_task(1)], group_size=2)

    assert sorted(pool.closed) == [0, 1, 2, 3]


def test_collect_rollouts_non_terminating_episode_truncates_at_max_steps(policy):
    pool = ScriptedPool(episode_length=0)

    rollouts = collect(policy, pool, [make_task(0)], group_size=2, max_steps=4)

    for r in rollouts:
        assert r.valid and r.done
        assert len(r.transitions) == 4
        assert [t.truncated for t in r.transitions] == [False, False, False, True]
        assert not any(t.terminated for t in r.transitions)
    assert all(len(e.actions) == 4 for e in pool.episodes)


def test_collect_rollouts_terminated_episode_stops_before_max_steps(policy):
    rollouts = collect(policy, ScriptedPool(episode_length=2), [make_task(0)], max_steps=5)

    assert [len(r.transitions) for r in rollouts] == [2, 2]
    assert all(r.transitions[-1].terminated and not r.transitions[-1].truncated for r in rollouts)


def test_collect_rollouts_state_without_actions_ends_episode(policy):
    task = make_task(0)
    pool = ScriptedPool(episode_length=0)
    original_step = pool.step

    async def step_to_dead_end(handle, action):
        out = await original_step(handle, action)
        return type(out)(
            state=out.state.model_copy(update={"admissible_actions": []}),
            reward=0.0,
            terminated=False,
            truncated=False,
            won=False,
            info={},
        )

    pool.step = step_to_dead_end

    rollouts = collect(policy, pool, [task], group_size=2, max_steps=5)

    assert [len(r.transitions) for r in rollouts] == [1, 1]
    assert all(r.valid and r.done for r in rollouts)


def test_collect_rollouts_transitions_record_the_decisions_and_history(policy):
    rollouts = collect(policy, ScriptedPool(episode_length=3), [make_task(0)], max_steps=5)

    for r in rollouts:
        assert [t.action for t in r.transitions] == [d.action for d in r.decisions]
        assert [t.step for t in r.transitions] == [0, 1, 2]
        assert r.history()[-1].action == r.transitions[-1].action
        assert r.episode_return == sum(t.reward for t in r.transitions)


def test_collect_rollouts_rewards_follow_the_pool(policy):
    pool = ScriptedPool()

    rollouts = collect(policy, pool, [make_task(0), make_task(1)], group_size=4)

    assert [r.episode_return for r in rollouts] == [pool.episode_return(i) for i in range(8)]
    assert [r.won for r in rollouts] == [r.decisions[0].action == "take coin" for r in rollouts]


# -- to_trajectory -----------------------------------------------------------------------------


def test_to_trajectory_valid_rollout_is_a_chained_synthetic_trajectory(policy):
    (rollout, _) = collect(policy, ScriptedPool(episode_length=3), [make_task(4)], max_steps=5)

    trajectory = to_trajectory(
        rollout, environment="twx-coin", source="synthetic", policy_version="run@3"
    )

    assert isinstance(trajectory, Trajectory)
    assert Trajectory.model_validate(trajectory.model_dump()) == trajectory
    assert trajectory.task_id == "twx-coin/train/4"
    assert trajectory.provenance.source == "synthetic"
    assert trajectory.provenance.policy_version == "run@3"
    assert trajectory.provenance.game_seed == 4
    assert trajectory.transitions == rollout.transitions


def test_to_trajectory_failed_or_empty_rollout_is_none():
    failed = Rollout(task=make_task(0), group_index=0, error="step failed")
    empty = Rollout(task=make_task(0), group_index=0)

    assert to_trajectory(failed, environment="e", source="synthetic", policy_version="v") is None
    assert to_trajectory(empty, environment="e", source="synthetic", policy_version="v") is None
