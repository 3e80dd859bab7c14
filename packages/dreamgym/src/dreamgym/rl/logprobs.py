"""Per-token log-probabilities and entropies from policy logits, optionally under a token mask.

Shape legend (see ``dreamgym/rl/shapes.md``): ``N`` rollouts, ``T`` token positions, ``V``
vocabulary size. ``allowed`` (N, T, V) bool marks the tokens constrained decoding permitted.

Numerics: reductions run in at least float32 even for bf16/fp16 logits, and the float32 copy is
made one rollout (T, V) at a time, so peak extra memory is O(T·V), not O(N·T·V).

Usage:
    >>> import torch
    >>> logits = torch.zeros(1, 1, 4)
    >>> gather_log_probs(logits, torch.tensor([[2]]))
    tensor([[-1.3863]])
"""

from __future__ import annotations

import torch

__all__ = ["entropy_from_logits", "gather_log_probs", "masked_log_probs"]


def _reduction_dtype(logits: torch.Tensor) -> torch.dtype:
    return torch.promote_types(logits.dtype, torch.float32)


def _check_logits(logits: torch.Tensor, allowed: torch.Tensor | None) -> None:
    if logits.ndim != 3 or not logits.is_floating_point():
        raise ValueError(
            f"logits must be a floating (N, T, V) tensor, got {logits.dtype} {tuple(logits.shape)}"
        )
    if allowed is not None:
        if allowed.shape != logits.shape or allowed.dtype != torch.bool:
            raise ValueError(
                f"allowed must be a bool tensor of the logits' shape {tuple(logits.shape)}, "
                f"got {allowed.dtype} {tuple(allowed.shape)}"
            )
        if bool((~allowed.any(dim=-1)).any()):
            raise ValueError("allowed must permit at least one token at every (n, t) position")


def _check_token_ids(logits: torch.Tensor, token_ids: torch.Tensor) -> None:
    if token_ids.shape != logits.shape[:2] or token_ids.is_floating_point():
        raise ValueError(
            f"token_ids must be an integer (N, T) tensor matching logits {tuple(logits.shape)}, "
            f"got {token_ids.dtype} {tuple(token_ids.shape)}"
        )
    if token_ids.numel() and (token_ids.min() < 0 or token_ids.max() >= logits.shape[-1]):
        raise ValueError(f"token_ids must lie in [0, V={logits.shape[-1]})")


def _masked_row_logits(row: torch.Tensor, allowed_row: torch.Tensor | None) -> torch.Tensor:
    """(T, V) logits of one rollout in the reduction dtype, −inf where not allowed."""
    row = row.to(_reduction_dtype(row))
    return row if allowed_row is None else row.masked_fill(~allowed_row, -torch.inf)


def masked_log_probs(
    logits: torch.Tensor, token_ids: torch.Tensor, allowed: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-probability of each chosen token under the softmax renormalised over allowed tokens.

    log π(a_t | ·) = z_{a_t} − log Σ_{v allowed} exp(z_v)

    Args:
        logits: (N, T, V) float, any floating dtype (bf16 included).
        token_ids: (N, T) integer, the chosen token at each position, in [0, V).
        allowed: (N, T, V) bool or None. None allows every token (plain log-softmax). For
            positions without a constraint (prompt, padding), pass an all-True row.

    Returns:
        (N, T) log-probs in float32 (float64 for float64 logits), differentiable w.r.t. logits.
        Exactly 0 where only one token is allowed.

    Raises:
        ValueError: on shape or dtype mismatches, token ids outside [0, V), a position with no
            allowed token, or a chosen token that is not allowed.

    Notes:
        Disallowed tokens get zero probability and zero gradient: this is invalid-action
        masking, so the policy gradient is the one of the constrained policy that acted.

    References:
        Huang & Ontañón 2020, "A Closer Look at Invalid Action Masking in Policy Gradient
        Algorithms", arXiv 2006.14171.
    """
    _check_logits(logits, allowed)
    _check_token_ids(logits, token_ids)
    if allowed is not None and not bool(allowed.gather(-1, token_ids[..., None]).all()):
        raise ValueError("a chosen token in token_ids is not allowed by the mask")
    chosen = logits.gather(-1, token_ids[..., None]).squeeze(-1)  # (N, T)
    normalisers = [
        torch.logsumexp(_masked_row_logits(logits[n], None if allowed is None else allowed[n]), -1)
        for n in range(logits.shape[0])
    ]  # N × (T,), one float32 (T, V) copy at a time
    if not normalisers:
        return chosen.to(_reduction_dtype(logits))
    return chosen.to(_reduction_dtype(logits)) - torch.stack(normalisers)


def gather_log_probs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each chosen token: a selective log-softmax.

    log π(a_t | ·) = z_{a_t} − logsumexp_v(z_v)

    Args:
        logits: (N, T, V) float, any floating dtype (bf16 included).
        token_ids: (N, T) integer token ids in [0, V).

    Returns:
        (N, T) log-probs in float32 (float64 for float64 logits).

    Raises:
        ValueError: if ``logits`` is not (N, T, V) floating or ``token_ids`` is not an integer
            (N, T) tensor with ids in [0, V).

    Notes:
        Gathers the chosen logit and subtracts a per-rollout logsumexp instead of
        materialising the full (N, T, V) log-softmax (as TRL's ``selective_log_softmax``).
    """
    return masked_log_probs(logits, token_ids, allowed=None)


def entropy_from_logits(logits: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy of the (optionally renormalised) next-token distribution at every position.

    H = −Σ_v p_v log p_v = logsumexp(z) − Σ_v p_v z_v, with p = softmax(z) over allowed tokens.

    Args:
        logits: (N, T, V) float, any floating dtype.
        allowed: (N, T, V) bool or None; None allows every token.

    Returns:
        (N, T) entropies in nats, float32 (float64 for float64 logits); 0 where only one
        token is allowed; differentiable without NaN.

    Raises:
        ValueError: on shape or dtype mismatches, or a position with no allowed token.
    """
    _check_logits(logits, allowed)
    rows = []
    for n in range(logits.shape[0]):
        z = _masked_row_logits(logits[n], None if allowed is None else allowed[n])  # (T, V)
        p = torch.softmax(z, dim=-1)  # (T, V), exact 0 where not allowed
        finite_z = torch.where(torch.isfinite(z), z, 0.0)  # avoids 0·(−inf) in value and grad
        rows.append(torch.logsumexp(z, dim=-1) - (p * finite_z).sum(dim=-1))  # (T,)
    if not rows:
        return logits.new_zeros(logits.shape[:2], dtype=_reduction_dtype(logits))
    return torch.stack(rows)
