"""Tests for dreamgym.rl.losses: clipped objective, KL estimators, aggregation, GRPO loss."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamgym.rl.losses import (
    aggregate_loss,
    clipped_policy_loss,
    clipped_value_loss,
    grpo_loss,
    kl_penalty,
)

FAST = settings(max_examples=50, deadline=None)
AGGREGATIONS = ["token_mean", "sequence_mean", "sum_over_max_tokens"]
EPS = {"epsilon_low": 0.2, "epsilon_high": 0.2}


def _policy_batch(n: int, t: int, seed: int, dtype: torch.dtype = torch.float32):
    """log_probs (requires grad), old_log_probs, ref_log_probs, advantages, action_mask."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(n, t, generator=gen, dtype=torch.float64) * 3
    log_probs = old + torch.randn(n, t, generator=gen, dtype=torch.float64) * 0.3
    ref = old + torch.randn(n, t, generator=gen, dtype=torch.float64) * 0.3
    advantages = torch.randn(n, t, generator=gen, dtype=torch.float64)
    mask = torch.rand(n, t, generator=gen) > 0.3
    cast = [x.to(dtype) for x in (log_probs, old, ref, advantages)]
    return cast[0].requires_grad_(True), cast[1], cast[2], cast[3], mask


# --- clipped_policy_loss ----------------------------------------------------------------------


def test_clipped_policy_loss_hand_values_and_stats():
    ratios = torch.tensor([[1.5, 1.5, 0.5, 0.5]])
    log_probs = ratios.log()
    advantages = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)

    per_token, stats = clipped_policy_loss(log_probs, torch.zeros(1, 4), advantages, mask, **EPS)

    # −min(ρA, clip(ρ)A): −min(1.5, 1.2), −min(−1.5, −1.2), −min(.5, .8), −min(−.5, −.8)
    torch.testing.assert_close(per_token, torch.tensor([[-1.2, 1.5, -0.5, 0.8]]))
    torch.testing.assert_close(stats["clip_fraction"], torch.tensor(0.5))
    torch.testing.assert_close(stats["ratio_mean"], torch.tensor(1.0))
    expected_kl = ((ratios - 1) - ratios.log()).mean()
    torch.testing.assert_close(stats["approx_kl"], expected_kl)


