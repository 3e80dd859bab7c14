"""Advantage estimators: group-relative (GRPO), GAE (PPO), whitening and token broadcast.

Shape legend (see ``dreamgym/rl/shapes.md``): ``B`` tasks per batch, ``G`` = ``group_size``
rollouts per task, ``N = B·G`` rollouts in group-contiguous order (rows ``[g·G, (g+1)·G)`` belong
to task ``g``), ``T`` token positions, ``S`` environment steps. Masks are ``bool``.

All functions are pure: they never modify their inputs and hold no state.

Usage:
    >>> import torch
    >>> group_relative_advantages(torch.tensor([1.0, 0.0]), group_size=2, eps=0.0)
    tensor([ 1., -1.])
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = [
    "broadcast_to_tokens",
    "generalized_advantage_estimation",
    "group_relative_advantages",
    "masked_whiten",
]

AdvantageScale = Literal["group", "batch", "none"]
_SCALES = ("group", "batch", "none")


def _check_bool_mask(name: str, mask: torch.Tensor, shape: torch.Size) -> None:
    if mask.shape != shape or mask.dtype != torch.bool:
        raise ValueError(
            f"{name} must be a bool tensor of shape {tuple(shape)}, "
            f"got {mask.dtype} of shape {tuple(mask.shape)}"
        )


def _check_group_inputs(
    rewards: torch.Tensor, group_size: int, scale: str, eps: float, valid: torch.Tensor | None
) -> None:
    if rewards.ndim != 1 or not rewards.is_floating_point():
        raise ValueError(
            f"rewards must be a floating (N,) tensor, got {rewards.dtype} {tuple(rewards.shape)}"
        )
    if group_size < 1 or rewards.shape[0] % group_size != 0:
        raise ValueError(
            f"rewards of shape {tuple(rewards.shape)} cannot be split into groups of "
            f"group_size={group_size} (N % group_size must be 0, group_size >= 1)"
        )
    if scale not in _SCALES:
        raise ValueError(f"scale must be one of {_SCALES}, got {scale!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if valid is not None:
        _check_bool_mask("valid", valid, rewards.shape)


def group_relative_advantages(
    rewards: torch.Tensor,
    *,
    group_size: int,
    scale: AdvantageScale = "group",
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Group-relative advantages: each rollout's reward against its group's other rollouts.

    A_i = (r_i − mean_g(r)) / (std_g(r) + eps), with mean and std taken over the valid members
    of rollout i's group g.

    Args:
        rewards: (N,) float, group-contiguous outcome rewards, any real scale. NaN marks a
            missing reward and is treated exactly like ``valid=False``.
        group_size: G, rollouts per task (>= 1); N must be divisible by it.
        scale: the denominator. ``"group"``: std of the group (GRPO). ``"batch"``: std of all
            valid rewards in the batch (more robust when groups are small). ``"none"``: no
            division, only the group mean is subtracted (Dr. GRPO).
        eps: ε >= 0 added to the std; keeps near-uniform groups finite. Unused for "none".
        valid: (N,) bool or None. False for failed or masked rollouts. None means all valid.

    Returns:
        (N,) advantages in the dtype of ``rewards``.

    Raises:
        ValueError: if ``rewards`` is not a floating (N,) tensor, N % group_size != 0,
            ``valid`` has another shape or dtype, ``scale`` is unknown or ``eps < 0``.

    Notes:
        - Std is the **population** std (divide by n, as in paper Eq. 7), not Bessel's n − 1:
          a group of two rewards [1, 0] gives advantages [+1, −1] (for eps = 0).
        - Invalid rollouts get advantage 0 and do not enter the mean or std.
        - A group with fewer than 2 valid members, or whose valid rewards are all equal, gets
          0 for every member (it carries no relative signal). The equality test is exact, so a
          uniform group gives exact zeros for any eps.

    References:
        GRPO, Shao et al. 2024, arXiv 2402.03300 (§4.1.2); DreamGym arXiv 2511.03773 §3.2;
        Dr. GRPO (``scale="none"``), Liu et al. 2025, arXiv 2503.20783.
    """
    _check_group_inputs(rewards, group_size, scale, eps, valid)
    is_valid = ~torch.isnan(rewards) if valid is None else valid & ~torch.isnan(rewards)
    r = torch.where(is_valid, rewards, 0.0).reshape(-1, group_size)  # (B, G)
    m = is_valid.reshape(-1, group_size)  # (B, G)
    count = m.sum(dim=1, keepdim=True)  # (B, 1)
    mean = r.sum(dim=1, keepdim=True) / count.clamp(min=1)  # (B, 1)
    centered = torch.where(m, r - mean, 0.0)  # (B, G)
    hi = torch.where(m, r, -torch.inf).amax(dim=1, keepdim=True)  # (B, 1)
    lo = torch.where(m, r, torch.inf).amin(dim=1, keepdim=True)  # (B, 1)
    informative = m & (count >= 2) & (hi > lo)  # (B, G)
    if scale == "group":
        denom = (centered.square().sum(dim=1, keepdim=True) / count.clamp(min=1)).sqrt() + eps
    elif scale == "batch":
        denom = _population_std(rewards, is_valid) + eps
    else:
        denom = torch.ones_like(mean)
    denom = torch.where(informative, denom, 1.0)  # (B, G), never 0 where it is used
    return torch.where(informative, centered / denom, 0.0).reshape(-1)  # (N,)


