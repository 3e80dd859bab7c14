"""Tests for dreamgym.curriculum.scoring: task scores, top-k selection, λ-capped batch mixing."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dreamgym.curriculum.scoring import (
    reward_variance,
    sample_task_batch,
    select_top_k,
    success_balance,
)

FAST = settings(max_examples=60, deadline=None)

finite_rewards = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_subnormal=False)


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# --- reward_variance --------------------------------------------------------------------------


def test_reward_variance_hand_values_for_ragged_groups():
    scores = reward_variance([[1, 0, 1, 0], [1, 1], [], [0.5], [1, 0, 0, 0]])

    np.testing.assert_allclose(scores, [0.25, 0.0, 0.0, 0.0, 0.1875])


def test_reward_variance_ignores_nan_rollouts():
    scores = reward_variance(np.array([[1.0, np.nan, 0.0], [np.nan, np.nan, np.nan]]))

    np.testing.assert_allclose(scores, [0.25, 0.0])


def test_reward_variance_of_empty_batch_is_empty():
    scores = reward_variance([])

    assert scores.shape == (0,) and scores.dtype == np.float64


@FAST
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2), elements=finite_rewards))
def test_reward_variance_equals_np_var_for_full_groups(rewards):
    np.testing.assert_allclose(reward_variance(rewards), np.var(rewards, axis=1), atol=1e-9)


@FAST
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=16), max_size=8))
def test_reward_variance_of_binary_rewards_is_p_times_one_minus_p(groups):
    p = np.array([np.mean(g) for g in groups])

    np.testing.assert_allclose(reward_variance(groups), p * (1 - p), atol=1e-12)


def test_reward_variance_does_not_mutate_input():
    rewards = np.array([[1.0, np.nan], [0.0, 1.0]])
    before = rewards.copy()

    reward_variance(rewards)

    np.testing.assert_array_equal(rewards, before)


@pytest.mark.parametrize(
    "group_rewards,match",
    [
        (np.zeros(4), r"\(4,\)"),
        (np.zeros((2, 2, 2)), r"\(2, 2, 2\)"),
        ([[1.0, math.inf]], "infinite"),
        ([[[1.0], [0.0]]], r"group 0.*\(2, 1\)"),
    ],
)
def test_reward_variance_bad_input_raises(group_rewards, match):
    with pytest.raises(ValueError, match=match):
        reward_variance(group_rewards)


# --- success_balance --------------------------------------------------------------------------


def test_success_balance_hand_values():
    scores = success_balance([[1, 0], [1, 1], [0, 0, 0, 1], [], [0.5, np.nan]])

    np.testing.assert_allclose(scores, [1.0, 0.0, 0.5, 0.0, 1.0])


@FAST
@given(
    st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=12), min_size=2, max_size=8)
)
def test_success_balance_ranks_binary_tasks_like_reward_variance(groups):
    balance, variance = success_balance(groups), reward_variance(groups)

    for i in range(len(groups)):
        for j in range(len(groups)):
            if variance[i] > variance[j] + 1e-12:
                assert balance[i] > balance[j]


def test_success_balance_rewards_outside_unit_interval_raise():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        success_balance([[1.0, 2.0]])


# --- select_top_k -----------------------------------------------------------------------------


def test_select_top_k_orders_by_score_and_breaks_ties_by_index():
    indices = select_top_k(np.array([0.1, 0.25, 0.0, 0.25, 0.2]), 3)

    np.testing.assert_array_equal(indices, [1, 3, 4])
    assert indices.dtype == np.int64


def test_select_top_k_excludes_scores_at_or_below_min_score():
    indices = select_top_k([0.0, 0.3, 0.0, 0.1], 4)

    np.testing.assert_array_equal(indices, [1, 3])


def test_select_top_k_custom_min_score():
    indices = select_top_k([0.0, 0.3, 0.05, 0.1], 4, min_score=0.05)

    np.testing.assert_array_equal(indices, [1, 3])


@pytest.mark.parametrize("temperature", [None, 1.0])
def test_select_top_k_zero_k_or_no_eligible_gives_empty(temperature):
    rng = np.random.default_rng(0)

    assert select_top_k([0.2, 0.1], 0, rng=rng, temperature=temperature).size == 0
    assert select_top_k([0.0, 0.0], 2, rng=rng, temperature=temperature).size == 0


@FAST
@given(
    scores=st.lists(st.floats(0, 1), min_size=1, max_size=20),
    k=st.integers(0, 25),
    seed=st.integers(0, 2**32 - 1),
    temperature=st.sampled_from([None, 0.01, 1.0, 100.0]),
)
def test_select_top_k_returns_distinct_eligible_indices(scores, k, seed, temperature):
    rng = np.random.default_rng(seed)

    indices = select_top_k(scores, k, rng=rng, temperature=temperature)

    eligible = {i for i, s in enumerate(scores) if s > 0}
    assert len(indices) == min(k, len(eligible))
    assert len(set(indices.tolist())) == len(indices)
    assert set(indices.tolist()) <= eligible


def test_select_top_k_sampling_is_reproducible_with_the_same_seed():
    scores = np.linspace(0.01, 0.25, 10)

    first = select_top_k(scores, 4, rng=np.random.default_rng(7), temperature=0.1)
    second = select_top_k(scores, 4, rng=np.random.default_rng(7), temperature=0.1)

    np.testing.assert_array_equal(first, second)


def test_select_top_k_very_low_temperature_equals_top_k():
    scores = np.array([0.05, 0.2, 0.1, 0.25, 0.15])

    sampled = select_top_k(scores, 3, rng=np.random.default_rng(0), temperature=1e-6)

    np.testing.assert_array_equal(sampled, select_top_k(scores, 3))


def test_select_top_k_first_draw_follows_softmax_of_scores_over_temperature():
    scores = np.array([0.1, 0.2, 0.3])
    temperature = 0.1
    rng = np.random.default_rng(123)
    draws = 4000

    counts = Counter(
        int(select_top_k(scores, 1, rng=rng, temperature=temperature)[0]) for _ in range(draws)
    )

    expected = np.exp(scores / temperature) / np.exp(scores / temperature).sum()
    observed = np.array([counts[i] for i in range(3)]) / draws
    np.testing.assert_allclose(observed, expected, atol=0.03)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"scores": [[0.1]], "k": 1}, r"\(1, 1\)"),
        ({"scores": [0.1, math.nan], "k": 1}, "finite"),
        ({"scores": [0.1], "k": -1}, "k must be"),
        ({"scores": [0.1], "k": 1, "temperature": 1.0}, "rng"),
        (
            {"scores": [0.1], "k": 1, "temperature": 0.0, "rng": np.random.default_rng(0)},
            "temperature",
        ),
    ],
)
def test_select_top_k_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        select_top_k(**kwargs)


# --- sample_task_batch ------------------------------------------------------------------------


@FAST
@given(
    n_seed=st.integers(1, 12),
    n_generated=st.integers(0, 12),
    batch_size=st.integers(0, 40),
    fraction=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_sample_task_batch_never_exceeds_the_generated_cap(
    n_seed, n_generated, batch_size, fraction, seed
):
    seeds, generated = _ids("s", n_seed), _ids("g", n_generated)

    batch = sample_task_batch(
        seeds,
        generated,
        batch_size,
        max_generated_fraction=fraction,
        rng=np.random.default_rng(seed),
    )

    n_drawn_generated = sum(task in generated for task in batch)
    assert len(batch) == batch_size
    assert n_drawn_generated <= math.floor(fraction * batch_size)
    assert set(batch) <= set(seeds) | set(generated)


def test_sample_task_batch_fills_the_cap_from_generated_tasks():
    batch = sample_task_batch(
        _ids("s", 10), _ids("g", 10), 8, max_generated_fraction=0.3, rng=np.random.default_rng(0)
    )

    assert sum(task.startswith("g") for task in batch) == 2  # floor(0.3 · 8)


def test_sample_task_batch_draws_without_replacement_when_pools_are_large_enough():
    batch = sample_task_batch(
        _ids("s", 10), _ids("g", 10), 12, max_generated_fraction=0.5, rng=np.random.default_rng(1)
    )

    assert len(set(batch)) == 12


def test_sample_task_batch_small_pool_uses_every_task_then_repeats():
    batch = sample_task_batch(
        _ids("s", 3), [], 7, max_generated_fraction=0.5, rng=np.random.default_rng(2)
    )

    counts = Counter(batch)
    assert set(counts) == {"s0", "s1", "s2"} and sum(counts.values()) == 7


def test_sample_task_batch_without_generated_tasks_is_all_seed():
    batch = sample_task_batch(
        _ids("s", 5), [], 4, max_generated_fraction=1.0, rng=np.random.default_rng(3)
    )

    assert all(task.startswith("s") for task in batch)


def test_sample_task_batch_lambda_zero_is_all_seed():
    batch = sample_task_batch(
        _ids("s", 5), _ids("g", 5), 5, max_generated_fraction=0.0, rng=np.random.default_rng(4)
    )

    assert sorted(batch) == _ids("s", 5)


def test_sample_task_batch_lambda_one_needs_no_seed_tasks():
    batch = sample_task_batch(
        [], _ids("g", 2), 4, max_generated_fraction=1.0, rng=np.random.default_rng(5)
    )

    assert len(batch) == 4 and set(batch) == {"g0", "g1"}


def test_sample_task_batch_zero_weight_tasks_are_never_drawn():
    batch = sample_task_batch(
        _ids("s", 3),
        _ids("g", 3),
        30,
        max_generated_fraction=0.5,
        rng=np.random.default_rng(6),
        seed_weights=[1.0, 0.0, 2.0],
        generated_weights=[0.0, 0.0, 1.0],
    )

    assert set(batch) == {"s0", "s2", "g2"}


def test_sample_task_batch_all_zero_generated_weights_means_all_seed():
    batch = sample_task_batch(
        _ids("s", 4),
        _ids("g", 2),
        4,
        max_generated_fraction=0.5,
        rng=np.random.default_rng(7),
        generated_weights=[0.0, 0.0],
    )

    assert sorted(batch) == _ids("s", 4)


def test_sample_task_batch_is_reproducible_with_the_same_seed():
    def draw() -> list[str]:
        return sample_task_batch(
            _ids("s", 20),
            _ids("g", 20),
            10,
            max_generated_fraction=0.4,
            rng=np.random.default_rng(8),
        )

    assert draw() == draw()


def test_sample_task_batch_does_not_mutate_pools():
    seeds, generated = _ids("s", 3), _ids("g", 3)

    sample_task_batch(
        seeds, generated, 10, max_generated_fraction=0.5, rng=np.random.default_rng(9)
    )

    assert seeds == _ids("s", 3) and generated == _ids("g", 3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"max_generated_fraction": 1.5}, "λ"),
        ({"max_generated_fraction": -0.1}, "λ"),
        ({"max_generated_fraction": math.nan}, "λ"),
        ({"batch_size": -1}, "batch_size"),
        ({"seed_weights": [1.0]}, "seed_weights"),
        ({"generated_weights": [1.0, -1.0]}, "generated_weights"),
        ({"seed_task_ids": []}, "seed task"),
    ],
)
def test_sample_task_batch_bad_arguments_raise(kwargs, match):
    arguments = {
        "seed_task_ids": _ids("s", 2),
        "generated_task_ids": _ids("g", 2),
        "batch_size": 4,
        "max_generated_fraction": 0.5,
        "rng": np.random.default_rng(0),
    }

    with pytest.raises(ValueError, match=match):
        sample_task_batch(**(arguments | kwargs))
