"""Policy and value losses: clipped ratio objective, KL estimators, aggregation, GRPO composition.

Shape legend (see ``dreamgym/rl/shapes.md``): ``N`` rollouts, ``T`` token positions (or ``S``
environment steps for value losses). ``action_mask`` (N, T) bool is True on policy-generated
tokens. Losses return ``(loss, stats)``; ``stats`` holds detached 0-d tensors named as in the
glossary (``clip_fraction``, ``ratio_mean``, ``approx_kl``, ``kl``, ``policy_loss``).

Masked positions contribute exactly 0 to every loss and receive exactly 0 gradient, whatever
values (even ±inf) the inputs hold there.

Usage:
    >>> import torch
    >>> lp = torch.zeros(2, 3, requires_grad=True)
    >>> loss, stats = grpo_loss(
    ...     lp, lp.detach(), None, torch.tensor([1.0, -1.0]), torch.ones(2, 3, dtype=torch.bool),
    ...     epsilon_low=0.2, epsilon_high=0.2, beta=0.0,
    ... )
    >>> float(loss.detach()), float(stats["clip_fraction"])
    (0.0, 0.0)
"""

from __future__ import annotations

from typing import Literal

import torch

from dreamgym.rl.advantages import broadcast_to_tokens

__all__ = [
    "aggregate_loss",
    "clipped_policy_loss",
    "clipped_value_loss",
    "grpo_loss",
    "kl_penalty",
]

KLEstimator = Literal["k1", "k2", "k3"]
Aggregation = Literal["token_mean", "sequence_mean", "sum_over_max_tokens"]
_ESTIMATORS = ("k1", "k2", "k3")
_AGGREGATIONS = ("token_mean", "sequence_mean", "sum_over_max_tokens")
Stats = dict[str, torch.Tensor]


def _check_same_shape(mask: torch.Tensor, **tensors: torch.Tensor) -> None:
    """All tensors (N, T) like ``mask``, and ``mask`` bool; else ValueError naming the shapes."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if mask.ndim != 2 or any(s != tuple(mask.shape) for s in shapes.values()):
        raise ValueError(f"expected equal (N, T) shapes, got {shapes} and mask {tuple(mask.shape)}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool, got {mask.dtype}")


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over ``mask``; 0 (with a graph) when the mask is empty."""
    return torch.where(mask, x, 0.0).sum() / mask.sum().clamp(min=1)


def clipped_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
) -> tuple[torch.Tensor, Stats]:
    """Per-token clipped importance-ratio surrogate (PPO), with asymmetric clip bounds (DAPO).

    ρ = exp(log_probs − old_log_probs)
    loss = −min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)

    Args:
        log_probs: (N, T) float, log π_θ of the taken tokens (carries the gradient).
        old_log_probs: (N, T) float, log π_θ_old of the same tokens (behaviour policy); treated
            as a constant (detached).
        advantages: (N, T) float, per-token advantages; treated as a constant (detached).
        action_mask: (N, T) bool, True on policy-generated tokens.
        epsilon_low: ε_low >= 0, lower clip range (ratio floor 1 − ε_low, must stay > 0).
        epsilon_high: ε_high >= 0, upper clip range (ratio ceiling 1 + ε_high).

    Returns:
        ``(per_token_loss, stats)``. ``per_token_loss`` is (N, T), 0 off the mask; reduce it
        with ``aggregate_loss``. ``stats``: ``clip_fraction`` (share of masked tokens whose
        gradient is cut by the clip), ``ratio_mean`` (masked mean of ρ), ``approx_kl`` (masked
        mean of the k3 estimator of KL(π_old ‖ π_θ): (ρ − 1) − log ρ).

    Raises:
        ValueError: on unequal or non-(N, T) shapes, a non-bool mask, or ε_low outside [0, 1),
            ε_high < 0.

    Notes:
        A token is clipped when ρ > 1 + ε_high with A > 0, or ρ < 1 − ε_low with A < 0; there
        the loss is constant in ρ and its gradient is exactly 0.

    References:
        PPO, Schulman et al. 2017, arXiv 1707.06347; DAPO "clip-higher", Yu et al. 2025,
        arXiv 2503.14476; k3 estimator, http://joschu.net/blog/kl-approx.html.
    """
    _check_same_shape(
        action_mask, log_probs=log_probs, old_log_probs=old_log_probs, advantages=advantages
    )
    if not (0.0 <= epsilon_low < 1.0 and epsilon_high >= 0.0):
        raise ValueError(
            f"need 0 <= epsilon_low < 1 and epsilon_high >= 0, got {epsilon_low}, {epsilon_high}"
        )
    advantages = torch.where(action_mask, advantages.detach(), 0.0)  # (N, T)
    log_ratio = torch.where(action_mask, log_probs - old_log_probs.detach(), 0.0)  # (N, T)
    ratio = torch.exp(log_ratio)  # (N, T), exactly 1 off the mask
    clipped_ratio = ratio.clamp(1.0 - epsilon_low, 1.0 + epsilon_high)
    per_token = -torch.minimum(ratio * advantages, clipped_ratio * advantages)
    is_clipped = ((ratio > 1.0 + epsilon_high) & (advantages > 0)) | (
        (ratio < 1.0 - epsilon_low) & (advantages < 0)
    )
    stats = {
        "clip_fraction": _masked_mean(is_clipped.to(ratio.dtype), action_mask).detach(),
        "ratio_mean": _masked_mean(ratio, action_mask).detach(),
        "approx_kl": _masked_mean((ratio - 1.0) - log_ratio, action_mask).detach(),
    }
    return torch.where(action_mask, per_token, 0.0), stats


