"""Tests for dreamgym.stats: Wilson and Student-t intervals, episode summaries, overlap."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from dreamgym.stats import (
    intervals_overlap,
    mean_confidence_interval,
    summarize_episodes,
    wilson_interval,
)

FAST = settings(max_examples=100, deadline=None)


@st.composite
def binomial_counts(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=500))
    return draw(st.integers(min_value=0, max_value=n)), n


# --- wilson_interval --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "successes,n,expected",
    [
        (0, 10, (0.0, 0.2775)),
        (5, 10, (0.2366, 0.7634)),
        (10, 10, (0.7225, 1.0)),
        (30, 50, (0.4618, 0.7239)),
        (1, 1, (0.2065, 1.0)),
    ],
)
def test_wilson_interval_known_values(successes, n, expected):
    low, high = wilson_interval(successes, n)

    assert low == pytest.approx(expected[0], abs=5e-5)
    assert high == pytest.approx(expected[1], abs=5e-5)


def test_wilson_interval_bounds_are_exact_at_zero_and_all_successes():
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0


def test_wilson_interval_no_episodes_is_uninformative():
    assert wilson_interval(0, 0) == (0.0, 1.0)


@FAST
@given(binomial_counts())
def test_wilson_interval_contains_the_point_estimate_inside_unit_interval(counts):
    successes, n = counts

    low, high = wilson_interval(successes, n)

    assert 0.0 <= low <= successes / n <= high <= 1.0


@FAST
@given(binomial_counts())
def test_wilson_interval_is_symmetric_under_swapping_successes_and_failures(counts):
    successes, n = counts

    low, high = wilson_interval(successes, n)
    mirror_low, mirror_high = wilson_interval(n - successes, n)

    assert low == pytest.approx(1.0 - mirror_high, abs=1e-12)
    assert high == pytest.approx(1.0 - mirror_low, abs=1e-12)


@FAST
@given(binomial_counts())
def test_wilson_interval_widens_with_confidence(counts):
    successes, n = counts

    narrow = wilson_interval(successes, n, confidence=0.8)
    wide = wilson_interval(successes, n, confidence=0.99)

    assert wide[0] <= narrow[0] and narrow[1] <= wide[1]


@pytest.mark.parametrize(
    "successes,n,confidence",
    [(-1, 10, 0.95), (11, 10, 0.95), (0, -1, 0.95), (5, 10, 0.0), (5, 10, 1.0)],
)
def test_wilson_interval_bad_arguments_raise(successes, n, confidence):
    with pytest.raises(ValueError):
        wilson_interval(successes, n, confidence=confidence)


# --- mean_confidence_interval -----------------------------------------------------------------


def test_mean_confidence_interval_hand_values():
    # mean 2, sample std 1, t(0.975, df=2) = 4.302652729749464
    mean, low, high = mean_confidence_interval([1.0, 2.0, 3.0])

    half = 4.302652729749464 / math.sqrt(3)
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - half, 2.0 + half))


@FAST
@given(
    st.lists(st.floats(-1e3, 1e3, allow_subnormal=False), min_size=2, max_size=50),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_mean_confidence_interval_matches_scipy_t_interval(values, confidence):
    mean, low, high = mean_confidence_interval(values, confidence=confidence)

    sem = scipy_stats.sem(values)
    if sem == 0:
        assert low == high == mean
        return
    expected = scipy_stats.t.interval(confidence, df=len(values) - 1, loc=mean, scale=sem)
    assert (low, high) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_mean_confidence_interval_single_value_is_a_point():
    assert mean_confidence_interval([0.7]) == (0.7, 0.7, 0.7)


def test_mean_confidence_interval_constant_values_is_a_point():
    assert mean_confidence_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


@pytest.mark.parametrize("values", [[], [1.0, math.nan], [[1.0, 2.0]]])
def test_mean_confidence_interval_bad_values_raise(values):
    with pytest.raises(ValueError, match="values"):
        mean_confidence_interval(values)


# --- summarize_episodes -----------------------------------------------------------------------


def test_summarize_episodes_hand_values():
    summary = summarize_episodes([True, False, True, True], [1.0, 0.0, 1.0, 1.0])

    low, high = wilson_interval(3, 4)
    mean, mean_low, mean_high = mean_confidence_interval([1.0, 0.0, 1.0, 1.0])
    assert summary == {
        "episodes": 4,
        "success_rate": 0.75,
        "ci95_low": low,
        "ci95_high": high,
        "mean_reward": mean,
        "mean_reward_ci95": (mean_low, mean_high),
    }


def test_summarize_episodes_is_json_serialisable_plain_numbers():
    summary = summarize_episodes([True, False], [0.5, 0.25])

    json.dumps(summary)
    assert all(type(v) in (int, float, tuple) for v in summary.values())


@pytest.mark.parametrize("successes,returns", [([], []), ([True], [1.0, 0.0])])
def test_summarize_episodes_bad_lengths_raise(successes, returns):
    with pytest.raises(ValueError, match="successes and returns"):
        summarize_episodes(successes, returns)


# --- intervals_overlap ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ((0.1, 0.4), (0.3, 0.6), True),
        ((0.1, 0.2), (0.3, 0.6), False),
        ((0.1, 0.3), (0.3, 0.6), True),
        ((0.0, 1.0), (0.4, 0.5), True),
        ((0.5, 0.5), (0.5, 0.5), True),
    ],
)
def test_intervals_overlap_cases(a, b, expected):
    assert intervals_overlap(a, b) is expected
    assert intervals_overlap(b, a) is expected


def test_intervals_overlap_reversed_interval_raises():
    with pytest.raises(ValueError, match="low > high"):
        intervals_overlap((0.6, 0.3), (0.0, 1.0))