def _population_std(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """0-d population std of ``x`` over ``mask`` (0 when the mask is empty)."""
    count = mask.sum().clamp(min=1)
    mean = torch.where(mask, x, 0.0).sum() / count
    return (torch.where(mask, x - mean, 0.0).square().sum() / count).sqrt()


def _check_gae_inputs(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    next_values: torch.Tensor | None,
    last_value: torch.Tensor | None,
    mask: torch.Tensor | None,
) -> None:
    shape = rewards.shape
    if rewards.ndim != 2 or values.shape != shape:
        raise ValueError(
            f"rewards and values must both be (N, S); got rewards {tuple(shape)}, "
            f"values {tuple(values.shape)}"
        )
    _check_bool_mask("terminated", terminated, shape)
    if (next_values is None) == (last_value is None):
        raise ValueError("pass exactly one of next_values (N, S) or last_value (N,)")
    if next_values is not None and next_values.shape != shape:
        raise ValueError(f"next_values must be {tuple(shape)}, got {tuple(next_values.shape)}")
    if last_value is not None and last_value.shape != shape[:1]:
        raise ValueError(f"last_value must be {tuple(shape[:1])}, got {tuple(last_value.shape)}")
    if mask is not None:
        _check_bool_mask("mask", mask, shape)
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError("mask must be right-padded: no real step may follow a padding step")


def generalized_advantage_estimation(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
    next_values: torch.Tensor | None = None,
    last_value: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over the environment steps of each trajectory.

    δ_t = r_t + γ·(1 − terminated_t)·V(s_{t+1}) − V(s_t)
    Â_t = δ_t + γλ·(1 − terminated_t)·Â_{t+1}   (Â = 0 past the last real step)
    returns_t = Â_t + V(s_t)

    Equivalently Â_t = Σ_{l≥0} (γλ)^l δ_{t+l} up to the episode end (paper §4.1).

    Args:
        rewards: (N, S) float, r_t of the transition taken at step t.
        values: (N, S) float, V(s_t) of the observation at step t.
        terminated: (N, S) bool, True where step t ended the episode in a terminal MDP state.
            Truncation (step or time limit) is not termination: it still bootstraps.
        gamma: discount γ in [0, 1].
        gae_lambda: GAE λ in [0, 1]; 0 gives one-step TD, 1 gives Monte-Carlo minus V.
        next_values: (N, S) float, V(s_{t+1}) for every step. Use it when the value of the final
            (truncated) observation is known per step.
        last_value: (N,) float, V of the observation after each trajectory's last real step;
            then V(s_{t+1}) = values[:, t+1] inside the trajectory. Pass exactly one of
            ``next_values`` and ``last_value``.
        mask: (N, S) bool or None, True on real steps, right-padded. None means no padding.

    Returns:
        ``(advantages, returns)``, both (N, S) in the dtype of ``values``; 0 on padding.

    Raises:
        ValueError: on unequal or non-(N, S) shapes, non-bool masks, a mask that is not
            right-padded, both or neither of ``next_values``/``last_value``, or γ, λ outside [0, 1].

    Notes:
        Computed by a backward recursion over S (vectorised over N); call it under
        ``torch.no_grad()`` in a trainer. Values at padding steps are never read.

    References:
        Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
        Estimation", arXiv 1506.02438; PPO arXiv 1707.06347.
    """
    _check_gae_inputs(rewards, values, terminated, next_values, last_value, mask)
    if not (0.0 <= gamma <= 1.0 and 0.0 <= gae_lambda <= 1.0):
        raise ValueError(f"gamma and gae_lambda must be in [0, 1], got {gamma}, {gae_lambda}")
    real = torch.ones_like(terminated) if mask is None else mask  # (N, S)
    if next_values is None:
        is_last = real & ~torch.cat([real[:, 1:], torch.zeros_like(real[:, :1])], dim=1)
        shifted = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)
        next_values = torch.where(is_last, last_value[:, None], shifted)  # type: ignore[index]
    alive = (~terminated).to(values.dtype)  # (N, S)
    deltas = rewards + gamma * alive * next_values - values  # (N, S)
    running = torch.zeros_like(values[:, 0])  # (N,), Â_{t+1}; 0 past the end
    steps: list[torch.Tensor] = []
    for t in reversed(range(values.shape[1])):
        carried = deltas[:, t] + gamma * gae_lambda * alive[:, t] * running  # (N,)
        running = torch.where(real[:, t], carried, 0.0)
        steps.append(running)
    advantages = torch.stack(steps[::-1], dim=1)  # (N, S)
    return advantages, torch.where(real, advantages + values, 0.0)


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Whiten ``x`` with the mean and variance of its masked entries.

    y = (x − mean_mask(x)) / sqrt(var_mask(x) + eps), plus mean_mask(x) again if not shift_mean.

    Args:
        x: any shape, float (typically (N, T) token advantages).
        mask: bool, same shape as ``x``; only True entries enter the statistics.
        shift_mean: if False, the mean is added back (only the scale is normalised).
        eps: ε > 0 under the square root.

    Returns:
        Tensor of ``x``'s shape and dtype; 0 where ``mask`` is False.

    Raises:
        ValueError: if ``mask`` is not a bool tensor of ``x``'s shape, or ``eps <= 0``.

    Notes:
        Population variance (divide by the masked count). An all-False mask gives all zeros.
    """
    _check_bool_mask("mask", mask, x.shape)
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    count = mask.sum().clamp(min=1)
    mean = torch.where(mask, x, 0.0).sum() / count
    var = torch.where(mask, x - mean, 0.0).square().sum() / count
    whitened = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(mask, whitened, 0.0)


def broadcast_to_tokens(advantages: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Copy one advantage per rollout onto every policy-generated token of that rollout.

    A_{n,t} = A_n if action_mask_{n,t} else 0.

    Args:
        advantages: (N,) float, one value per rollout (e.g. from ``group_relative_advantages``).
        action_mask: (N, T) bool, True on policy-generated tokens.

    Returns:
        (N, T) in the dtype of ``advantages``; 0 off the mask.

    Raises:
        ValueError: if ``advantages`` is not (N,) or ``action_mask`` is not a bool (N, T).
    """
    ok = advantages.ndim == 1 and action_mask.ndim == 2
    if not ok or advantages.shape[0] != action_mask.shape[0] or action_mask.dtype != torch.bool:
        raise ValueError(
            f"expected advantages (N,) and a bool action_mask (N, T), got advantages "
            f"{tuple(advantages.shape)} and action_mask {action_mask.dtype} "
            f"{tuple(action_mask.shape)}"
        )
    return torch.where(action_mask, advantages[:, None], 0.0)