def kl_penalty(
    log_probs: torch.Tensor, ref_log_probs: torch.Tensor, *, estimator: KLEstimator = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) from tokens sampled by π_θ.

    With log r = ref_log_probs − log_probs:
    k1 = −log r (unbiased, high variance, can be negative);
    k2 = ½ (log r)² (biased, low variance, ≥ 0);
    k3 = exp(log r) − log r − 1 (unbiased, low variance, ≥ 0; the GRPO choice).

    Args:
        log_probs: (N, T) float, log π_θ of the sampled tokens (carries the gradient).
        ref_log_probs: (N, T) float, log π_ref of the same tokens (reference policy).
        estimator: ``"k1"``, ``"k2"`` or ``"k3"``.

    Returns:
        (N, T) per-token estimates; mask and reduce them with ``aggregate_loss``.

    Raises:
        ValueError: if the shapes differ or are not (N, T), or ``estimator`` is unknown.

    Notes:
        k3 overflows in float32 when ref_log_probs − log_probs > ~88; mask such padding
        positions out before calling (``grpo_loss`` does).

    References:
        Schulman 2020, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html;
        GRPO arXiv 2402.03300 Eq. 4.
    """
    if log_probs.ndim != 2 or log_probs.shape != ref_log_probs.shape:
        raise ValueError(
            f"expected equal (N, T) shapes, got log_probs {tuple(log_probs.shape)} "
            f"and ref_log_probs {tuple(ref_log_probs.shape)}"
        )
    if estimator not in _ESTIMATORS:
        raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
    log_r = ref_log_probs - log_probs  # (N, T)
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r.square()
    return torch.exp(log_r) - log_r - 1.0


def aggregate_loss(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: Aggregation,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar; the normaliser is named explicitly.

    token_mean:           Σ_{n,t} m·ℓ / Σ_{n,t} m          (DAPO; long rollouts weigh more)
    sequence_mean:        mean_n [ Σ_t m·ℓ / Σ_t m ]        (original GRPO; over non-empty rows)
    sum_over_max_tokens:  Σ_{n,t} m·ℓ / (N · max_tokens)   (Dr. GRPO; constant normaliser)

    Args:
        per_token: (N, T) float per-token loss.
        mask: (N, T) bool, True where a token counts.
        mode: one of the three names above.
        max_tokens: the generation budget per rollout (> 0); required for
            ``sum_over_max_tokens``, ignored otherwise.

    Returns:
        0-d tensor. An all-False mask gives 0 with the graph intact (zero gradient, no NaN).

    Raises:
        ValueError: on shape/dtype mismatches, an unknown ``mode``, or a missing/non-positive
            ``max_tokens`` for ``sum_over_max_tokens``.

    References:
        GRPO arXiv 2402.03300; DAPO arXiv 2503.14476 (token-level mean); Dr. GRPO
        arXiv 2503.20783 (constant normaliser).
    """
    _check_same_shape(mask, per_token=per_token)
    if mode not in _AGGREGATIONS:
        raise ValueError(f"mode must be one of {_AGGREGATIONS}, got {mode!r}")
    masked = torch.where(mask, per_token, 0.0)  # (N, T), masked NaN/inf cannot leak
    if mode == "token_mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if mode == "sequence_mean":
        lengths = mask.sum(dim=1)  # (N,)
        row_means = masked.sum(dim=1) / lengths.clamp(min=1)  # (N,)
        return row_means.sum() / (lengths > 0).sum().clamp(min=1)
    if max_tokens is None or max_tokens <= 0:
        raise ValueError(f"sum_over_max_tokens needs max_tokens > 0, got {max_tokens}")
    return masked.sum() / (per_token.shape[0] * max_tokens)


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_range: float | None = 0.2,
) -> tuple[torch.Tensor, Stats]:
    """PPO value loss with the new prediction clipped around the old one (PPO2 style).

    V_clip = V_old + clip(V − V_old, −c, c)
    loss = token_mean( ½ · max((V − R)², (V_clip − R)²) )
    With ``clip_range=None``: loss = token_mean( ½ · (V − R)² ).

    Args:
        values: (N, S) float, current value predictions V (carries the gradient).
        old_values: (N, S) float, predictions at rollout time V_old (detached).
        returns: (N, S) float, regression targets R (e.g. from GAE; detached).
        mask: (N, S) bool, True on real steps (or tokens).
        clip_range: c >= 0, in the units of the returns; None disables clipping.

    Returns:
        ``(loss, stats)``: 0-d loss (0 for an empty mask); stats ``value_clip_fraction``
        (share of masked entries where the clipped error is the larger one, i.e. the
        gradient is cut) and ``value_mean``.

    Raises:
        ValueError: on unequal or non-2-D shapes, a non-bool mask, or ``clip_range < 0``.

    References:
        PPO arXiv 1707.06347; Andrychowicz et al. 2020, "What Matters in On-Policy RL",
        arXiv 2006.05990 (value clipping).
    """
    _check_same_shape(mask, values=values, old_values=old_values, returns=returns)
    if clip_range is not None and clip_range < 0:
        raise ValueError(f"clip_range must be >= 0 or None, got {clip_range}")
    values = torch.where(mask, values, 0.0)  # masked ±inf/NaN cannot leak into the gradient
    old_values = torch.where(mask, old_values.detach(), 0.0)
    returns = torch.where(mask, returns.detach(), 0.0)
    unclipped_error = (values - returns).square()  # (N, S)
    if clip_range is None:
        clipped_error = unclipped_error
    else:
        clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)
        clipped_error = (clipped - returns).square()  # (N, S)
    loss = 0.5 * _masked_mean(torch.maximum(unclipped_error, clipped_error), mask)
    stats = {
        "value_clip_fraction": _masked_mean(
            (clipped_error > unclipped_error).to(values.dtype), mask
        ).detach(),
        "value_mean": _masked_mean(values, mask).detach(),
    }
    return loss, stats


