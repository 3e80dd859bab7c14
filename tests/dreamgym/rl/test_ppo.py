"""Tests for dreamgym.rl.ppo: the PPO objective on the agent's own tokens."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamgym.rl.losses import aggregate_loss, clipped_value_loss, grpo_loss
from dreamgym.rl.ppo import ppo_loss

from .test_losses import _policy_batch

FAST = settings(max_examples=50, deadline=None)
AGGREGATIONS = ["token_mean", "sequence_mean", "sum_over_max_tokens"]
EPS = {"epsilon_low": 0.2, "epsilon_high": 0.2}


# --- ppo_loss ---------------------------------------------------------------------------------

PPO_COEFS = {"epsilon_low": 0.2, "epsilon_high": 0.2, "vf_coef": 0.5, "vf_clip": 0.2}


def _value_batch(n: int, seed: int, dtype: torch.dtype = torch.float32):
    """values (requires grad), old_values, returns and an all-True value_mask, each (n, 1)."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    old_values = values + 0.3 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    returns = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    cast = [x.to(dtype) for x in (values, old_values, returns)]
    return cast[0].requires_grad_(True), cast[1], cast[2], torch.ones(n, 1, dtype=torch.bool)


def test_ppo_loss_hand_values():
    log_probs = torch.tensor([[-1.0, -0.5]], requires_grad=True)
    mask = torch.tensor([[True, False]])
    values = torch.tensor([[1.5]], requires_grad=True)
    entropy = torch.tensor([[0.7, 99.0]], requires_grad=True)
    # policy: ratio 1 on the one agent token, A = 2 → −2
    # value: V_clip = 1.2, max((1.5−2)², (1.2−2)²) = .64 → ½·.64 = .32, × c_V .5 = .16
    # entropy bonus: −.1 × .7 = −.07; the masked entry (99) does not count

    loss, stats = ppo_loss(
        log_probs,
        log_probs.detach(),
        None,
        torch.tensor([2.0]),
        mask,
        values,
        torch.tensor([[1.0]]),
        torch.tensor([[2.0]]),
        torch.ones(1, 1, dtype=torch.bool),
        beta=0.0,
        entropy=entropy,
        entropy_coef=0.1,
        **PPO_COEFS,
    )
    loss.backward()

    torch.testing.assert_close(loss, torch.tensor(-2.0 + 0.16 - 0.07))
    torch.testing.assert_close(log_probs.grad, torch.tensor([[-2.0, 0.0]]))
    torch.testing.assert_close(values.grad, torch.tensor([[0.0]]))  # clipped: no gradient
    torch.testing.assert_close(entropy.grad, torch.tensor([[-0.1, 0.0]]))
    torch.testing.assert_close(stats["value_loss"], torch.tensor(0.32))
    torch.testing.assert_close(stats["entropy"], torch.tensor(0.7))
    torch.testing.assert_close(stats["policy_loss"], torch.tensor(-2.0))
    assert stats["value_clip_fraction"].item() == 1.0


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_ppo_loss_is_grpo_loss_plus_value_and_entropy_terms(aggregation):
    log_probs, old, ref, advantages, mask = _policy_batch(4, 5, seed=7)
    values, old_values, returns, value_mask = _value_batch(4, seed=8)
    entropy = torch.rand(4, 5, generator=torch.Generator().manual_seed(9))
    common = {"aggregation": aggregation, "max_tokens": 6, "beta": 0.05}

    loss, stats = ppo_loss(
        log_probs,
        old,
        ref,
        advantages,
        mask,
        values,
        old_values,
        returns,
        value_mask,
        entropy=entropy,
        entropy_coef=0.01,
        **PPO_COEFS,
        **common,
    )
    grpo, _ = grpo_loss(log_probs, old, ref, advantages, mask, **EPS, **common)
    value, _ = clipped_value_loss(values, old_values, returns, value_mask, clip_range=0.2)
    bonus = aggregate_loss(entropy, mask, mode=aggregation, max_tokens=6)

    torch.testing.assert_close(loss, grpo + 0.5 * value - 0.01 * bonus)
    assert {"kl", "clip_fraction", "value_loss", "value_mean", "entropy"} <= set(stats)
    assert all(s.ndim == 0 and not s.requires_grad for s in stats.values())


