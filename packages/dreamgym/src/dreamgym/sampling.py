"""Length-grouped minibatches: less padding, same data.

Sequences of very different lengths in one padded batch waste compute on padding. The
"megabatch" scheme (as in Hugging Face's ``group_by_length``): shuffle, cut into megabatches of
``megabatch_factor × batch_size``, sort each megabatch by length, cut it into batches, and shuffle
the batch order. Every index appears exactly once per epoch; batches stay random across the epoch
while holding sequences of similar length.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["length_grouped_batches"]


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: random.Random, *, megabatch_factor: int = 8
) -> list[list[int]]:
    """Split ``range(len(lengths))`` into batches of similar-length items.

    Args:
        lengths: length of each item (tokens).
        batch_size: items per batch (the last batch may be smaller); >= 1.
        rng: source of randomness (the same seed gives the same batches).
        megabatch_factor: how many batches are sorted together (1 = plain shuffled batches).

    Returns:
        A list of batches (lists of indices); together they contain each index exactly once.

    Raises:
        ValueError: ``batch_size`` or ``megabatch_factor`` below 1.
    """
    if batch_size < 1 or megabatch_factor < 1:
        raise ValueError(
            f"batch_size and megabatch_factor must be >= 1, got {batch_size}, {megabatch_factor}"
        )
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = batch_size * megabatch_factor
    batches: list[list[int]] = []
    for start in range(0, len(order), mega):
        chunk = sorted(order[start : start + mega], key=lambda i: lengths[i], reverse=True)
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches
