"""Curriculum scores from embedding clusters, for trainers without rollout groups (PPO, §4.2).

Under GRPO the G rollouts of one task form the group whose reward variance scores the task
(Eq. 7, :func:`~dreamgym.curriculum.scoring.reward_variance`). PPO has no such groups (one rollout
per task is enough for it), so DreamGym "first clusters tasks with a semantic embedder, and each
cluster forms a group" (arXiv 2511.03773 §4.2): a task's score is the reward variance over all
recent rewards of the tasks in its cluster.

Shape legend: ``B`` tasks, ``D`` embedding width, ``K`` clusters.

- :func:`hashed_text_embeddings` — a dependency-free semantic-ish encoder (feature hashing of word
  unigrams and bigrams); any encoder returning unit rows works (e.g. all-MiniLM-L6-v2).
- :func:`kmeans_cosine` — deterministic spherical k-means (farthest-point initialisation).
- :func:`cluster_reward_variance` — V over each task's cluster, pooled.

Usage:
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> kmeans_cosine(x, 2)
    array([0, 0, 1, 1])
    >>> cluster_reward_variance([[1.0], [0.0], [1.0], [1.0]], np.array([0, 0, 1, 1]))
    array([0.25, 0.25, 0.  , 0.  ])
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dreamgym.curriculum.scoring import GroupRewards, _as_groups

__all__ = ["cluster_reward_variance", "hashed_text_embeddings", "kmeans_cosine"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


def hashed_text_embeddings(texts: Sequence[str], dim: int = 256) -> npt.NDArray[np.float64]:
    """Unit-norm feature-hashing embeddings of lower-cased word unigrams and bigrams.

    Each feature adds ±1 to bucket ``blake2b(feature) mod dim`` (stable across processes). A text
    without words (or whose buckets cancel) gets the vector of the feature ``"<empty>"``.

    Args:
        texts: B strings.
        dim: D >= 8.

    Returns:
        (B, D) float64 with unit-norm rows; equal texts give equal rows.

    Raises:
        ValueError: ``dim < 8``.
    """
    if dim < 8:
        raise ValueError(f"dim must be >= 8, got {dim}")
    out = np.zeros((len(texts), dim), dtype=np.float64)  # (B, D)

    def bucket(feature: str) -> tuple[int, float]:
        value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return (value >> 1) % dim, 1.0 if value & 1 else -1.0

    for row, text in enumerate(texts):
        words = [w.lower() for w in _TOKEN.findall(text)]
        for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
            i, sign = bucket(feature)
            out[row, i] += sign
        if not out[row].any():
            i, sign = bucket("<empty>")
            out[row, i] = sign
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _farthest_point_centroids(x: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """k rows of ``x``: row 0, then repeatedly the row least similar to every chosen one."""
    chosen = [0]
    best = x @ x[0]  # (B,) max similarity to the chosen centroids so far
    for _ in range(1, k):
        nxt = int(np.argmin(best))  # lowest index among ties
        chosen.append(nxt)
        best = np.maximum(best, x @ x[nxt])
    return x[chosen].copy()  # (K, D)


def kmeans_cosine(
    embeddings: npt.ArrayLike, k: int, *, iterations: int = 50
) -> npt.NDArray[np.int64]:
    """Spherical k-means: cluster labels maximising cosine similarity to unit centroids.

    Initialisation is deterministic (row 0, then farthest points), assignment ties go to the
    lower cluster index, an emptied cluster keeps its previous centroid; iteration stops when no
    label changes or after ``iterations`` rounds.

    Args:
        embeddings: (B, D) finite rows (normalised here; a zero row is an error).
        k: K in [1, B] clusters.
        iterations: most Lloyd rounds (>= 1).

    Returns:
        (B,) int64 labels in [0, K).

    Raises:
        ValueError: not a finite 2-D array, a zero row, or k outside [1, B].

    References:
        Dhillon & Modha 2001 (spherical k-means); DreamGym arXiv 2511.03773 §4.2.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or not np.isfinite(x).all():
        raise ValueError(f"embeddings must be a finite (B, D) array, got shape {x.shape}")
    if not 1 <= k <= x.shape[0]:
        raise ValueError(f"k must be in [1, B={x.shape[0]}], got {k}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)  # (B, 1)
    if (norms == 0).any():
        raise ValueError("embeddings contain a zero row; cosine similarity is undefined")
    x = x / norms
    centroids = _farthest_point_centroids(x, k)  # (K, D)
    labels = np.full(x.shape[0], -1, dtype=np.int64)
    for _ in range(iterations):
        new = np.argmax(x @ centroids.T, axis=1).astype(np.int64)  # (B,) first max wins ties
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = x[labels == c]
            if members.size:
                mean = members.sum(axis=0)
                norm = np.linalg.norm(mean)
                if norm > 0:
                    centroids[c] = mean / norm
    return labels


def cluster_reward_variance(
    task_rewards: GroupRewards, labels: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Each task's score: the reward variance of its cluster, all members' rewards pooled.

    V_c = (1/n_c) Σ_{i ∈ c} (r_i − r̄_c)² over the n_c non-NaN rewards of every task in cluster c;
    every task of cluster c scores V_c (paper §4.2: under PPO a cluster is the group of Eq. 7).

    Args:
        task_rewards: B sequences of recent rewards, one per task (lengths may differ; NaN
            marks failed rollouts and is ignored), or a (B, G) array.
        labels: (B,) integer cluster labels.

    Returns:
        (B,) float64 scores >= 0 (0 for a cluster without rewards or with one reward).

    Raises:
        ValueError: ``labels`` is not (B,) integers, or a reward is infinite.
    """
    groups = _as_groups(task_rewards)
    lab = np.asarray(labels)
    if lab.shape != (len(groups),) or not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"labels must be ({len(groups)},) integers, got {lab.shape} {lab.dtype}")
    out = np.zeros(len(groups), dtype=np.float64)
    for c in np.unique(lab):
        members = np.flatnonzero(lab == c)
        pooled = np.concatenate([groups[i] for i in members]) if members.size else np.array([])
        out[members] = float(np.var(pooled)) if pooled.size else 0.0
    return out