@FAST
@given(seed=st.integers(0, 10_000), junk=st.sampled_from([1e4, -1e4, math.inf, math.nan]))
def test_ppo_loss_non_agent_tokens_change_neither_loss_nor_gradient(seed, junk):
    log_probs, old, ref, advantages, mask = _policy_batch(3, 6, seed)
    values, old_values, returns, value_mask = _value_batch(3, seed + 1)
    entropy = torch.rand(3, 6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    entropy.requires_grad_(True)
    junk_log_probs = log_probs.detach().where(mask, junk).requires_grad_(True)
    junk_entropy = entropy.detach().where(mask, junk).requires_grad_(True)
    value_args = (values, old_values, returns, value_mask)
    kwargs = {"beta": 0.1, "entropy_coef": 0.01, **PPO_COEFS}

    clean, _ = ppo_loss(
        log_probs, old, ref, advantages, mask, *value_args, entropy=entropy, **kwargs
    )
    dirty, _ = ppo_loss(
        junk_log_probs,
        old.where(mask, -junk),
        ref.where(mask, junk),
        advantages.where(mask, junk),
        mask,
        *value_args,
        entropy=junk_entropy,
        **kwargs,
    )
    clean.backward()
    dirty.backward()

    torch.testing.assert_close(dirty, clean)
    torch.testing.assert_close(junk_log_probs.grad, log_probs.grad)
    torch.testing.assert_close(junk_entropy.grad, entropy.grad)
    assert torch.all(junk_log_probs.grad[~mask] == 0) and torch.all(junk_entropy.grad[~mask] == 0)


@FAST
@given(seed=st.integers(0, 10_000), vf_coef=st.floats(0.0, 2.0))
def test_ppo_loss_value_gradient_is_vf_coef_times_value_loss_gradient(seed, vf_coef):
    log_probs, old, _, advantages, mask = _policy_batch(3, 4, seed)
    values, old_values, returns, value_mask = _value_batch(3, seed + 1, dtype=torch.float64)
    reference = values.detach().clone().requires_grad_(True)

    loss, _ = ppo_loss(
        log_probs,
        old,
        None,
        advantages,
        mask,
        values,
        old_values,
        returns,
        value_mask,
        beta=0.0,
        **(PPO_COEFS | {"vf_coef": vf_coef}),
    )
    value, _ = clipped_value_loss(reference, old_values, returns, value_mask, clip_range=0.2)
    loss.backward()
    value.backward()

    torch.testing.assert_close(values.grad, vf_coef * reference.grad)


def test_ppo_loss_without_entropy_has_no_entropy_stat():
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=1)

    _, stats = ppo_loss(
        log_probs, old, None, advantages, mask, *_value_batch(2, seed=2), beta=0.0, **PPO_COEFS
    )

    assert "entropy" not in stats


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"vf_coef": -0.1}, "vf_coef"),
        ({"entropy_coef": -0.1}, "entropy_coef"),
        ({"entropy_coef": 0.1}, "entropy"),
        ({"beta": 0.1}, "ref_log_probs"),
        ({"vf_clip": -1.0}, "clip_range"),
    ],
)
def test_ppo_loss_bad_coefficients_raise(overrides, match):
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=1)

    with pytest.raises(ValueError, match=match):
        ppo_loss(
            log_probs,
            old,
            None,
            advantages,
            mask,
            *_value_batch(2, seed=2),
            **({"beta": 0.0} | PPO_COEFS | overrides),
        )


def test_ppo_loss_value_shape_mismatch_raises_with_shapes():
    log_probs, old, _, advantages, mask = _policy_batch(2, 3, seed=1)
    values, old_values, returns, value_mask = _value_batch(2, seed=2)

    with pytest.raises(ValueError, match=r"\(3, 1\)"):
        ppo_loss(
            log_probs,
            old,
            None,
            advantages,
            mask,
            values,
            old_values,
            torch.zeros(3, 1),
            value_mask,
            beta=0.0,
            **PPO_COEFS,
        )
