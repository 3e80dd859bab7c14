"""Train / eval seed splits (dreamgym.envs.splits)."""

from __future__ import annotations

import pytest

from dreamgym.envs.splits import (
    EVAL_SEED_RANGE,
    TRAIN_SEED_RANGE,
    assert_disjoint,
    seeds,
    split_of,
)


def test_seeds_train_starts_at_zero_and_eval_at_one_million():
    assert seeds("train", 3) == [0, 1, 2]
    assert seeds("eval", 3) == [1_000_000, 1_000_001, 1_000_002]


def test_seeds_start_offsets_give_non_overlapping_batches():
    first, second = seeds("train", 100), seeds("train", 100, start=100)

    assert set(first).isdisjoint(second)
    assert second[0] == 100


def test_seeds_same_arguments_are_deterministic():
    assert seeds("eval", 50, start=7) == seeds("eval", 50, start=7)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_seeds_stay_inside_their_split_range(split):
    expected = TRAIN_SEED_RANGE if split == "train" else EVAL_SEED_RANGE

    last = seeds(split, 10, start=999_990)

    assert all(s in expected for s in last)


def test_seeds_of_both_splits_are_disjoint():
    assert_disjoint(seeds("train", 1000), seeds("eval", 1000))


@pytest.mark.parametrize(
    ("split", "n", "start", "message"),
    [
        ("test", 1, 0, "split"),
        ("train", -1, 0, ">= 0"),
        ("train", 1, -5, ">= 0"),
        ("eval", 2, 999_999, "exceeds"),
    ],
)
def test_seeds_invalid_arguments_raise_value_error(split, n, start, message):
    with pytest.raises(ValueError, match=message):
        seeds(split, n, start)


def test_split_of_maps_seed_to_its_split():
    assert split_of(0) == "train"
    assert split_of(999_999) == "train"
    assert split_of(1_000_000) == "eval"
    with pytest.raises(ValueError, match="outside"):
        split_of(2_000_000)


def test_assert_disjoint_overlap_raises_value_error_naming_seeds():
    with pytest.raises(ValueError, match=r"both splits.*\[5\]"):
        assert_disjoint([1, 5], [5, 1_000_000])


def test_assert_disjoint_seed_in_wrong_range_raises_value_error():
    with pytest.raises(ValueError, match="outside their split's range"):
        assert_disjoint([1_000_001], [1_000_000])