def test_clipped_policy_loss_asymmetric_clip_raises_only_the_ceiling():
    log_probs = torch.tensor([[math.log(1.25), math.log(0.75)]])
    advantages = torch.tensor([[1.0, -1.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)

    per_token, stats = clipped_policy_loss(
        log_probs, torch.zeros(1, 2), advantages, mask, epsilon_low=0.2, epsilon_high=0.28
    )

    torch.testing.assert_close(per_token, torch.tensor([[-1.25, 0.8]]))
    torch.testing.assert_close(stats["clip_fraction"], torch.tensor(0.5))


@FAST
@given(
    log_ratio=st.floats(min_value=math.log(0.81), max_value=math.log(1.19)),
    advantage=st.floats(min_value=-5, max_value=5),
)
def test_clipped_policy_loss_is_minus_advantage_times_ratio_inside_clip_range(log_ratio, advantage):
    old = torch.tensor([[-1.0]], dtype=torch.float64)
    log_probs = (old + log_ratio).requires_grad_(True)
    advantages = torch.tensor([[advantage]], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.bool)

    per_token, _ = clipped_policy_loss(log_probs, old, advantages, mask, **EPS)
    per_token.sum().backward()

    ratio = math.exp(log_ratio)
    torch.testing.assert_close(per_token, torch.tensor([[-advantage * ratio]], dtype=torch.float64))
    torch.testing.assert_close(
        log_probs.grad, torch.tensor([[-advantage * ratio]], dtype=torch.float64)
    )


@FAST
@given(
    log_ratio=st.floats(min_value=0.2, max_value=3.0),
    advantage=st.floats(min_value=0.01, max_value=5),
    low_side=st.booleans(),
)
def test_clipped_policy_loss_gradient_is_zero_where_clipped_with_matching_sign(
    log_ratio, advantage, low_side
):
    # ρ > 1.2 with A > 0, or ρ < 0.8 with A < 0 (log 1.2 ≈ 0.18, log 0.8 ≈ −0.22)
    signed_log_ratio = -log_ratio - 0.03 if low_side else log_ratio
    signed_advantage = -advantage if low_side else advantage
    log_probs = torch.tensor([[signed_log_ratio]], dtype=torch.float64, requires_grad=True)
    advantages = torch.tensor([[signed_advantage]], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.bool)

    per_token, stats = clipped_policy_loss(
        log_probs, torch.zeros(1, 1, dtype=torch.float64), advantages, mask, **EPS
    )
    per_token.sum().backward()

    assert log_probs.grad.item() == 0.0
    assert stats["clip_fraction"].item() == 1.0


@FAST
@given(
    log_ratio=st.floats(min_value=0.2, max_value=3.0),
    advantage=st.floats(min_value=0.01, max_value=5),
)
def test_clipped_policy_loss_keeps_gradient_when_clip_sign_does_not_match(log_ratio, advantage):
    # ρ > 1 + ε with A < 0: the unclipped term is the minimum, so the gradient stays.
    log_probs = torch.tensor([[log_ratio]], dtype=torch.float64, requires_grad=True)
    advantages = torch.tensor([[-advantage]], dtype=torch.float64)
    mask = torch.ones(1, 1, dtype=torch.bool)

    per_token, stats = clipped_policy_loss(
        log_probs, torch.zeros(1, 1, dtype=torch.float64), advantages, mask, **EPS
    )
    per_token.sum().backward()

    torch.testing.assert_close(log_probs.grad.item(), advantage * math.exp(log_ratio))
    assert stats["clip_fraction"].item() == 0.0


@FAST
@given(seed=st.integers(0, 10_000), junk=st.sampled_from([0.0, 1e4, -1e4, math.inf, math.nan]))
def test_clipped_policy_loss_masked_tokens_change_neither_loss_nor_gradient(seed, junk):
    log_probs, old, _, advantages, mask = _policy_batch(3, 5, seed)
    junk_log_probs = log_probs.detach().where(mask, junk).requires_grad_(True)
    junk_old, junk_adv = old.where(mask, -junk), advantages.where(mask, junk)

    clean, clean_stats = clipped_policy_loss(log_probs, old, advantages, mask, **EPS)
    dirty, dirty_stats = clipped_policy_loss(junk_log_probs, junk_old, junk_adv, mask, **EPS)
    clean.sum().backward()
    dirty.sum().backward()

    torch.testing.assert_close(dirty, clean)
    torch.testing.assert_close(junk_log_probs.grad, log_probs.grad)
    assert torch.all(junk_log_probs.grad[~mask] == 0)
    torch.testing.assert_close(dirty_stats, clean_stats)


def test_clipped_policy_loss_stats_are_detached_scalars():
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=0)

    _, stats = clipped_policy_loss(log_probs, old, advantages, mask)

    assert set(stats) == {"clip_fraction", "ratio_mean", "approx_kl"}
    assert all(s.ndim == 0 and not s.requires_grad for s in stats.values())


def test_clipped_policy_loss_unequal_shapes_raise_with_shapes():
    mask = torch.ones(2, 3, dtype=torch.bool)

    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        clipped_policy_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3), mask)


def test_clipped_policy_loss_float_mask_raises():
    x = torch.zeros(2, 3)

    with pytest.raises(ValueError, match="bool"):
        clipped_policy_loss(x, x, x, torch.ones(2, 3))


@pytest.mark.parametrize("low,high", [(1.0, 0.2), (-0.1, 0.2), (0.2, -0.1)])
def test_clipped_policy_loss_bad_epsilon_raises(low, high):
    x, mask = torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool)

    with pytest.raises(ValueError, match="epsilon"):
        clipped_policy_loss(x, x, x, mask, epsilon_low=low, epsilon_high=high)


# --- kl_penalty -------------------------------------------------------------------------------


def test_kl_penalty_hand_values_for_each_estimator():
    log_probs = torch.zeros(1, 1)
    ref = torch.full((1, 1), math.log(2.0))  # log r = ln 2

    k1 = kl_penalty(log_probs, ref, estimator="k1")
    k2 = kl_penalty(log_probs, ref, estimator="k2")
    k3 = kl_penalty(log_probs, ref, estimator="k3")

    torch.testing.assert_close(k1, torch.tensor([[-math.log(2)]]))
    torch.testing.assert_close(k2, torch.tensor([[0.5 * math.log(2) ** 2]]))
    torch.testing.assert_close(k3, torch.tensor([[2 - math.log(2) - 1]]))


@FAST
@given(
    st.lists(st.floats(min_value=-20, max_value=0), min_size=1, max_size=8),
    st.lists(st.floats(min_value=-20, max_value=0), min_size=1, max_size=8),
)
def test_kl_penalty_k3_and_k2_are_non_negative(log_probs, ref):
    size = min(len(log_probs), len(ref))
    lp = torch.tensor([log_probs[:size]], dtype=torch.float64)
    rf = torch.tensor([ref[:size]], dtype=torch.float64)

    assert torch.all(kl_penalty(lp, rf, estimator="k3") >= 0)
    assert torch.all(kl_penalty(lp, rf, estimator="k2") >= 0)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_penalty_is_zero_when_policies_are_equal(estimator):
    log_probs, *_ = _policy_batch(3, 4, seed=1)

    kl = kl_penalty(log_probs, log_probs.detach(), estimator=estimator)

    assert torch.equal(kl, torch.zeros_like(kl))


