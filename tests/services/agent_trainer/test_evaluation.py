"""Tests of agent_trainer.evaluation in the REAL TextWorldExpress Coin Collector."""

from __future__ import annotations

import pytest

from agent_trainer.evaluation import UniformRandomPolicy, eval_tasks, evaluate_policy
from dreamgym.envs.splits import EVAL_SEED_RANGE

from .factories import make_state


def evaluate_random(episodes: int = 20, seed: int = 0, **kwargs):
    return evaluate_policy(
        UniformRandomPolicy(seed),
        environment="twx-coin",
        episodes=episodes,
        max_steps=10,
        concurrency=2,
        **kwargs,
    )


@pytest.fixture(scope="module")
def random_result():
    return evaluate_random()


def test_eval_tasks_are_held_out_seeds_with_ids():
    tasks = eval_tasks("twx-coin", 3, first_seed_index=5)

    assert [t.task_id for t in tasks] == [f"twx-coin/eval/{1_000_005 + i}" for i in range(3)]
    assert [t.game_seed for t in tasks] == [1_000_005, 1_000_006, 1_000_007]
    assert {t.split for t in tasks} == {"eval"}
    assert {t.environment for t in tasks} == {"twx-coin"}


def test_uniform_random_policy_picks_admissible_actions_uniformly():
    policy = UniformRandomPolicy(seed=0)
    state = make_state(["a", "b", "c", "d"])

    decisions = policy.act([state] * 2000, [[]] * 2000)

    counts = {a: sum(d.action == a for d in decisions) for a in "abcd"}
    assert all(430 <= c <= 570 for c in counts.values()), counts


@pytest.mark.envs
def test_evaluate_policy_random_success_rate_lies_in_its_wilson_interval(random_result):
    assert random_result.episodes == 20
    assert 0.0 <= random_result.ci95_low <= random_result.success_rate <= random_result.ci95_high
    assert random_result.ci95_high - random_result.ci95_low < 0.6
    low, high = random_result.mean_reward_ci95
    assert low <= random_result.mean_reward <= high


@pytest.mark.envs
def test_evaluate_policy_real_steps_equal_sum_of_episode_lengths(random_result):
    assert random_result.real_steps == pytest.approx(random_result.mean_length * 20)
    assert 1 <= random_result.mean_length <= 10


@pytest.mark.envs
def test_evaluate_policy_plays_eval_split_seeds_identical_across_calls(random_result):
    again = evaluate_random(seed=1)

    assert random_result.game_seeds == again.game_seeds
    assert random_result.game_seeds == list(range(1_000_000, 1_000_020))
    assert all(s in EVAL_SEED_RANGE for s in again.game_seeds)


@pytest.mark.envs
def test_evaluate_policy_same_seed_reproduces_result(random_result):
    assert evaluate_random(seed=0).as_dict() == random_result.as_dict()


@pytest.mark.envs
def test_evaluate_policy_first_seed_index_shifts_the_games():
    result = evaluate_random(episodes=2, first_seed_index=30)

    assert result.game_seeds == [1_000_030, 1_000_031]


@pytest.mark.envs
@pytest.mark.model
def test_evaluate_policy_tiny_lm_policy_plays_every_episode(make_policy):
    result = evaluate_policy(
        make_policy(seed=0),
        environment="twx-coin",
        episodes=2,
        max_steps=3,
        greedy=True,
        concurrency=1,
    )

    assert result.episodes == 2
    assert result.real_steps == pytest.approx(result.mean_length * 2)
    assert 1 <= result.mean_length <= 3
    assert result.game_seeds == [1_000_000, 1_000_001]
