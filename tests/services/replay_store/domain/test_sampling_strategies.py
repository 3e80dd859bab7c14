"""Prioritized and recency sampling (pure): hand-computed probabilities and seeded statistics;
retention counts; idempotency fingerprints."""

from __future__ import annotations

import numpy as np
import pytest

from replay_store.domain.idempotency import request_fingerprint, validate_key
from replay_store.domain.retention import RetentionPolicy, eviction_count
from replay_store.domain.sampling import (
    prioritized_probabilities,
    recency_probabilities,
    weighted_sample_indices,
)


def test_prioritized_probabilities_hand_computed():
    # p = (1, 2, 3, 4), α = 1: p / 10
    assert prioritized_probabilities([1, 2, 3, 4], 1.0) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    # α = 2: (1, 4, 9, 16) / 30
    assert prioritized_probabilities([1, 2, 3, 4], 2.0) == pytest.approx(
        [1 / 30, 4 / 30, 9 / 30, 16 / 30]
    )
    # α = 0: uniform whatever the priorities
    assert prioritized_probabilities([0.5, 7.0], 0.0) == pytest.approx([0.5, 0.5])
    # α = 0.5: (1, 2) / 3 for p = (1, 4)
    assert prioritized_probabilities([1.0, 4.0], 0.5) == pytest.approx([1 / 3, 2 / 3])


def test_prioritized_probabilities_stay_finite_for_large_alpha():
    probs = prioritized_probabilities([1e3, 1e3, 1.0], 100.0)
    assert probs == pytest.approx([0.5, 0.5, 0.0])


@pytest.mark.parametrize("priorities", [[1.0, 0.0], [1.0, -2.0], [float("nan")]])
def test_prioritized_probabilities_reject_non_positive(priorities):
    with pytest.raises(ValueError, match="priorities"):
        prioritized_probabilities(priorities, 1.0)


def test_recency_probabilities_hand_computed():
    # N = 3, half-life 1: ages (2, 1, 0) → weights (1/4, 1/2, 1) → / 1.75
    assert recency_probabilities(3, 1.0) == pytest.approx([1 / 7, 2 / 7, 4 / 7])
    # half-life 2: weights (2^-1, 2^-0.5, 1)
    w = np.array([0.5, 2**-0.5, 1.0])
    assert recency_probabilities(3, 2.0) == pytest.approx(w / w.sum())
    assert recency_probabilities(0, 1.0).size == 0


def test_recency_probabilities_do_not_underflow_for_long_tables():
    probs = recency_probabilities(100_000, 1.0)
    assert probs[-1] == pytest.approx(0.5)
    assert np.isfinite(probs).all() and probs.sum() == pytest.approx(1.0)


def test_recency_rejects_bad_half_life():
    with pytest.raises(ValueError, match="half_life"):
        recency_probabilities(3, 0.0)


def test_weighted_sample_is_distinct_seeded_and_capped():
    probs = prioritized_probabilities([1, 2, 3, 4, 5], 1.0)
    first = weighted_sample_indices(probs, 3, seed=7)
    assert first == weighted_sample_indices(probs, 3, seed=7)
    assert len(set(first)) == 3
    assert sorted(weighted_sample_indices(probs, 50, seed=1)) == [0, 1, 2, 3, 4]
    assert weighted_sample_indices(np.array([]), 3, seed=1) == []


def test_first_draw_frequencies_match_probabilities():
    """Over 20 000 seeded draws, the first index is drawn with probability P(i) (chi-square)."""
    probs = prioritized_probabilities([1, 2, 3, 4], 1.0)
    draws = 20_000
    counts = np.bincount(
        [weighted_sample_indices(probs, 2, seed=s)[0] for s in range(draws)], minlength=4
    )
    expected = probs * draws
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 16.27  # chi-square, 3 degrees of freedom, p = 0.001


def test_recency_sampling_favours_new_items():
    probs = recency_probabilities(10, 2.0)
    firsts = np.bincount(
        [weighted_sample_indices(probs, 1, seed=s)[0] for s in range(5000)], minlength=10
    )
    assert firsts[9] > firsts[7] > firsts[5] > firsts[1]
    assert firsts[9] / 5000 == pytest.approx(probs[9], abs=0.03)


def test_eviction_count():
    assert eviction_count(stored=3, adding=2, max_trajectories=4) == 1
    assert eviction_count(stored=1, adding=2, max_trajectories=4) == 0
    assert eviction_count(stored=4, adding=4, max_trajectories=4) == 4
    with pytest.raises(ValueError, match="exceeds"):
        eviction_count(stored=0, adding=5, max_trajectories=4)


def test_retention_policy_validates():
    with pytest.raises(ValueError, match="policy"):
        RetentionPolicy(3, "lifo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_trajectories"):
        RetentionPolicy(0)


def test_fingerprint_ignores_key_order_but_not_values_or_path():
    a = request_fingerprint("POST", "/v1/x", {"a": 1, "b": [1, 2]})
    assert a == request_fingerprint("post", "/v1/x", {"b": [1, 2], "a": 1})
    assert a != request_fingerprint("POST", "/v1/x", {"a": 2, "b": [1, 2]})
    assert a != request_fingerprint("POST", "/v1/y", {"a": 1, "b": [1, 2]})


def test_validate_key():
    assert validate_key("abc-123") == "abc-123"
    for bad in ("", "has space", "x" * 256, "é"):
        with pytest.raises(Exception, match="Idempotency-Key"):
            validate_key(bad)