def grpo_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor | None,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    epsilon_low: float,
    epsilon_high: float,
    beta: float,
    kl_estimator: KLEstimator = "k3",
    aggregation: Aggregation = "token_mean",
    max_tokens: int | None = None,
) -> tuple[torch.Tensor, Stats]:
    """GRPO objective: clipped policy term plus β times a KL penalty to the reference policy.

    ℓ_{n,t} = −min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)A) + β·KL_est(π_θ ‖ π_ref)
    loss = aggregate(ℓ, action_mask, mode=aggregation)

    Args:
        log_probs: (N, T) float, log π_θ of the taken tokens.
        old_log_probs: (N, T) float, behaviour-policy log-probs (detached).
        ref_log_probs: (N, T) float or None, reference-policy log-probs (detached). None is
            allowed only with ``beta == 0``.
        advantages: (N,) per rollout (broadcast over ``action_mask``) or (N, T) per token.
        action_mask: (N, T) bool, True on policy-generated tokens.
        epsilon_low: ε_low, lower clip range.
        epsilon_high: ε_high, upper clip range.
        beta: β >= 0, KL coefficient.
        kl_estimator: ``"k1"``, ``"k2"`` or ``"k3"`` (see ``kl_penalty``).
        aggregation: see ``aggregate_loss``.
        max_tokens: generation budget, for ``aggregation="sum_over_max_tokens"``.

    Returns:
        ``(loss, stats)``: 0-d loss; stats are those of ``clipped_policy_loss`` plus
        ``policy_loss`` (the aggregated policy term) and, when ``ref_log_probs`` is given,
        ``kl`` (masked token mean of the KL estimate, logged even when β = 0).

    Raises:
        ValueError: on shape errors (see the composed functions), ``beta < 0``, or ``beta > 0``
            without ``ref_log_probs``.

    References:
        GRPO, Shao et al. 2024, arXiv 2402.03300 Eq. 3; DAPO arXiv 2503.14476; DreamGym
        arXiv 2511.03773 §3.2.
    """
    if beta < 0 or (beta > 0 and ref_log_probs is None):
        raise ValueError(f"beta must be >= 0, and beta > 0 needs ref_log_probs (beta={beta})")
    if advantages.ndim == 1:
        advantages = broadcast_to_tokens(advantages, action_mask)  # (N,) -> (N, T)
    per_token, stats = clipped_policy_loss(
        log_probs,
        old_log_probs,
        advantages,
        action_mask,
        epsilon_low=epsilon_low,
        epsilon_high=epsilon_high,
    )
    stats["policy_loss"] = aggregate_loss(
        per_token, action_mask, mode=aggregation, max_tokens=max_tokens
    ).detach()
    if ref_log_probs is not None:
        _check_same_shape(action_mask, ref_log_probs=ref_log_probs)
        kl = kl_penalty(
            torch.where(action_mask, log_probs, 0.0),
            torch.where(action_mask, ref_log_probs.detach(), 0.0),
            estimator=kl_estimator,
        )  # (N, T), exactly 0 off the mask
        stats["kl"] = _masked_mean(kl, action_mask).detach()
        per_token = per_token + beta * kl
    return aggregate_loss(per_token, action_mask, mode=aggregation, max_tokens=max_tokens), stats