@pytest.mark.parametrize("estimator", ["k1", "k3"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kl_penalty_unbiased_estimators_have_kl_as_expectation(estimator, seed):
    gen = torch.Generator().manual_seed(seed)
    log_p = torch.log_softmax(torch.randn(1, 6, generator=gen, dtype=torch.float64), -1)
    log_q = torch.log_softmax(torch.randn(1, 6, generator=gen, dtype=torch.float64), -1)

    per_token = kl_penalty(log_p, log_q, estimator=estimator)

    expectation = (log_p.exp() * per_token).sum()  # E_{a~p}[k(a)], exactly
    torch.testing.assert_close(expectation, (log_p.exp() * (log_p - log_q)).sum())


def test_kl_penalty_bad_inputs_raise():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        kl_penalty(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="estimator"):
        kl_penalty(torch.zeros(2, 3), torch.zeros(2, 3), estimator="k4")  # type: ignore[arg-type]


# --- aggregate_loss ---------------------------------------------------------------------------


def test_aggregate_loss_hand_values_for_each_mode():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])

    token_mean = aggregate_loss(per_token, mask, mode="token_mean")
    sequence_mean = aggregate_loss(per_token, mask, mode="sequence_mean")
    fixed = aggregate_loss(per_token, mask, mode="sum_over_max_tokens", max_tokens=5)

    torch.testing.assert_close(token_mean, torch.tensor(10 / 4))
    torch.testing.assert_close(sequence_mean, torch.tensor((2.0 + 4.0) / 2))
    torch.testing.assert_close(fixed, torch.tensor(10 / (2 * 5)))


def test_aggregate_loss_sequence_mean_skips_empty_rows():
    per_token = torch.tensor([[1.0, 3.0], [9.0, 9.0]])
    mask = torch.tensor([[True, True], [False, False]])

    torch.testing.assert_close(
        aggregate_loss(per_token, mask, mode="sequence_mean"), torch.tensor(2.0)
    )


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_aggregate_loss_all_masked_is_zero_with_zero_gradient(mode):
    per_token = torch.full((2, 3), math.nan).requires_grad_(True)
    mask = torch.zeros(2, 3, dtype=torch.bool)

    loss = aggregate_loss(per_token, mask, mode=mode, max_tokens=4)
    loss.backward()

    assert loss.item() == 0.0 and loss.requires_grad
    assert torch.equal(per_token.grad, torch.zeros(2, 3))


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_aggregate_loss_ignores_masked_values(mode, dtype):
    gen = torch.Generator().manual_seed(3)
    per_token = torch.randn(4, 6, generator=gen).to(dtype)
    mask = torch.rand(4, 6, generator=gen) > 0.4

    clean = aggregate_loss(per_token, mask, mode=mode, max_tokens=8)
    dirty = aggregate_loss(per_token.where(mask, torch.inf), mask, mode=mode, max_tokens=8)

    assert clean.dtype == dtype
    torch.testing.assert_close(dirty, clean)


@pytest.mark.parametrize("max_tokens", [None, 0])
def test_aggregate_loss_sum_over_max_tokens_needs_max_tokens(max_tokens):
    with pytest.raises(ValueError, match="max_tokens"):
        aggregate_loss(
            torch.zeros(1, 1),
            torch.ones(1, 1, dtype=torch.bool),
            mode="sum_over_max_tokens",
            max_tokens=max_tokens,
        )


