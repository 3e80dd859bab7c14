"""Tests for dreamgym.rl.advantages: hand cases, properties, reference loops, shape errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamgym.rl.advantages import (
    broadcast_to_tokens,
    generalized_advantage_estimation,
    group_relative_advantages,
    masked_whiten,
)

FAST = settings(max_examples=60, deadline=None)

# Rewards on a grid of exactly representable values, so sums and shifts are exact.
grid_reward = st.integers(min_value=-40, max_value=40).map(lambda k: k / 4)


@st.composite
def grouped_rewards(draw: st.DrawFn) -> tuple[torch.Tensor, int, torch.Tensor]:
    group_size = draw(st.integers(min_value=1, max_value=6))
    num_groups = draw(st.integers(min_value=1, max_value=5))
    n = group_size * num_groups
    rewards = draw(st.lists(grid_reward, min_size=n, max_size=n))
    valid = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return (
        torch.tensor(rewards, dtype=torch.float64),
        group_size,
        torch.tensor(valid, dtype=torch.bool),
    )


# --- group_relative_advantages: hand-computed cases -------------------------------------------


def test_group_advantages_two_rewards_are_plus_minus_one_with_population_std():
    advantages = group_relative_advantages(torch.tensor([1.0, 0.0]), group_size=2, eps=0.0)

    torch.testing.assert_close(advantages, torch.tensor([1.0, -1.0]))


def test_group_advantages_default_eps_is_close_to_unit():
    advantages = group_relative_advantages(torch.tensor([1.0, 0.0]), group_size=2)

    torch.testing.assert_close(advantages, torch.tensor([1.0, -1.0]), atol=1e-5, rtol=0)


def test_group_advantages_three_members_hand_values():
    # mean 1/3, population std sqrt(2/9) = sqrt(2)/3
    advantages = group_relative_advantages(torch.tensor([1.0, 0.0, 0.0]), group_size=3, eps=0.0)

    expected = torch.tensor([math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)])
    torch.testing.assert_close(advantages, expected)


def test_group_advantages_groups_are_independent():
    rewards = torch.tensor([1.0, 0.0, 5.0, 5.0, 2.0, 4.0])

    advantages = group_relative_advantages(rewards, group_size=2, eps=0.0)

    torch.testing.assert_close(advantages, torch.tensor([1.0, -1.0, 0.0, 0.0, -1.0, 1.0]))


def test_group_advantages_invalid_members_are_zero_and_excluded_from_statistics():
    rewards = torch.tensor([1.0, 0.0, 100.0])
    valid = torch.tensor([True, True, False])

    advantages = group_relative_advantages(rewards, group_size=3, eps=0.0, valid=valid)

    torch.testing.assert_close(advantages, torch.tensor([1.0, -1.0, 0.0]))


def test_group_advantages_nan_reward_is_treated_as_invalid():
    rewards = torch.tensor([1.0, float("nan"), 0.0])

    advantages = group_relative_advantages(rewards, group_size=3, eps=0.0)

    torch.testing.assert_close(advantages, torch.tensor([1.0, 0.0, -1.0]))


def test_group_advantages_group_with_one_valid_member_is_zero():
    rewards = torch.tensor([1.0, 0.0, 3.0, 0.0])
    valid = torch.tensor([True, False, True, True])

    advantages = group_relative_advantages(rewards, group_size=2, eps=0.0, valid=valid)

    torch.testing.assert_close(advantages, torch.tensor([0.0, 0.0, 1.0, -1.0]))


def test_group_advantages_scale_none_only_subtracts_mean():
    advantages = group_relative_advantages(
        torch.tensor([1.0, 0.0, 0.0]), group_size=3, scale="none"
    )

    torch.testing.assert_close(advantages, torch.tensor([2 / 3, -1 / 3, -1 / 3]))


def test_group_advantages_scale_batch_divides_by_batch_std():
    rewards = torch.tensor([1.0, 0.0, 3.0, 3.0])
    batch_std = torch.tensor([1.0, 0.0, 3.0, 3.0]).std(unbiased=False)

    advantages = group_relative_advantages(rewards, group_size=2, scale="batch", eps=0.0)

    torch.testing.assert_close(advantages, torch.tensor([0.5, -0.5, 0.0, 0.0]) / batch_std)


def test_group_advantages_near_uniform_float_group_is_exactly_zero():
    # 0.1 is not representable; the mean of three 0.1s differs from 0.1 by rounding.
    advantages = group_relative_advantages(torch.full((3,), 0.1), group_size=3)

    assert torch.equal(advantages, torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_group_advantages_keep_the_reward_dtype(dtype):
    advantages = group_relative_advantages(torch.tensor([1.0, 0.0], dtype=dtype), group_size=2)

    assert advantages.dtype == dtype


def test_group_advantages_do_not_mutate_inputs():
    rewards = torch.tensor([1.0, float("nan"), 0.0, 2.0])
    valid = torch.tensor([True, True, False, True])
    rewards_before, valid_before = rewards.clone(), valid.clone()

    group_relative_advantages(rewards, group_size=2, valid=valid)

    assert torch.equal(rewards.isnan(), rewards_before.isnan())
    assert torch.equal(rewards.nan_to_num(), rewards_before.nan_to_num())
    assert torch.equal(valid, valid_before)


# --- group_relative_advantages: properties ----------------------------------------------------


@FAST
@given(grouped_rewards())
def test_group_advantages_sum_to_zero_per_group(case):
    rewards, group_size, valid = case

    advantages = group_relative_advantages(rewards, group_size=group_size, valid=valid)

    sums = advantages.reshape(-1, group_size).sum(dim=1)
    torch.testing.assert_close(sums, torch.zeros_like(sums), atol=1e-9, rtol=0)


@FAST
@given(grouped_rewards(), st.data())
def test_group_advantages_invariant_to_constant_per_group(case, data):
    rewards, group_size, valid = case
    shifts = data.draw(
        st.lists(
            grid_reward,
            min_size=rewards.numel() // group_size,
            max_size=rewards.numel() // group_size,
        )
    )
    shifted = rewards + torch.tensor(shifts, dtype=rewards.dtype).repeat_interleave(group_size)

    before = group_relative_advantages(rewards, group_size=group_size, valid=valid)
    after = group_relative_advantages(shifted, group_size=group_size, valid=valid)

    torch.testing.assert_close(after, before)


@FAST
@given(grouped_rewards(), st.sampled_from(["group", "batch", "none"]))
def test_group_advantages_zero_for_uniform_groups(case, scale):
    rewards, group_size, valid = case
    uniform = rewards.reshape(-1, group_size)[:, :1].expand(-1, group_size).reshape(-1)

    advantages = group_relative_advantages(uniform, group_size=group_size, valid=valid, scale=scale)

    assert torch.equal(advantages, torch.zeros_like(advantages))


@FAST
@given(grouped_rewards(), st.sampled_from([0.5, 2.0, 8.0]))
def test_group_advantages_invariant_to_positive_reward_scale(case, factor):
    rewards, group_size, valid = case

    before = group_relative_advantages(rewards, group_size=group_size, valid=valid, eps=0.0)
    after = group_relative_advantages(rewards * factor, group_size=group_size, valid=valid, eps=0.0)

    torch.testing.assert_close(after, before)


@FAST
@given(grouped_rewards())
def test_group_advantages_have_unit_population_std_in_informative_groups(case):
    rewards, group_size, valid = case

    advantages = group_relative_advantages(rewards, group_size=group_size, valid=valid, eps=0.0)

    for a, r, m in zip(
        advantages.reshape(-1, group_size),
        rewards.reshape(-1, group_size),
        valid.reshape(-1, group_size),
        strict=True,
    ):
        if m.sum() >= 2 and r[m].unique().numel() > 1:
            torch.testing.assert_close(a[m].std(unbiased=False), torch.tensor(1.0, dtype=a.dtype))
        assert torch.all(a[~m] == 0)


@pytest.mark.parametrize("group_size", [1, 2, 4, 8])
def test_group_advantages_match_reference_loop(group_size):
    gen = torch.Generator().manual_seed(group_size)
    rewards = torch.randint(0, 3, (4 * group_size,), generator=gen).to(torch.float64)
    valid = torch.rand(4 * group_size, generator=gen) > 0.2

    advantages = group_relative_advantages(rewards, group_size=group_size, valid=valid, eps=1e-6)

    expected = torch.zeros_like(rewards)
    for start in range(0, rewards.numel(), group_size):
        idx = [i for i in range(start, start + group_size) if valid[i]]
        vals = [float(rewards[i]) for i in idx]
        if len(vals) < 2 or max(vals) == min(vals):
            continue
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        for i in idx:
            expected[i] = (float(rewards[i]) - mean) / (std + 1e-6)
    torch.testing.assert_close(advantages, expected)


# --- group_relative_advantages: errors --------------------------------------------------------


def test_group_advantages_indivisible_batch_raises_with_shape():
    with pytest.raises(ValueError, match=r"\(5,\).*group_size=2"):
        group_relative_advantages(torch.zeros(5), group_size=2)


def test_group_advantages_rank_two_rewards_raise_with_shape():
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        group_relative_advantages(torch.zeros(2, 2), group_size=2)


def test_group_advantages_integer_rewards_raise():
    with pytest.raises(ValueError, match="floating"):
        group_relative_advantages(torch.tensor([1, 0]), group_size=2)


@pytest.mark.parametrize(
    "valid", [torch.ones(3, dtype=torch.bool), torch.ones(4), torch.ones(2, 2, dtype=torch.bool)]
)
def test_group_advantages_bad_valid_mask_raises(valid):
    with pytest.raises(ValueError, match="valid"):
        group_relative_advantages(torch.zeros(4), group_size=2, valid=valid)


def test_group_advantages_unknown_scale_raises():
    with pytest.raises(ValueError, match="scale"):
        group_relative_advantages(torch.zeros(4), group_size=2, scale="tokens")  # type: ignore[arg-type]


def test_group_advantages_zero_group_size_raises():
    with pytest.raises(ValueError, match="group_size=0"):
        group_relative_advantages(torch.zeros(4), group_size=0)


# --- generalized_advantage_estimation ---------------------------------------------------------


def _toy_rewards_values() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[0.5, 1.0, 1.5]])


def test_gae_three_step_terminated_toy_matches_hand_math():
    rewards, values = _toy_rewards_values()
    terminated = torch.tensor([[False, False, True]])
    # δ = [1 + .9·1 − .5, 0 + .9·1.5 − 1, 2 − 1.5] = [1.4, .35, .5]; γλ = .72
    # Â2 = .5, Â1 = .35 + .72·.5 = .71, Â0 = 1.4 + .72·.71 = 1.9112

    advantages, returns = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.8, last_value=torch.tensor([99.0])
    )

    torch.testing.assert_close(advantages, torch.tensor([[1.9112, 0.71, 0.5]]))
    torch.testing.assert_close(returns, torch.tensor([[2.4112, 1.71, 2.0]]))


def test_gae_truncated_episode_bootstraps_from_last_value():
    rewards, values = _toy_rewards_values()
    terminated = torch.zeros(1, 3, dtype=torch.bool)
    # δ2 = 2 + .9·2 − 1.5 = 2.3; Â1 = .35 + .72·2.3 = 2.006; Â0 = 1.4 + .72·2.006 = 2.84432

    advantages, _ = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.8, last_value=torch.tensor([2.0])
    )

    torch.testing.assert_close(advantages, torch.tensor([[2.84432, 2.006, 2.3]]))


def test_gae_padding_steps_are_zero_and_do_not_change_real_steps():
    rewards = torch.tensor([[1.0, 0.0, 7.0], [1.0, 0.0, 2.0]])
    values = torch.tensor([[0.5, 1.0, -3.0], [0.5, 1.0, 1.5]])
    terminated = torch.tensor([[False, False, True], [False, False, False]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    last_value = torch.tensor([2.0, 2.0])

    advantages, returns = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.8, last_value=last_value, mask=mask
    )
    short, short_returns = generalized_advantage_estimation(
        rewards[:1, :2],
        values[:1, :2],
        terminated[:1, :2],
        gamma=0.9,
        gae_lambda=0.8,
        last_value=last_value[:1],
    )

    assert advantages[0, 2] == 0 and returns[0, 2] == 0
    torch.testing.assert_close(advantages[0, :2], short[0])
    torch.testing.assert_close(returns[0, :2], short_returns[0])


def test_gae_lambda_zero_is_one_step_td_error():
    rewards, values = _toy_rewards_values()
    terminated = torch.tensor([[False, False, True]])

    advantages, _ = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.0, last_value=torch.tensor([0.0])
    )

    torch.testing.assert_close(advantages, torch.tensor([[1.4, 0.35, 0.5]]))


def test_gae_gamma_lambda_one_gives_monte_carlo_return_minus_value():
    rewards, values = _toy_rewards_values()
    terminated = torch.tensor([[False, False, True]])

    advantages, returns = generalized_advantage_estimation(
        rewards, values, terminated, gamma=1.0, gae_lambda=1.0, last_value=torch.tensor([5.0])
    )

    torch.testing.assert_close(returns, torch.tensor([[3.0, 2.0, 2.0]]))
    torch.testing.assert_close(advantages, returns - values)


def _reference_gae(rewards, values, terminated, next_values, mask, gamma, lam):
    """Paper form, one entry at a time: Â_t = Σ_l (γλ)^l δ_{t+l} until the episode ends."""
    n_rows, n_steps = len(rewards), len(rewards[0])
    advantages = [[0.0] * n_steps for _ in range(n_rows)]
    for n in range(n_rows):
        for t in range(n_steps):
            if not mask[n][t]:
                continue
            total, weight = 0.0, 1.0
            for k in range(t, n_steps):
                if not mask[n][k]:
                    break
                alive = 0.0 if terminated[n][k] else 1.0
                delta = rewards[n][k] + gamma * alive * next_values[n][k] - values[n][k]
                total += weight * delta
                if terminated[n][k]:
                    break
                weight *= gamma * lam
            advantages[n][t] = total
    return torch.tensor(advantages, dtype=torch.float64)


@pytest.mark.parametrize("n_rows,n_steps", [(1, 1), (3, 5), (8, 17)])
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (1.0, 1.0), (0.5, 0.0)])
def test_gae_vectorised_matches_reference_loop(n_rows, n_steps, gamma, lam):
    gen = torch.Generator().manual_seed(n_rows * 100 + n_steps)
    rewards = torch.randn(n_rows, n_steps, generator=gen, dtype=torch.float64)
    values = torch.randn(n_rows, n_steps, generator=gen, dtype=torch.float64)
    lengths = torch.randint(1, n_steps + 1, (n_rows,), generator=gen)
    mask = torch.arange(n_steps)[None, :] < lengths[:, None]
    terminated = (torch.rand(n_rows, n_steps, generator=gen) < 0.2) & mask
    last_value = torch.randn(n_rows, generator=gen, dtype=torch.float64)
    next_values = torch.cat([values[:, 1:], torch.zeros(n_rows, 1, dtype=torch.float64)], dim=1)
    next_values[torch.arange(n_rows), lengths - 1] = last_value

    advantages, returns = generalized_advantage_estimation(
        rewards, values, terminated, gamma=gamma, gae_lambda=lam, last_value=last_value, mask=mask
    )

    expected = _reference_gae(
        rewards.tolist(),
        values.tolist(),
        terminated.tolist(),
        next_values.tolist(),
        mask.tolist(),
        gamma,
        lam,
    )
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, torch.where(mask, expected + values, 0.0))


def test_gae_next_values_and_last_value_agree():
    rewards, values = _toy_rewards_values()
    terminated = torch.zeros(1, 3, dtype=torch.bool)
    next_values = torch.tensor([[1.0, 1.5, 2.0]])

    from_last = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.8, last_value=torch.tensor([2.0])
    )
    from_next = generalized_advantage_estimation(
        rewards, values, terminated, gamma=0.9, gae_lambda=0.8, next_values=next_values
    )

    torch.testing.assert_close(from_next, from_last)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({}, "exactly one"),
        ({"last_value": torch.zeros(2), "next_values": torch.zeros(2, 3)}, "exactly one"),
        ({"last_value": torch.zeros(3)}, r"last_value must be \(2,\)"),
        ({"next_values": torch.zeros(2, 2)}, r"\(2, 3\)"),
        ({"last_value": torch.zeros(2), "mask": torch.ones(2, 3)}, "mask"),
        (
            {"last_value": torch.zeros(2), "mask": torch.tensor([[True, False, True]] * 2)},
            "right-padded",
        ),
    ],
)
def test_gae_bad_arguments_raise(kwargs, match):
    rewards = torch.zeros(2, 3)

    with pytest.raises(ValueError, match=match):
        generalized_advantage_estimation(
            rewards,
            rewards,
            torch.zeros(2, 3, dtype=torch.bool),
            gamma=0.9,
            gae_lambda=0.9,
            **kwargs,
        )


def test_gae_unequal_shapes_raise_with_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        generalized_advantage_estimation(
            torch.zeros(2, 3),
            torch.zeros(2, 4),
            torch.zeros(2, 3, dtype=torch.bool),
            gamma=0.9,
            gae_lambda=0.9,
            last_value=torch.zeros(2),
        )


def test_gae_non_bool_terminated_raises():
    with pytest.raises(ValueError, match="terminated"):
        generalized_advantage_estimation(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            gamma=0.9,
            gae_lambda=0.9,
            last_value=torch.zeros(2),
        )


@pytest.mark.parametrize("gamma,lam", [(1.1, 0.9), (0.9, -0.1)])
def test_gae_out_of_range_discount_raises(gamma, lam):
    with pytest.raises(ValueError, match="gamma"):
        generalized_advantage_estimation(
            torch.zeros(1, 2),
            torch.zeros(1, 2),
            torch.zeros(1, 2, dtype=torch.bool),
            gamma=gamma,
            gae_lambda=lam,
            last_value=torch.zeros(1),
        )


# --- masked_whiten, broadcast_to_tokens ------------------------------------------------------


def test_masked_whiten_has_zero_mean_unit_variance_on_mask():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=gen, dtype=torch.float64) * 3 + 2
    mask = torch.rand(4, 6, generator=gen) > 0.3

    y = masked_whiten(x, mask)

    torch.testing.assert_close(y[mask].mean(), torch.tensor(0.0, dtype=torch.float64))
    torch.testing.assert_close(
        y[mask].var(unbiased=False), torch.tensor(1.0, dtype=torch.float64), atol=1e-6, rtol=0
    )
    assert torch.all(y[~mask] == 0)


def test_masked_whiten_without_mean_shift_keeps_mean():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    mask = torch.tensor([[True, True, False]])

    y = masked_whiten(x, mask, shift_mean=False, eps=1e-12)

    # mean 2, std 1: whitened [-1, 1], plus the mean again
    torch.testing.assert_close(y, torch.tensor([[1.0, 3.0, 0.0]]))


def test_masked_whiten_ignores_values_off_the_mask():
    x = torch.tensor([[1.0, 3.0, 5.0]])
    mask = torch.tensor([[True, True, False]])

    changed = masked_whiten(x.where(mask, torch.tensor(1e6)), mask)

    torch.testing.assert_close(changed, masked_whiten(x, mask))


def test_masked_whiten_empty_mask_gives_zeros():
    y = masked_whiten(torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.bool))

    assert torch.equal(y, torch.zeros(2, 3))


def test_masked_whiten_bad_mask_raises_with_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        masked_whiten(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.bool))


def test_broadcast_to_tokens_copies_onto_mask_only():
    mask = torch.tensor([[True, True, False], [False, True, True]])

    tokens = broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask)

    torch.testing.assert_close(tokens, torch.tensor([[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]]))


@pytest.mark.parametrize(
    "advantages,mask",
    [
        (torch.zeros(2, 1), torch.ones(2, 3, dtype=torch.bool)),
        (torch.zeros(3), torch.ones(2, 3, dtype=torch.bool)),
        (torch.zeros(2), torch.ones(2, 3)),
    ],
)
def test_broadcast_to_tokens_bad_shapes_raise(advantages, mask):
    with pytest.raises(ValueError, match=r"\("):
        broadcast_to_tokens(advantages, mask)


# --- GAE: properties over multi-turn episodes (turn level) ------------------------------------


@st.composite
def turn_episodes(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    """Right-padded episodes of 1..S turns: each ends terminated or truncated (bootstrapped)."""
    n = draw(st.integers(min_value=1, max_value=4))
    s = draw(st.integers(min_value=1, max_value=6))
    lengths = draw(st.lists(st.integers(1, s), min_size=n, max_size=n))
    ends_terminal = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    grid = st.lists(grid_reward, min_size=n * s, max_size=n * s)
    mask = torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]
    is_last = torch.arange(s)[None, :] == (torch.tensor(lengths) - 1)[:, None]
    return {
        "rewards": torch.tensor(draw(grid), dtype=torch.float64).reshape(n, s),
        "values": torch.tensor(draw(grid), dtype=torch.float64).reshape(n, s),
        "terminated": is_last & torch.tensor(ends_terminal)[:, None],
        "last_value": torch.tensor(draw(st.lists(grid_reward, min_size=n, max_size=n))).double(),
        "mask": mask,
    }


def _discounted_returns(episode: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
    """R_t = Σ_{k≥t} γ^{k−t} r_k (+ γ^{L−t} V_last when truncated), one entry at a time."""
    rewards, mask, terminated = episode["rewards"], episode["mask"], episode["terminated"]
    out = torch.zeros_like(rewards)
    for n in range(rewards.shape[0]):
        length = int(mask[n].sum())
        running = 0.0 if bool(terminated[n, length - 1]) else float(episode["last_value"][n])
        for t in reversed(range(length)):
            running = float(rewards[n, t]) + gamma * running
            out[n, t] = running
    return out


@FAST
@given(episode=turn_episodes())
def test_gae_lambda_one_gamma_one_is_return_minus_value(episode):
    advantages, returns = generalized_advantage_estimation(
        episode["rewards"],
        episode["values"],
        episode["terminated"],
        gamma=1.0,
        gae_lambda=1.0,
        last_value=episode["last_value"],
        mask=episode["mask"],
    )

    expected = _discounted_returns(episode, gamma=1.0)
    torch.testing.assert_close(returns, expected)
    torch.testing.assert_close(
        advantages, torch.where(episode["mask"], expected - episode["values"], 0.0)
    )


@FAST
@given(episode=turn_episodes(), gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_gae_lambda_one_is_discounted_return_minus_value_for_any_gamma(episode, gamma):
    advantages, _ = generalized_advantage_estimation(
        episode["rewards"],
        episode["values"],
        episode["terminated"],
        gamma=gamma,
        gae_lambda=1.0,
        last_value=episode["last_value"],
        mask=episode["mask"],
    )

    expected = _discounted_returns(episode, gamma) - episode["values"]
    torch.testing.assert_close(advantages, torch.where(episode["mask"], expected, 0.0))


@FAST
@given(episode=turn_episodes(), gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_gae_lambda_zero_is_td_error_per_turn(episode, gamma):
    rewards, values, mask = episode["rewards"], episode["values"], episode["mask"]
    is_last = mask & ~torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1)
    next_values = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)
    next_values = torch.where(is_last, episode["last_value"][:, None], next_values)
    alive = (~episode["terminated"]).double()

    advantages, returns = generalized_advantage_estimation(
        rewards,
        values,
        episode["terminated"],
        gamma=gamma,
        gae_lambda=0.0,
        last_value=episode["last_value"],
        mask=mask,
    )

    td_error = rewards + gamma * alive * next_values - values
    torch.testing.assert_close(advantages, torch.where(mask, td_error, 0.0))
    torch.testing.assert_close(returns, torch.where(mask, td_error + values, 0.0))


@FAST
@given(episode=turn_episodes(), lam=st.sampled_from([0.0, 0.5, 0.95, 1.0]))
def test_gae_value_of_a_terminated_episodes_last_value_is_never_read(episode, lam):
    kwargs = {"gamma": 0.9, "gae_lambda": lam, "mask": episode["mask"]}
    args = (episode["rewards"], episode["values"], episode["terminated"])

    first, _ = generalized_advantage_estimation(*args, last_value=episode["last_value"], **kwargs)
    other, _ = generalized_advantage_estimation(
        *args, last_value=episode["last_value"] + 1000.0, **kwargs
    )

    ended = episode["terminated"].any(dim=1)
    torch.testing.assert_close(first[ended], other[ended])
