"""Unit tests of replay_store.domain.sampling.uniform_sample_indices."""

from __future__ import annotations

from collections import Counter

import pytest

from replay_store.domain.sampling import uniform_sample_indices


def test_uniform_sample_indices_same_seed_same_draw():
    assert uniform_sample_indices(100, 10, seed=3) == uniform_sample_indices(100, 10, seed=3)


def test_uniform_sample_indices_different_seed_different_draw():
    assert uniform_sample_indices(100, 10, seed=3) != uniform_sample_indices(100, 10, seed=4)


def test_uniform_sample_indices_without_replacement_in_range():
    drawn = uniform_sample_indices(50, 50, seed=0)

    assert sorted(drawn) == list(range(50))


def test_uniform_sample_indices_n_above_table_size_returns_whole_table():
    assert sorted(uniform_sample_indices(4, 10, seed=1)) == [0, 1, 2, 3]


def test_uniform_sample_indices_empty_table_returns_nothing():
    assert uniform_sample_indices(0, 5, seed=1) == []


def test_uniform_sample_indices_first_draw_is_uniform():
    counts = Counter(uniform_sample_indices(4, 1, seed=s)[0] for s in range(4000))

    assert set(counts) == {0, 1, 2, 3}
    assert all(abs(c / 4000 - 0.25) < 0.03 for c in counts.values())


@pytest.mark.parametrize(("table_size", "n"), [(-1, 1), (5, 0)])
def test_uniform_sample_indices_bad_arguments_raise_value_error(table_size, n):
    with pytest.raises(ValueError, match=str(table_size if table_size < 0 else n)):
        uniform_sample_indices(table_size, n)
