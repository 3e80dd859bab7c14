"""Mixing real and synthetic demonstrations in retrieval (the co-evolving buffer, paper §2).

The replay buffer holds real transitions (seed data, real rollouts) and synthetic ones (imagined
rollouts pushed back by the trainer). With ``retrieval_source="mix"`` the experience model asks
for the top-k of each kind and keeps a fixed share of synthetic examples:
:func:`mix_retrieved` takes ``n_syn = round(k · f)`` synthetic and ``k − n_syn`` real examples,
fills a shortfall on one side from the other, and orders the result by similarity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["mix_retrieved", "synthetic_quota"]

T = TypeVar("T")


def synthetic_quota(k: int, synthetic_fraction: float) -> int:
    """n_syn = round(k · f) synthetic examples of k (round half to even, as Python's ``round``).

    Raises:
        ValueError: ``k < 0`` or ``f`` outside [0, 1].
    """
    if k < 0 or not 0.0 <= synthetic_fraction <= 1.0:
        raise ValueError(f"need k >= 0 and 0 <= fraction <= 1, got {k}, {synthetic_fraction}")
    return round(k * synthetic_fraction)


def mix_retrieved(
    real: Sequence[T],
    synthetic: Sequence[T],
    k: int,
    *,
    synthetic_fraction: float,
    score: Callable[[T], float],
) -> list[T]:
    """Up to k examples: a share ``synthetic_fraction`` synthetic, the rest real.

    Args:
        real: real neighbours of one query, most similar first.
        synthetic: synthetic neighbours of the same query, most similar first.
        k: examples wanted (>= 0).
        synthetic_fraction: f in [0, 1].
        score: similarity of an example (to order the merged list).

    Returns:
        ``min(k, len(real) + len(synthetic))`` examples, most similar first (ties: real first):
        the best ``n_syn = round(k·f)`` synthetic and best ``k − n_syn`` real ones, where a side
        with fewer examples than its share leaves its remainder to the other side.
    """
    n_syn = synthetic_quota(k, synthetic_fraction)
    take_syn = min(n_syn, len(synthetic))
    take_real = min(k - take_syn, len(real))
    take_syn = min(k - take_real, len(synthetic))  # real short too: fill from synthetic
    chosen = [(score(x), 0, i, x) for i, x in enumerate(real[:take_real])]
    chosen += [(score(x), 1, i, x) for i, x in enumerate(synthetic[:take_syn])]
    chosen.sort(key=lambda c: (-c[0], c[1], c[2]))
    return [c[3] for c in chosen]
