"""Offline seed-data collector (dreamgym.collect) on real environments."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from dreamgym.collect import (
    EpsilonGreedyPolicy,
    ExpertPolicy,
    RandomPolicy,
    collect,
    parse_policy,
    run_episode,
    summarize,
    trajectory_id,
)
from dreamgym.envs import TextWorldEnv, TWXEnv, seeds
from dreamgym.types import AbstractState, Trajectory


@pytest.fixture(scope="module")
def coin_env():
    with TWXEnv("coin") as env:
        yield env


@pytest.fixture(scope="module")
def twc_env():
    with TWXEnv("twc") as env:
        yield env


@pytest.fixture(scope="module")
def tw_coin_env(tmp_path_factory):
    # Same cache path as tests/dreamgym/envs/conftest.py, so games built there are reused.
    override = os.environ.get("DREAMGYM_TEST_TW_CACHE")
    cache = Path(override) if override else tmp_path_factory.getbasetemp() / "textworld-cache"
    with TextWorldEnv("coin_collector", cache_dir=cache) as env:
        yield env


@pytest.mark.envs
def test_run_episode_expert_returns_won_trajectory_with_provenance(coin_env):
    trajectory = run_episode(
        coin_env, ExpertPolicy(), 3, "train", random.Random(0), "expert", episode_index=2
    )

    assert trajectory.success and trajectory.episode_return == 1.0
    assert trajectory.transitions[-1].terminated and not trajectory.transitions[-1].truncated
    assert trajectory.task.startswith("Your task is to search the environment and find the coin")
    assert trajectory.provenance.model_dump() == {
        "environment": "twx-coin",
        "game_seed": 3,
        "split": "train",
        "policy": "expert",
        "source": "real",
        "policy_version": None,
    }
    assert trajectory.trajectory_id == trajectory_id("twx-coin", "train", 3, "expert", 2)


@pytest.mark.envs
def test_collect_trajectories_are_valid_and_round_trip_through_json(twc_env):
    trajectories = collect(twc_env, seeds("eval", 4), {"random": 1.0}, rng_seed=1, split="eval")

    for trajectory in trajectories:
        assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory
        assert trajectory.provenance.split == "eval"
        assert 1 <= len(trajectory.transitions) <= twc_env.max_steps
        for t in trajectory.transitions:
            assert t.action in t.admissible_actions


@pytest.mark.envs
def test_collect_recollection_gives_identical_ids_and_trajectories(twc_env):
    mix = {"expert": 1.0, "random": 1.0, "epsilon_greedy:0.3": 1.0}

    first = collect(twc_env, seeds("train", 6), mix, rng_seed=7)
    second = collect(twc_env, seeds("train", 6), mix, rng_seed=7)

    assert [t.trajectory_id for t in first] == [t.trajectory_id for t in second]
    assert first == second
    assert len({t.trajectory_id for t in first}) == len(first)


@pytest.mark.envs
def test_collect_policy_weights_allocate_exact_proportions(twc_env):
    trajectories = collect(twc_env, seeds("train", 10), {"expert": 0.3, "random": 0.7})

    stats = summarize(trajectories)
    assert stats["expert"]["episodes"] == 3 and stats["random"]["episodes"] == 7
    assert [t.provenance.game_seed for t in trajectories] == seeds("train", 10)
    assert stats["expert"]["success_rate"] == 1.0


@pytest.mark.envs
def test_collect_policy_specs_play_episodes_per_seed_with_distinct_ids(coin_env):
    specs = [("random", RandomPolicy(), 2), ("expert", ExpertPolicy(), 1)]

    trajectories = collect(coin_env, [5, 6], specs, rng_seed=0)

    keys = [(t.provenance.game_seed, t.provenance.policy) for t in trajectories]
    assert keys == [(5, "random"), (5, "random"), (5, "expert")] + [
        (6, "random"),
        (6, "random"),
        (6, "expert"),
    ]
    assert len({t.trajectory_id for t in trajectories}) == 6


@pytest.mark.envs
def test_collect_progress_callback_is_called_after_every_episode(coin_env):
    calls = []

    trajectories = collect(
        coin_env, [1, 2, 3], {"random": 1}, progress=lambda i, n, t: calls.append((i, n, t))
    )

    assert [(i, n) for i, n, _ in calls] == [(1, 3), (2, 3), (3, 3)]
    assert [t for _, _, t in calls] == trajectories


@pytest.mark.envs
def test_collect_transition_count_matches_real_steps_taken():
    with TWXEnv("coin", max_steps=10) as env:
        trajectories = collect(env, seeds("train", 5), {"random": 1})

        assert sum(len(t.transitions) for t in trajectories) == env.num_steps_total


@pytest.mark.envs
def test_epsilon_greedy_zero_equals_expert_on_textworld(tw_coin_env):
    expert = run_episode(tw_coin_env, ExpertPolicy(), 0, "train", random.Random(3), "expert")
    greedy = run_episode(
        tw_coin_env, EpsilonGreedyPolicy(0.0), 0, "train", random.Random(4), "epsilon_greedy:0"
    )

    assert [t.action for t in greedy.transitions] == [t.action for t in expert.transitions]
    assert greedy.success


@pytest.mark.envs
def test_epsilon_greedy_on_textworld_still_wins_after_random_detours(tw_coin_env):
    policy = EpsilonGreedyPolicy(0.3)

    trajectories = [
        run_episode(tw_coin_env, policy, 0, "train", random.Random(i), "epsilon_greedy:0.3", i)
        for i in range(5)
    ]

    assert all(t.success for t in trajectories)
    assert len({tuple(t.action for t in tr.transitions) for tr in trajectories}) > 1


@pytest.mark.envs
def test_expert_policy_without_plan_falls_back_to_a_random_admissible_action(coin_env):
    state, _ = coin_env.reset(0)
    plan = coin_env.expert_actions()
    coin_env.step(plan[0])
    wrong = next(a for a in state.admissible_actions if a.startswith("move") and a != plan[1])
    state = coin_env.step(wrong).state

    action = ExpertPolicy().act(state, coin_env, random.Random(0))

    assert coin_env.expert_actions() == []
    assert action in state.admissible_actions


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("expert", ExpertPolicy),
        ("random", RandomPolicy),
        ("epsilon_greedy:0.3", EpsilonGreedyPolicy),
    ],
)
def test_parse_policy_known_name_returns_policy(name, kind):
    assert isinstance(parse_policy(name), kind)


def test_parse_policy_epsilon_is_parsed():
    assert parse_policy("epsilon_greedy:0.25").epsilon == 0.25


@pytest.mark.parametrize(
    "name", ["greedy", "epsilon_greedy", "epsilon_greedy:abc", "epsilon_greedy:2"]
)
def test_parse_policy_invalid_name_raises_value_error(name):
    with pytest.raises(ValueError):
        parse_policy(name)


def test_random_policy_without_admissible_actions_raises_value_error():
    state = AbstractState(task="t", observation="o", admissible_actions=[], step=3)

    with pytest.raises(ValueError, match="no admissible actions"):
        RandomPolicy().act(state, None, random.Random(0))


@pytest.mark.parametrize(
    "mix", [{}, {"expert": -1.0, "random": 2.0}, {"expert": 0.0}, [("a", RandomPolicy(), -1)]]
)
def test_collect_invalid_policy_mix_raises_value_error(mix):
    with pytest.raises(ValueError):
        collect(None, [0, 1], mix)


def test_collect_duplicate_policy_names_raise_value_error():
    specs = [("random", RandomPolicy(), 1), ("random", ExpertPolicy(), 1)]

    with pytest.raises(ValueError, match="unique"):
        collect(None, [0], specs)


def test_trajectory_id_is_deterministic_and_distinguishes_keys():
    key = ("twx-coin", "train", 3, "expert", 0)

    assert trajectory_id(*key) == trajectory_id(*key)
    assert trajectory_id(*key) != trajectory_id("twx-coin", "eval", 3, "expert", 0)
    assert trajectory_id(*key) != trajectory_id("twx-coin", "train", 3, "expert", 1)
