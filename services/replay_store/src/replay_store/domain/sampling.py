"""Uniform sampling without replacement over a table of N transitions (pure)."""

from __future__ import annotations

import numpy as np

__all__ = ["uniform_sample_indices"]


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
