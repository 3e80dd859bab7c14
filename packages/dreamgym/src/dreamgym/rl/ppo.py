"""The PPO objective: the clipped policy term and KL of GRPO, plus value loss and entropy bonus.

Shape legend (see ``dreamgym/rl/shapes.md``): ``N`` rows (turns), ``T`` token positions, ``S``
value entries per row (1 for one value per turn). ``action_mask`` (N, T) bool is True on the
agent's own tokens; ``value_mask`` (N, S) on the entries that enter the value loss. Masked
positions contribute exactly 0 and receive exactly 0 gradient.

Usage:
    >>> import torch
    >>> lp, mask = torch.zeros(1, 2, requires_grad=True), torch.tensor([[True, False]])
    >>> v = torch.zeros(1, 1, requires_grad=True)
    >>> loss, stats = ppo_loss(
    ...     lp, lp.detach(), None, torch.tensor([1.0]), mask, v, v.detach(), torch.ones(1, 1),
    ...     torch.ones(1, 1, dtype=torch.bool), epsilon_low=0.2, epsilon_high=0.2, beta=0.0,
    ...     vf_coef=0.5, vf_clip=None,
    ... )
    >>> round(float(loss), 4), round(float(stats["value_loss"]), 4)
    (-0.75, 0.5)
"""

from __future__ import annotations

import torch

from dreamgym.rl.losses import (
    Aggregation,
    KLEstimator,
    Stats,
    _check_same_shape,
    aggregate_loss,
    clipped_value_loss,
    grpo_loss,
)

__all__ = ["ppo_loss"]


def ppo_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor | None,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    value_mask: torch.Tensor,
    *,
    epsilon_low: float,
    epsilon_high: float,
    beta: float,
    vf_coef: float,
    vf_clip: float | None,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    kl_estimator: KLEstimator = "k3",
    aggregation: Aggregation = "token_mean",
    max_tokens: int | None = None,
) -> tuple[torch.Tensor, Stats]:
    """PPO objective: clipped policy term, β·KL to the reference, value loss, entropy bonus.

    L = aggregate(−min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)A) + β·KL_est, action_mask)
        + c_V · L_V(V, V_old, R; vf_clip) − c_H · aggregate(H, action_mask)

    The policy and KL terms are exactly ``grpo_loss``'s; PPO differs only in where the
    advantages come from (GAE with a learned value instead of group statistics) and in the value
    and entropy terms (cleanrl ``ppo.py``: ``pg_loss − ent_coef·entropy + vf_coef·v_loss``).

    Args:
        log_probs: (N, T) float, log π_θ of the agent's own tokens (carries the gradient).
        old_log_probs: (N, T) float, the log-probs sampled at rollout time (detached).
        ref_log_probs: (N, T) float or None, reference-policy log-probs; None only with β = 0.
        advantages: (N,) per row (broadcast over ``action_mask``) or (N, T) per token.
        action_mask: (N, T) bool, True on policy-generated tokens that carry a choice; prompt,
            observation, forced and padding tokens are False and contribute nothing.
        values: (N, S) float, V_θ predictions (carries the gradient); S = 1 for one value per
            row (one turn).
        old_values: (N, S) float, predictions at rollout time (detached).
        returns: (N, S) float, value targets R (e.g. GAE returns; detached).
        value_mask: (N, S) bool, True on entries that enter the value loss.
        epsilon_low: ε_low, lower clip range of the ratio.
        epsilon_high: ε_high, upper clip range of the ratio.
        beta: β >= 0, KL coefficient.
        vf_coef: c_V >= 0, value-loss coefficient.
        vf_clip: c >= 0 clip range of the value update (returns' units), or None for plain MSE.
        entropy: (N, T) float or None, per-token entropy of π_θ (carries the gradient).
        entropy_coef: c_H >= 0, entropy-bonus coefficient; > 0 needs ``entropy``.
        kl_estimator: ``"k1"``, ``"k2"`` or ``"k3"`` (see ``kl_penalty``).
        aggregation: token reduction of the policy, KL and entropy terms (see
            ``aggregate_loss``).
        max_tokens: generation budget, for ``aggregation="sum_over_max_tokens"``.

    Returns:
        ``(loss, stats)``: 0-d loss; stats are ``grpo_loss``'s plus ``value_loss``,
        ``value_clip_fraction``, ``value_mean`` and, when ``entropy`` is given, ``entropy``.

    Raises:
        ValueError: on shape errors (see the composed functions), negative coefficients, or
            ``entropy_coef > 0`` without ``entropy``.

    References:
        PPO, Schulman et al. 2017, arXiv 1707.06347 Eq. 9; GAE arXiv 1506.02438; DreamGym
        arXiv 2511.03773 §3.2; cleanrl ``ppo.py`` (Huang et al. 2022, JMLR 23(274)).
    """
    if vf_coef < 0 or entropy_coef < 0 or (entropy_coef > 0 and entropy is None):
        raise ValueError(
            f"need vf_coef >= 0 and entropy_coef >= 0 (> 0 needs entropy), got vf_coef={vf_coef}, "
            f"entropy_coef={entropy_coef}, entropy {'given' if entropy is not None else 'None'}"
        )
    loss, stats = grpo_loss(
        log_probs,
        old_log_probs,
        ref_log_probs,
        advantages,
        action_mask,
        epsilon_low=epsilon_low,
        epsilon_high=epsilon_high,
        beta=beta,
        kl_estimator=kl_estimator,
        aggregation=aggregation,
        max_tokens=max_tokens,
    )
    value_loss, value_stats = clipped_value_loss(
        values, old_values, returns, value_mask, clip_range=vf_clip
    )
    stats |= value_stats | {"value_loss": value_loss.detach()}
    loss = loss + vf_coef * value_loss
    if entropy is not None:
        _check_same_shape(action_mask, entropy=entropy)
        mean_entropy = aggregate_loss(entropy, action_mask, mode=aggregation, max_tokens=max_tokens)
        stats["entropy"] = mean_entropy.detach()
        loss = loss - entropy_coef * mean_entropy
    return loss, stats
