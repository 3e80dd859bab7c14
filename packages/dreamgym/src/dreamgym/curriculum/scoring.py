"""Curriculum scoring: task scores from group outcomes, task selection and batch mixing (numpy).

Shape legend: ``B`` tasks, ``G`` rollouts per task (a group). Group rewards are given either as a
(B, G) array or as B sequences of possibly different lengths (ragged). NaN marks a failed rollout
and is ignored. "Score" is used only for curriculum scores of tasks, never for rewards.

DreamGym (arXiv 2511.03773 §3) picks seed tasks for variation by their group reward variance
(Eq. 7): a non-zero variance means the agent both succeeds and fails, so the task is feasible yet
challenging. A hyperparameter λ bounds the share of generated tasks in each batch.

Usage:
    >>> import numpy as np
    >>> reward_variance([[1, 0, 1, 0], [1, 1], []])
    array([0.25, 0.  , 0.  ])
    >>> select_top_k(np.array([0.25, 0.0, 0.1]), 2)
    array([0, 2])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "reward_variance",
    "sample_task_batch",
    "select_top_k",
    "success_balance",
]

GroupRewards = Sequence[Sequence[float]] | npt.NDArray[np.floating]


def _as_groups(group_rewards: GroupRewards) -> list[npt.NDArray[np.float64]]:
    """B 1-D float64 arrays with NaN (failed rollouts) removed; ValueError on bad input."""
    if isinstance(group_rewards, np.ndarray) and group_rewards.ndim != 2:
        raise ValueError(f"group_rewards array must be (B, G), got shape {group_rewards.shape}")
    groups = [np.asarray(g, dtype=np.float64) for g in group_rewards]
    for i, g in enumerate(groups):
        if g.ndim != 1:
            raise ValueError(f"group {i} must be a 1-D sequence of rewards, got shape {g.shape}")
        if np.isinf(g).any():
            raise ValueError(f"group {i} contains an infinite reward: {g.tolist()}")
    return [g[~np.isnan(g)] for g in groups]


def reward_variance(group_rewards: GroupRewards) -> npt.NDArray[np.float64]:
    """Per-task reward variance over its group of rollouts (paper Eq. 7).

    V_τ = (1/n) Σ_{i=1}^{n} (r_i − r̄)²,  r̄ = (1/n) Σ r_i, over the n non-NaN rewards.

    Args:
        group_rewards: (B, G) array or B sequences of rewards (lengths may differ). NaN entries
            are failed rollouts and are ignored.

    Returns:
        (B,) float64 scores >= 0. For binary rewards with success rate p, V_τ = p(1 − p), which
        peaks at 0.25 for p = 0.5.

    Raises:
        ValueError: if an array is not 2-D, a group is not 1-D, or a reward is infinite.

    Notes:
        Population variance (1/n, as in Eq. 7), equal to ``np.var`` of a full group. A group
        with no non-NaN reward scores 0 (no evidence); a single reward also scores 0.

    References:
        DreamGym, arXiv 2511.03773 §3, Eq. 7 ("group-based reward entropy").
    """
    groups = _as_groups(group_rewards)
    return np.array([float(np.var(g)) if g.size else 0.0 for g in groups], dtype=np.float64)


def success_balance(group_rewards: GroupRewards) -> npt.NDArray[np.float64]:
    """Closeness of each task's success rate to 0.5: 1 − |2p − 1| (an alternative score).

    p = mean of the group's non-NaN rewards; score = 1 − |2p − 1| = 2·min(p, 1 − p).

    Args:
        group_rewards: (B, G) array or B sequences of rewards in [0, 1] (success indicators or
            partial credit). NaN entries are ignored.

    Returns:
        (B,) float64 scores in [0, 1]: 1 at p = 0.5, 0 at p ∈ {0, 1} and for empty groups.

    Raises:
        ValueError: as ``reward_variance``, or if a reward lies outside [0, 1].

    Notes:
        For binary rewards this ranks tasks exactly as ``reward_variance`` (both are increasing
        in min(p, 1 − p)) but on a linear scale.
    """
    groups = _as_groups(group_rewards)
    for i, g in enumerate(groups):
        if ((g < 0) | (g > 1)).any():
            raise ValueError(f"success_balance needs rewards in [0, 1]; group {i} is {g.tolist()}")
    rates = [float(g.mean()) if g.size else 0.0 for g in groups]
    return np.array([1.0 - abs(2.0 * p - 1.0) for p in rates], dtype=np.float64)


def select_top_k(
    scores: npt.ArrayLike,
    k: int,
    *,
    rng: np.random.Generator | None = None,
    temperature: float | None = None,
    min_score: float = 0.0,
) -> npt.NDArray[np.int64]:
    """Indices of up to k tasks to vary, by score: top-k, or softmax sampling without replacement.

    Deterministic (temperature None): the k highest eligible scores, ties broken by lower index.
    Stochastic: draw k eligible indices without replacement with probability ∝ exp(score / T),
    drawn sequentially (Plackett–Luce), implemented as Gumbel-top-k on score / T + Gumbel noise.

    Args:
        scores: (B,) finite task scores (e.g. from ``reward_variance``).
        k: number of tasks wanted, >= 0.
        rng: the generator to draw from; required when ``temperature`` is set.
        temperature: T > 0 for softmax sampling; None for deterministic top-k.
        min_score: only indices with score > min_score are eligible. The default 0 keeps the
            paper's "non-zero variance" tasks (feasible yet challenging).

    Returns:
        (min(k, #eligible),) int64 indices into ``scores``, best (or first drawn) first.

    Raises:
        ValueError: if ``scores`` is not 1-D finite, k < 0, temperature <= 0, or temperature
            is set without ``rng``.

    References:
        DreamGym arXiv 2511.03773 §3; Gumbel-top-k, Kool et al. 2019, arXiv 1903.06059.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or not np.isfinite(s).all():
        raise ValueError(f"scores must be a finite (B,) array, got shape {s.shape}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if temperature is not None and (temperature <= 0 or rng is None):
        raise ValueError(f"temperature must be > 0 and come with an rng, got {temperature}, {rng}")
    eligible = np.flatnonzero(s > min_score)  # (E,)
    keys = s[eligible]
    if temperature is not None:
        keys = keys / temperature + rng.gumbel(size=eligible.size)  # type: ignore[union-attr]
    order = np.lexsort((eligible, -keys))  # highest key first, then lowest index
    return eligible[order[:k]].astype(np.int64)


def _eligible_pool(
    pool: list[str], weights: Sequence[float] | None, name: str
) -> tuple[list[str], npt.NDArray[np.float64] | None]:
    """The tasks with positive weight and their normalised probabilities (None: uniform)."""
    if weights is None:
        return pool, None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(pool),) or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"{name} must be {len(pool)} finite non-negative weights, got {w}")
    keep = w > 0
    return [t for t, k in zip(pool, keep, strict=True) if k], w[keep] / max(w[keep].sum(), 1e-300)


def _draw(
    pool: list[str], p: npt.NDArray[np.float64] | None, n: int, rng: np.random.Generator
) -> list[str]:
    """Draw n ids: without replacement if the pool is large enough, else all once plus extras."""
    if n == 0:
        return []
    if n <= len(pool):
        picks = rng.choice(len(pool), size=n, replace=False, p=p)
    else:  # every task once, then the shortfall with replacement
        extra = rng.choice(len(pool), size=n - len(pool), replace=True, p=p)
        picks = np.concatenate([rng.permutation(len(pool)), extra])
    return [pool[i] for i in picks]


def sample_task_batch(
    seed_task_ids: list[str],
    generated_task_ids: list[str],
    batch_size: int,
    *,
    max_generated_fraction: float,
    rng: np.random.Generator,
    seed_weights: Sequence[float] | None = None,
    generated_weights: Sequence[float] | None = None,
) -> list[str]:
    """Mix seed and generated tasks into one batch, at most a fraction λ of them generated.

    n_generated = floor(λ · batch_size) if a generated task can be drawn (weight > 0), else 0;
    n_seed = batch_size − n_generated.

    λ "bounds the proportion of synthetic tasks sampled per iteration" (paper §3): it keeps
    coverage of the original task distribution while directing exploration to weak spots.

    Args:
        seed_task_ids: the original tasks.
        generated_task_ids: tasks produced by the task generator (M_task).
        batch_size: B >= 0 tasks wanted.
        max_generated_fraction: λ in [0, 1].
        rng: the generator to draw from.
        seed_weights: optional non-negative sampling weights, one per seed task (e.g. scores).
            Tasks with weight 0 are never drawn.
        generated_weights: the same for generated tasks.

    Returns:
        ``batch_size`` task ids in random order, at most floor(λ · batch_size) of them drawn
        from ``generated_task_ids``.

    Raises:
        ValueError: if λ is outside [0, 1], batch_size < 0, weights do not match their pool, or
            seed tasks are needed but the seed pool is empty (λ is a hard cap, never exceeded).

    Notes:
        Each pool is drawn without replacement when it holds at least as many tasks as needed;
        otherwise every task in it is used once and the shortfall is drawn with replacement.
        Weights, when given, are the draw probabilities (normalised).

    References:
        DreamGym arXiv 2511.03773 §3 (λ, synthetic-task share).
    """
    if not (0.0 <= max_generated_fraction <= 1.0):
        raise ValueError(
            f"max_generated_fraction (λ) must be in [0, 1], got {max_generated_fraction}"
        )
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    seed_pool, seed_p = _eligible_pool(seed_task_ids, seed_weights, "seed_weights")
    gen_pool, gen_p = _eligible_pool(generated_task_ids, generated_weights, "generated_weights")
    n_generated = math.floor(max_generated_fraction * batch_size) if gen_pool else 0
    if batch_size > n_generated and not seed_pool:
        raise ValueError(
            f"need {batch_size - n_generated} seed task(s) (batch_size={batch_size}, "
            f"λ={max_generated_fraction}) but no seed task has positive weight"
        )
    batch = _draw(seed_pool, seed_p, batch_size - n_generated, rng)
    batch += _draw(gen_pool, gen_p, n_generated, rng)
    return [batch[i] for i in rng.permutation(len(batch))]
