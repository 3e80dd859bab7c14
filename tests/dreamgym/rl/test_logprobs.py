"""Tests for dreamgym.rl.logprobs: selective log-softmax, masked log-probs, entropy."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamgym.rl.logprobs import entropy_from_logits, gather_log_probs, masked_log_probs

FAST = settings(max_examples=40, deadline=None)


def _random_case(n: int, t: int, v: int, seed: int, dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, t, v, generator=gen) * 3).to(dtype)
    token_ids = torch.randint(0, v, (n, t), generator=gen)
    return logits, token_ids


def _random_allowed(logits: torch.Tensor, token_ids: torch.Tensor, seed: int) -> torch.Tensor:
    """A random mask that allows every chosen token plus a random subset of the others."""
    gen = torch.Generator().manual_seed(seed)
    allowed = torch.rand(logits.shape, generator=gen) > 0.5
    return allowed.scatter(-1, token_ids[..., None], True)


# --- gather_log_probs -------------------------------------------------------------------------


def test_gather_log_probs_hand_values():
    logits = torch.log(torch.tensor([[[1.0, 2.0, 3.0, 2.0]]]))  # probabilities 1/8, 2/8, 3/8, 2/8

    log_probs = gather_log_probs(logits, torch.tensor([[2]]))

    torch.testing.assert_close(log_probs, torch.tensor([[math.log(3 / 8)]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("shape", [(1, 1, 2), (3, 5, 7), (2, 16, 50)])
def test_gather_log_probs_matches_full_log_softmax(dtype, shape):
    logits, token_ids = _random_case(*shape, seed=sum(shape), dtype=dtype)

    log_probs = gather_log_probs(logits, token_ids)

    reference_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    reference = torch.log_softmax(logits.to(reference_dtype), dim=-1)
    expected = reference.gather(-1, token_ids[..., None]).squeeze(-1)
    assert log_probs.dtype == reference_dtype
    torch.testing.assert_close(log_probs, expected)


def test_gather_log_probs_bf16_is_more_accurate_than_bf16_log_softmax():
    logits, token_ids = _random_case(4, 8, 64, seed=1, dtype=torch.bfloat16)
    exact = torch.log_softmax(logits.double(), -1).gather(-1, token_ids[..., None]).squeeze(-1)
    naive = torch.log_softmax(logits, -1).gather(-1, token_ids[..., None]).squeeze(-1)

    log_probs = gather_log_probs(logits, token_ids)

    assert (log_probs.double() - exact).abs().max() < (naive.double() - exact).abs().max()


def test_gather_log_probs_gradient_matches_log_softmax():
    logits, token_ids = _random_case(2, 3, 5, seed=2)
    logits_a = logits.clone().requires_grad_(True)
    logits_b = logits.clone().requires_grad_(True)

    gather_log_probs(logits_a, token_ids).sum().backward()
    torch.log_softmax(logits_b, -1).gather(-1, token_ids[..., None]).sum().backward()

    torch.testing.assert_close(logits_a.grad, logits_b.grad)


def test_gather_log_probs_does_not_mutate_bf16_logits():
    logits, token_ids = _random_case(2, 3, 5, seed=3, dtype=torch.bfloat16)
    before = logits.clone()

    gather_log_probs(logits, token_ids)

    assert torch.equal(logits, before) and logits.dtype == torch.bfloat16


def test_gather_log_probs_empty_batch_gives_empty_float32():
    log_probs = gather_log_probs(
        torch.zeros(0, 3, 4, dtype=torch.bfloat16), torch.zeros(0, 3, dtype=torch.long)
    )

    assert log_probs.shape == (0, 3) and log_probs.dtype == torch.float32


@pytest.mark.parametrize(
    "logits,token_ids,match",
    [
        (torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), r"\(2, 3\)"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long), r"\(2, 3, 4\).*\(2, 4\)"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3), "integer"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 4), r"\[0, V=4\)"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), -1), r"\[0, V=4\)"),
        (torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long), "floating"),
    ],
)
def test_gather_log_probs_bad_inputs_raise(logits, token_ids, match):
    with pytest.raises(ValueError, match=match):
        gather_log_probs(logits, token_ids)


# --- masked_log_probs -------------------------------------------------------------------------


def test_masked_log_probs_renormalises_hand_values():
    logits = torch.log(torch.tensor([[[1.0, 2.0, 3.0]]]))
    allowed = torch.tensor([[[True, True, False]]])

    log_probs = masked_log_probs(logits, torch.tensor([[1]]), allowed)

    torch.testing.assert_close(log_probs, torch.tensor([[math.log(2 / 3)]]))


@FAST
@given(
    v=st.integers(min_value=1, max_value=12),
    seed=st.integers(min_value=0, max_value=10_000),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
)
def test_masked_log_probs_exp_sums_to_one_over_allowed_tokens(v, seed, dtype):
    logits, token_ids = _random_case(1, 1, v, seed=seed, dtype=dtype)
    allowed = _random_allowed(logits, token_ids, seed=seed)
    allowed_ids = torch.nonzero(allowed[0, 0]).flatten()

    total = sum(
        masked_log_probs(logits, token.reshape(1, 1), allowed).exp().sum() for token in allowed_ids
    )

    torch.testing.assert_close(total, torch.tensor(1.0), atol=1e-5, rtol=0)


def test_masked_log_probs_single_allowed_token_is_exactly_zero():
    logits, token_ids = _random_case(2, 3, 6, seed=4)
    allowed = torch.nn.functional.one_hot(token_ids, 6).bool()

    log_probs = masked_log_probs(logits, token_ids, allowed)

    assert torch.equal(log_probs, torch.zeros(2, 3))


def test_masked_log_probs_without_mask_equals_gather():
    logits, token_ids = _random_case(2, 3, 6, seed=5)

    torch.testing.assert_close(
        masked_log_probs(logits, token_ids), gather_log_probs(logits, token_ids)
    )


def test_masked_log_probs_all_allowed_equals_gather():
    logits, token_ids = _random_case(2, 3, 6, seed=6)
    allowed = torch.ones(2, 3, 6, dtype=torch.bool)

    torch.testing.assert_close(
        masked_log_probs(logits, token_ids, allowed), gather_log_probs(logits, token_ids)
    )


def test_masked_log_probs_disallowed_logits_get_zero_gradient():
    logits, token_ids = _random_case(2, 3, 6, seed=7)
    allowed = _random_allowed(logits, token_ids, seed=7)
    logits = logits.requires_grad_(True)

    masked_log_probs(logits, token_ids, allowed).sum().backward()

    assert torch.all(logits.grad[~allowed] == 0)
    assert torch.isfinite(logits.grad).all()


def test_masked_log_probs_chosen_token_not_allowed_raises():
    logits, token_ids = _random_case(1, 2, 4, seed=8)
    allowed = ~torch.nn.functional.one_hot(token_ids, 4).bool()

    with pytest.raises(ValueError, match="not allowed"):
        masked_log_probs(logits, token_ids, allowed)


@pytest.mark.parametrize(
    "allowed,match",
    [
        (torch.ones(1, 2, 3, dtype=torch.bool), r"\(1, 2, 4\)"),
        (torch.ones(1, 2, 4), "bool"),
        (torch.zeros(1, 2, 4, dtype=torch.bool), "at least one"),
    ],
)
def test_masked_log_probs_bad_allowed_raises(allowed, match):
    with pytest.raises(ValueError, match=match):
        masked_log_probs(torch.zeros(1, 2, 4), torch.zeros(1, 2, dtype=torch.long), allowed)


# --- entropy_from_logits ----------------------------------------------------------------------


@pytest.mark.parametrize("v", [1, 2, 7, 128])
def test_entropy_of_uniform_logits_is_log_v(v):
    entropy = entropy_from_logits(torch.zeros(2, 3, v))

    torch.testing.assert_close(entropy, torch.full((2, 3), math.log(v)))


def test_entropy_with_mask_is_log_of_allowed_count():
    allowed = torch.tensor([[[True, False, True, True, False]]])

    entropy = entropy_from_logits(torch.zeros(1, 1, 5), allowed)

    torch.testing.assert_close(entropy, torch.tensor([[math.log(3)]]))


def test_entropy_single_allowed_token_is_zero_with_finite_gradient():
    logits, token_ids = _random_case(2, 3, 6, seed=9)
    logits = logits.requires_grad_(True)
    allowed = torch.nn.functional.one_hot(token_ids, 6).bool()

    entropy = entropy_from_logits(logits, allowed)
    entropy.sum().backward()

    assert torch.equal(entropy.detach(), torch.zeros(2, 3))
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("masked", [False, True])
def test_entropy_matches_reference_and_has_finite_gradient(dtype, masked):
    logits, token_ids = _random_case(3, 4, 10, seed=10, dtype=dtype)
    allowed = _random_allowed(logits, token_ids, seed=10) if masked else None
    logits = logits.requires_grad_(True)

    entropy = entropy_from_logits(logits, allowed)
    entropy.sum().backward()

    z = logits.detach().float()
    if allowed is not None:
        z = z.masked_fill(~allowed, -torch.inf)
    p = torch.softmax(z, -1)
    expected = -(p * torch.log(p).nan_to_num(neginf=0.0)).sum(-1)
    assert entropy.dtype == torch.float32
    torch.testing.assert_close(entropy, expected)
    assert torch.isfinite(logits.grad).all()
    if allowed is not None:
        assert torch.all(logits.grad[~allowed] == 0)


def test_entropy_bad_logits_raise_with_shape():
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        entropy_from_logits(torch.zeros(2, 3))
