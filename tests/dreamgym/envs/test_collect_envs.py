"""Seed-data collection (dreamgym.collect) on the ALFWorld, ScienceWorld and WebShop adapters."""

from __future__ import annotations

import pytest

from dreamgym.collect import collect, summarize
from dreamgym.envs import WebShopEnv
from dreamgym.envs.accounting import real_steps_total
from dreamgym.envs.splits import seeds

from .fake_webshop import GOALS

POLICIES = {"expert": 1.0, "random": 1.0, "epsilon_greedy:0.3": 1.0}


def _check_collected(env, trajectories, before):
    stats = summarize(trajectories)
    transitions = sum(len(t.transitions) for t in trajectories)

    assert set(stats) == set(POLICIES)
    assert stats["expert"]["success_rate"] == 1.0
    assert real_steps_total() - before == transitions
    for trajectory in trajectories:
        assert trajectory.provenance.environment == env.environment_id
        assert trajectory.provenance.source == "real"
        assert 1 <= len(trajectory.transitions) <= env.max_steps
        for transition in trajectory.transitions[:-1]:
            assert transition.action in transition.admissible_actions or not (
                transition.admissible_actions
            )
    return stats


@pytest.mark.envs
def test_collect_alfworld_expert_random_epsilon_greedy(alfworld_env):
    env = alfworld_env("pick")
    before = real_steps_total()

    trajectories = collect(env, seeds("train", 3), POLICIES, rng_seed=0)

    _check_collected(env, trajectories, before)
    again = collect(env, seeds("train", 3), POLICIES, rng_seed=0)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in trajectories]


@pytest.mark.envs
def test_collect_scienceworld_expert_and_random(sw_env):
    env = sw_env("find-non-living-thing")
    before = real_steps_total()

    trajectories = collect(env, seeds("train", 3, start=1), POLICIES, rng_seed=1)

    _check_collected(env, trajectories, before)


def test_collect_webshop_rule_expert_random_epsilon_greedy(webshop_url):
    with WebShopEnv(webshop_url, num_goals=1500 + len(GOALS)) as env:
        before = real_steps_total()

        trajectories = collect(env, seeds("train", 3), POLICIES, rng_seed=2)

        stats = _check_collected(env, trajectories, before)
    assert stats["random"]["episodes"] == 1
