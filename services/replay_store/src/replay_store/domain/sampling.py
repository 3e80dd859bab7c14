"""Sampling over a table of N transitions (pure): uniform, prioritized and recency-weighted.

Every strategy draws without replacement and reports, per drawn item, the probability P(i) that
one draw picks it (Reverb's ``SampleInfo.probability``): 1/N (uniform), p_i^α / Σ p_k^α
(prioritized), 2^(-age_i / half_life) / Σ_k 2^(-age_k / half_life) (recency).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "prioritized_probabilities",
    "recency_probabilities",
    "uniform_sample_indices",
    "weighted_sample_indices",
]


def uniform_sample_indices(table_size: int, n: int, seed: int | None = None) -> list[int]:
    """Draw ``min(n, table_size)`` distinct indices uniformly from ``range(table_size)``.

    Each draw picks uniformly among the indices not drawn yet, so index i is returned with
    probability min(n, N) / N; the first draw has probability 1 / N per index (Reverb's
    ``SampleInfo.probability`` for a uniform table).

    Args:
        table_size: N >= 0, the number of rows to sample from.
        n: requested sample size, >= 1.
        seed: seeds ``numpy.random.default_rng``; the same ``(table_size, n, seed)`` always gives
            the same indices in the same order. ``None`` draws fresh entropy.

    Returns:
        The indices in draw order (length ``min(n, table_size)``).

    Raises:
        ValueError: ``table_size < 0`` or ``n < 1``.
    """
    if table_size < 0:
        raise ValueError(f"table_size must be >= 0, got {table_size}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if table_size == 0:
        return []
    rng = np.random.default_rng(seed)
    drawn = rng.choice(table_size, size=min(n, table_size), replace=False)
    return [int(i) for i in drawn]


def prioritized_probabilities(priorities: Sequence[float], alpha: float) -> np.ndarray:
    """Prioritized-replay probabilities P(i) = p_i^α / Σ_k p_k^α (Schaul et al., 2016).

    Args:
        priorities: p_i > 0 per item (N items, N may be 0).
        alpha: α >= 0; 0 gives the uniform distribution, 1 probabilities proportional to p_i.

    Returns:
        (N,) float64 probabilities summing to 1 (empty for N = 0).

    Raises:
        ValueError: a priority is not finite and > 0, or ``alpha < 0``.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    p = np.asarray(priorities, dtype=np.float64)
    if p.size == 0:
        return p
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError("priorities must be finite and > 0")
    # log-space keeps p^α finite for large α; subtracting the max is exact after normalising
    logw = alpha * np.log(p)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def recency_probabilities(table_size: int, half_life: float) -> np.ndarray:
    """Recency-weighted probabilities over N items stored oldest first.

    Item i (0 = oldest, N - 1 = newest) has age rank a_i = N - 1 - i and weight
    w_i = 2^(-a_i / half_life): an item ``half_life`` insertions older than another is drawn half
    as often. P(i) = w_i / Σ_k w_k.

    Args:
        table_size: N >= 0.
        half_life: > 0, in items (age ranks).

    Returns:
        (N,) float64 probabilities summing to 1, increasing with i (empty for N = 0).

    Raises:
        ValueError: ``table_size < 0`` or ``half_life <= 0``.
    """
    if table_size < 0:
        raise ValueError(f"table_size must be >= 0, got {table_size}")
    if not half_life > 0:
        raise ValueError(f"half_life must be > 0, got {half_life}")
    ages = np.arange(table_size - 1, -1, -1, dtype=np.float64)
    w = np.exp2(-ages / half_life)  # the newest item has weight 1, so the sum never underflows
    return w / w.sum() if table_size else w


def weighted_sample_indices(
    probabilities: np.ndarray, n: int, seed: int | None = None
) -> list[int]:
    """Draw ``min(n, N)`` distinct indices, each draw proportional to ``probabilities``.

    Equivalent to drawing one index with probability P(i), removing it, renormalising and
    repeating (Efraimidis & Spirakis, 2006: the n largest keys log(u_i) / P(i)). The first
    draw returns i with probability exactly P(i), which is the ``probability`` reported per
    sampled item (Reverb's ``SampleInfo.probability``).

    Args:
        probabilities: (N,) non-negative, summing to 1.
        n: requested sample size, >= 1.
        seed: seeds ``numpy.random.default_rng`` (same inputs and seed → same indices and order).

    Returns:
        The indices in draw order.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    p = np.asarray(probabilities, dtype=np.float64)
    if p.size == 0:
        return []
    rng = np.random.default_rng(seed)
    u = rng.random(p.size)
    with np.errstate(divide="ignore"):
        keys = np.log(u) / p  # log u < 0: larger P(i) → key closer to 0; P(i) = 0 → -inf
    order = np.argsort(-keys, kind="stable")
    return [int(i) for i in order[: min(n, p.size)]]
