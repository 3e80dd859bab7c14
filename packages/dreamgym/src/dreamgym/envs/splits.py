"""Deterministic, disjoint train / held-out (eval) game seeds.

DreamGym trains on real seed tasks and reports success on held-out real games (arXiv 2511.03773
§5), so the two seed sets must never overlap. Seeds are plain integers:

- ``train`` seeds lie in ``[0, 1_000_000)``;
- ``eval`` seeds lie in ``[1_000_000, 2_000_000)``.

The adapters separate the splits further: TextWorldExpress plays its ``test`` game fold for
``split="eval"`` (other objects and recipes than the ``train`` fold), and TextWorld generates eval
games from an offset seed and, for Cooking, TextWorld's ``test`` food split.

>>> seeds("train", 3)
[0, 1, 2]
>>> seeds("eval", 2, start=10)
[1000010, 1000011]
"""

from __future__ import annotations

from collections.abc import Iterable

from dreamgym.types import Split

__all__ = [
    "EVAL_SEED_RANGE",
    "SPLIT_SIZE",
    "TRAIN_SEED_RANGE",
    "assert_disjoint",
    "seeds",
    "split_of",
]

SPLIT_SIZE = 1_000_000
TRAIN_SEED_RANGE = range(0, SPLIT_SIZE)
EVAL_SEED_RANGE = range(SPLIT_SIZE, 2 * SPLIT_SIZE)
_RANGES: dict[str, range] = {"train": TRAIN_SEED_RANGE, "eval": EVAL_SEED_RANGE}


def seeds(split: Split, n: int, start: int = 0) -> list[int]:
    """The ``n`` consecutive seeds of ``split`` beginning at offset ``start``.

    Args:
        split: ``"train"`` or ``"eval"``.
        n: number of seeds (>= 0).
        start: offset inside the split's range (>= 0), so batches ``seeds(s, 100, 0)``,
            ``seeds(s, 100, 100)``, ... never repeat a seed.

    Returns:
        ``[base + start, ..., base + start + n - 1]`` with ``base`` 0 (train) or 1_000_000 (eval).

    Raises:
        ValueError: unknown split, negative ``n``/``start``, or the seeds would leave the range.
    """
    if split not in _RANGES:
        raise ValueError(f"split must be one of {sorted(_RANGES)}, got {split!r}")
    if n < 0 or start < 0:
        raise ValueError(f"n and start must be >= 0, got n={n}, start={start}")
    if start + n > SPLIT_SIZE:
        raise ValueError(f"start + n = {start + n} exceeds the split size {SPLIT_SIZE}")
    base = _RANGES[split].start
    return list(range(base + start, base + start + n))


def split_of(seed: int) -> Split:
    """The split a seed belongs to.

    Raises:
        ValueError: the seed is in neither range.
    """
    if seed in TRAIN_SEED_RANGE:
        return "train"
    if seed in EVAL_SEED_RANGE:
        return "eval"
    raise ValueError(
        f"seed {seed} is outside the train {TRAIN_SEED_RANGE} and eval {EVAL_SEED_RANGE} ranges"
    )


def assert_disjoint(train_seeds: Iterable[int], eval_seeds: Iterable[int]) -> None:
    """Check that no seed is in both sets and each seed lies in its own split's range.

    Raises:
        ValueError: naming up to 10 overlapping or misplaced seeds.
    """
    train, held_out = set(train_seeds), set(eval_seeds)
    overlap = sorted(train & held_out)
    if overlap:
        raise ValueError(f"{len(overlap)} seeds are in both splits, e.g. {overlap[:10]}")
    misplaced = sorted(s for s in train if s not in TRAIN_SEED_RANGE)
    misplaced += sorted(s for s in held_out if s not in EVAL_SEED_RANGE)
    if misplaced:
        raise ValueError(
            f"{len(misplaced)} seeds lie outside their split's range, e.g. {misplaced[:10]}"
        )
