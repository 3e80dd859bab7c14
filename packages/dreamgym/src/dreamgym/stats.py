"""Evaluation statistics: confidence intervals for success rates and mean rewards.

Used by evaluation and benchmark reports to say how sure a success rate is: with 50 episodes a
60 % success rate has a 95 % Wilson interval of about [46 %, 72 %].

Usage:
    >>> [round(x, 4) for x in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    >>> summarize_episodes([True, False, True, True], [1.0, 0.0, 1.0, 1.0])["success_rate"]
    0.75
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

import numpy as np
from scipy import stats as _scipy_stats

__all__ = [
    "EpisodeSummary",
    "intervals_overlap",
    "mean_confidence_interval",
    "summarize_episodes",
    "wilson_interval",
]


class EpisodeSummary(TypedDict):
    """Result of :func:`summarize_episodes`; plain floats and ints, JSON-serialisable."""

    episodes: int
    success_rate: float
    ci95_low: float
    ci95_high: float
    mean_reward: float
    mean_reward_ci95: tuple[float, float]


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial success rate.

    p̂ = s/n, z = Φ⁻¹(1 − (1 − confidence)/2)
    center = (p̂ + z²/(2n)) / (1 + z²/n)
    half   = z·sqrt(p̂(1 − p̂)/n + z²/(4n²)) / (1 + z²/n)
    interval = [center − half, center + half], clipped to [0, 1]

    Args:
        successes: s, number of successful episodes, 0 <= s <= n.
        n: number of episodes, >= 0.
        confidence: two-sided coverage in (0, 1).

    Returns:
        ``(low, high)`` floats in [0, 1]; low is exactly 0.0 for 0/n and high exactly 1.0 for
        n/n. ``n == 0`` gives ``(0.0, 1.0)`` (no information).

    Raises:
        ValueError: if n < 0, successes is outside [0, n], or confidence is outside (0, 1).

    Notes:
        Unlike the normal (Wald) interval it stays inside [0, 1] and does not collapse to a
        point at 0/n or n/n, which matters for the small evaluation sets we use.

    References:
        Wilson 1927, JASA 22(158); Brown, Cai & DasGupta 2001, "Interval Estimation for a
        Binomial Proportion", Statistical Science 16(2).
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    _check_confidence(confidence)
    if n == 0:
        return 0.0, 1.0
    z = float(_scipy_stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, center - half)  # exact bounds at 0/n and n/n
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def mean_confidence_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval for the mean of i.i.d. values.

    half = t_{(1 + confidence)/2, n−1} · s / sqrt(n), with s the sample std (ddof = 1).

    Args:
        values: n >= 1 finite numbers (e.g. episode returns).
        confidence: two-sided coverage in (0, 1).

    Returns:
        ``(mean, low, high)``. With n == 1, or when all values are equal, the interval is the
        point ``(mean, mean, mean)``: there is no spread to estimate.

    Raises:
        ValueError: if ``values`` is empty, not 1-D, or not finite, or confidence is outside
            (0, 1).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"values must be a non-empty finite 1-D sequence, got shape {x.shape}")
    _check_confidence(confidence)
    mean = float(x.mean())
    if x.size < 2:
        return mean, mean, mean
    t = float(_scipy_stats.t.ppf((1.0 + confidence) / 2.0, df=x.size - 1))
    half = t * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def summarize_episodes(successes: Sequence[bool], returns: Sequence[float]) -> EpisodeSummary:
    """Success rate with a 95 % Wilson interval and mean return with a 95 % t interval.

    Args:
        successes: one bool per episode.
        returns: one episode return (sum of rewards) per episode, same length.

    Returns:
        :class:`EpisodeSummary` with ``episodes``, ``success_rate``, ``ci95_low`` and
        ``ci95_high`` (Wilson), ``mean_reward`` and ``mean_reward_ci95`` ``(low, high)`` (t).

    Raises:
        ValueError: if the sequences are empty or of different lengths, or a return is not
            finite.
    """
    if len(successes) != len(returns) or len(successes) == 0:
        raise ValueError(
            f"need equally long, non-empty successes and returns, got {len(successes)} "
            f"and {len(returns)}"
        )
    n, wins = len(successes), sum(bool(s) for s in successes)
    low, high = wilson_interval(wins, n, confidence=0.95)
    mean, mean_low, mean_high = mean_confidence_interval(returns, confidence=0.95)
    return EpisodeSummary(
        episodes=n,
        success_rate=wins / n,
        ci95_low=low,
        ci95_high=high,
        mean_reward=mean,
        mean_reward_ci95=(mean_low, mean_high),
    )


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two closed intervals [low, high] share at least one point (touching counts).

    Args:
        a: ``(low, high)`` with low <= high.
        b: ``(low, high)`` with low <= high.

    Returns:
        True if a_low <= b_high and b_low <= a_high.

    Raises:
        ValueError: if an interval has low > high.

    Notes:
        Non-overlapping 95 % intervals imply a significant difference; overlapping ones do
        not imply the converse, so treat "overlap" as "not shown different".
    """
    for name, (low, high) in (("a", a), ("b", b)):
        if low > high:
            raise ValueError(f"interval {name} has low > high: {(low, high)}")
    return a[0] <= b[1] and b[0] <= a[1]
