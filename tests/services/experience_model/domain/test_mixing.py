"""Tests of real/synthetic retrieval mixing (experience_model.domain.mixing), hand-computed."""

from __future__ import annotations

import pytest

from experience_model.domain.mixing import mix_retrieved, synthetic_quota


def mix(real, synthetic, k, fraction):
    return mix_retrieved(real, synthetic, k, synthetic_fraction=fraction, score=lambda x: x[1])


REAL = [("r1", 0.9), ("r2", 0.8), ("r3", 0.5), ("r4", 0.1)]
SYN = [("s1", 0.95), ("s2", 0.6), ("s3", 0.2)]


@pytest.mark.parametrize(("k", "fraction", "quota"), [(4, 0.5, 2), (4, 0.25, 1), (3, 0.0, 0)])
def test_synthetic_quota_rounds_k_times_fraction(k, fraction, quota):
    assert synthetic_quota(k, fraction) == quota


def test_synthetic_quota_rejects_fraction_outside_unit_interval():
    with pytest.raises(ValueError, match="fraction"):
        synthetic_quota(4, 1.5)


def test_mix_takes_the_share_from_each_side_ordered_by_score():
    out = mix(REAL, SYN, 4, 0.5)

    assert [x[0] for x in out] == ["s1", "r1", "r2", "s2"]


def test_mix_fraction_zero_is_real_only_and_one_is_synthetic_only():
    assert [x[0] for x in mix(REAL, SYN, 3, 0.0)] == ["r1", "r2", "r3"]
    assert [x[0] for x in mix(REAL, SYN, 3, 1.0)] == ["s1", "s2", "s3"]


def test_mix_fills_a_short_side_from_the_other():
    assert [x[0] for x in mix(REAL, SYN[:1], 4, 0.75)] == ["s1", "r1", "r2", "r3"]
    assert [x[0] for x in mix(REAL[:1], SYN, 4, 0.25)] == ["s1", "r1", "s2", "s3"]


def test_mix_returns_everything_when_both_sides_are_short():
    assert len(mix(REAL[:1], SYN[:1], 5, 0.5)) == 2


def test_mix_ties_put_real_first():
    out = mix([("r", 0.5)], [("s", 0.5)], 2, 0.5)

    assert [x[0] for x in out] == ["r", "s"]