def test_aggregate_loss_bad_mode_and_shapes_raise():
    mask = torch.ones(2, 3, dtype=torch.bool)

    with pytest.raises(ValueError, match="mode"):
        aggregate_loss(torch.zeros(2, 3), mask, mode="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        aggregate_loss(torch.zeros(3, 2), mask, mode="token_mean")


# --- clipped_value_loss -----------------------------------------------------------------------


def test_clipped_value_loss_hand_values():
    values = torch.tensor([[1.5, 1.1]], requires_grad=True)
    old_values = torch.tensor([[1.0, 1.0]])
    returns = torch.tensor([[2.0, 2.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    # entry 0: clipped to 1.2, errors .25 vs .64 → .64 (clipped, no gradient)
    # entry 1: inside the range, error .81

    loss, stats = clipped_value_loss(values, old_values, returns, mask, clip_range=0.2)
    loss.backward()

    torch.testing.assert_close(loss, torch.tensor(0.5 * (0.64 + 0.81) / 2))
    torch.testing.assert_close(values.grad, torch.tensor([[0.0, 0.5 * 2 * (1.1 - 2.0) / 2]]))
    torch.testing.assert_close(stats["value_clip_fraction"], torch.tensor(0.5))
    torch.testing.assert_close(stats["value_mean"], torch.tensor(1.3))


def test_clipped_value_loss_ignores_masked_entries():
    values = torch.tensor([[1.0, 1e6]])
    mask = torch.tensor([[True, False]])

    loss, _ = clipped_value_loss(values, torch.ones(1, 2), torch.tensor([[3.0, -1e6]]), mask)

    torch.testing.assert_close(loss, torch.tensor(0.5 * 4.0))


def test_clipped_value_loss_bad_inputs_raise():
    x, mask = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)

    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        clipped_value_loss(x, torch.zeros(2, 2), x, mask)
    with pytest.raises(ValueError, match="clip_range"):
        clipped_value_loss(x, x, x, mask, clip_range=-1.0)


# --- grpo_loss --------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_grpo_loss_is_policy_term_plus_beta_kl(aggregation, estimator):
    log_probs, old, ref, advantages, mask = _policy_batch(4, 5, seed=4)

    loss, stats = grpo_loss(
        log_probs,
        old,
        ref,
        advantages,
        mask,
        epsilon_low=0.2,
        epsilon_high=0.28,
        beta=0.04,
        kl_estimator=estimator,
        aggregation=aggregation,
        max_tokens=6,
    )

    policy, _ = clipped_policy_loss(
        log_probs, old, advantages, mask, epsilon_low=0.2, epsilon_high=0.28
    )
    kl = kl_penalty(log_probs, ref, estimator=estimator)
    expected = aggregate_loss(policy + 0.04 * kl, mask, mode=aggregation, max_tokens=6)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(stats["kl"], kl[mask].mean().detach())
    torch.testing.assert_close(
        stats["policy_loss"], aggregate_loss(policy, mask, mode=aggregation, max_tokens=6).detach()
    )


def test_grpo_loss_sequence_advantages_equal_broadcast_token_advantages():
    log_probs, old, ref, _, mask = _policy_batch(4, 5, seed=5)
    sequence_advantages = torch.tensor([1.0, -1.0, 0.5, 0.0], dtype=log_probs.dtype)
    token_advantages = sequence_advantages[:, None].expand(4, 5)

    from_sequence, _ = grpo_loss(log_probs, old, ref, sequence_advantages, mask, **EPS, beta=0.1)
    from_tokens, _ = grpo_loss(log_probs, old, ref, token_advantages, mask, **EPS, beta=0.1)

    torch.testing.assert_close(from_sequence, from_tokens)


def test_grpo_loss_beta_zero_logs_kl_but_does_not_add_it():
    log_probs, old, ref, advantages, mask = _policy_batch(3, 4, seed=6)

    with_ref, stats = grpo_loss(log_probs, old, ref, advantages, mask, **EPS, beta=0.0)
    without_ref, stats_without = grpo_loss(log_probs, old, None, advantages, mask, **EPS, beta=0.0)

    torch.testing.assert_close(with_ref, without_ref)
    assert "kl" in stats and "kl" not in stats_without
    assert stats["kl"] > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grpo_loss_masked_tokens_change_neither_loss_nor_gradient(dtype):
    log_probs, old, ref, advantages, mask = _policy_batch(3, 6, seed=7, dtype=dtype)
    junk_log_probs = log_probs.detach().where(mask, -math.inf).requires_grad_(True)
    junk = [x.where(mask, math.inf) for x in (old, ref, advantages)]

    clean, _ = grpo_loss(log_probs, old, ref, advantages, mask, **EPS, beta=0.1)
    dirty, _ = grpo_loss(junk_log_probs, *junk[:2], junk[2], mask, **EPS, beta=0.1)
    clean.backward()
    dirty.backward()

    torch.testing.assert_close(dirty, clean)
    torch.testing.assert_close(junk_log_probs.grad, log_probs.grad)
    assert torch.isfinite(junk_log_probs.grad).all()


def test_grpo_loss_at_old_policy_has_minus_mean_advantage_gradient():
    # At θ = θ_old and π_ref = π_θ: ρ = 1, KL = 0, ∂loss/∂log_probs = −A / #tokens.
    old = torch.log(torch.full((2, 3), 0.25))
    log_probs = old.clone().requires_grad_(True)
    advantages = torch.tensor([1.0, -1.0])
    mask = torch.ones(2, 3, dtype=torch.bool)

    loss, stats = grpo_loss(log_probs, old, old, advantages, mask, **EPS, beta=0.5)
    loss.backward()

    torch.testing.assert_close(loss.detach(), torch.tensor(0.0))
    torch.testing.assert_close(log_probs.grad, -advantages[:, None].expand(2, 3) / 6)
    torch.testing.assert_close(stats["kl"], torch.tensor(0.0))


def test_grpo_loss_does_not_backpropagate_into_old_or_ref_log_probs():
    log_probs, old, ref, advantages, mask = _policy_batch(2, 3, seed=8)
    old, ref = old.requires_grad_(True), ref.requires_grad_(True)

    loss, _ = grpo_loss(log_probs, old, ref, advantages, mask, **EPS, beta=0.1)
    loss.backward()

    assert old.grad is None and ref.grad is None


def test_grpo_loss_positive_beta_without_reference_raises():
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=9)

    with pytest.raises(ValueError, match="ref_log_probs"):
        grpo_loss(log_probs, old, None, advantages, mask, **EPS, beta=0.1)


def test_grpo_loss_bad_reference_shape_raises_with_shapes():
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=10)

    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        grpo_loss(log_probs, old, torch.zeros(2, 4), advantages, mask, **EPS, beta=0.1)


def test_grpo_loss_bad_sequence_advantages_raise_with_shapes():
    log_probs, old, ref, _, mask = _policy_batch(2, 3, seed=11)

    with pytest.raises(ValueError, match=r"\(3,\)"):
        grpo_loss(log_probs, old, ref, torch.zeros(3), mask, **EPS, beta=0.1)


def test_clipped_value_loss_without_clip_range_is_half_mse():
    values = torch.tensor([[1.5, 1.1]], requires_grad=True)
    mask = torch.ones(1, 2, dtype=torch.bool)

    loss, stats = clipped_value_loss(
        values, torch.ones(1, 2), torch.tensor([[2.0, 2.0]]), mask, clip_range=None
    )
    loss.backward()

    torch.testing.assert_close(loss, torch.tensor(0.5 * (0.25 + 0.81) / 2))
    torch.testing.assert_close(values.grad, torch.tensor([[-0.5, -0.9]]) / 2)
    assert stats["value_clip_fraction"].item() == 0.0


@FAST
@given(
    seed=st.integers(0, 10_000),
    clip_range=st.sampled_from([0.0, 0.1, 0.5, None]),
    junk=st.sampled_from([1e4, math.inf, -math.inf, math.nan]),
)
def test_clipped_value_loss_masked_entries_change_neither_loss_nor_gradient(seed, clip_range, junk):
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(3, 4, generator=gen, dtype=torch.float64).requires_grad_(True)
    old_values = values.detach() + 0.3 * torch.randn(3, 4, generator=gen, dtype=torch.float64)
    returns = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    mask = torch.rand(3, 4, generator=gen) > 0.4
    junk_values = values.detach().where(mask, junk).requires_grad_(True)

    clean, _ = clipped_value_loss(values, old_values, returns, mask, clip_range=clip_range)
    dirty, _ = clipped_value_loss(
        junk_values,
        old_values.where(mask, junk),
        returns.where(mask, -junk),
        mask,
        clip_range=clip_range,
    )
    clean.backward()
    dirty.backward()

    torch.testing.assert_close(dirty, clean)
    torch.testing.assert_close(junk_values.grad, values.grad)
    assert torch.all(junk_values.grad[~mask] == 0)


@FAST
@given(seed=st.integers(0, 10_000), clip_range=st.floats(0.0, 2.0))
def test_clipped_value_loss_matches_definition_entrywise(seed, clip_range):
    gen = torch.Generator().manual_seed(seed)
    values, old_values, returns = torch.randn(3, 2, 5, generator=gen, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.bool)

    loss, stats = clipped_value_loss(values, old_values, returns, mask, clip_range=clip_range)

    expected, clipped_count = 0.0, 0
    for v, v_old, r in zip(values.flatten(), old_values.flatten(), returns.flatten(), strict=True):
        v_clip = v_old + min(max(float(v - v_old), -clip_range), clip_range)
        unclipped, clipped = float(v - r) ** 2, float(v_clip - r) ** 2
        expected += 0.5 * max(unclipped, clipped) / 10
        clipped_count += clipped > unclipped
    assert loss.item() == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert stats["value_clip_fraction"].item() == pytest.approx(clipped_count / 10)
