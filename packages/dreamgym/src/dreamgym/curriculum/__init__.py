"""Curriculum math (numpy, pure): task scores from group outcomes, task selection, batch mixing.

The task-generator service composes these with its task store; see ``scoring`` for the formulas
(DreamGym arXiv 2511.03773 §3, Eq. 7 and the λ cap) and ``clusters`` for scores from embedding
clusters when there are no rollout groups (PPO, §4.2).
"""

from dreamgym.curriculum.clusters import (
    cluster_reward_variance,
    hashed_text_embeddings,
    kmeans_cosine,
)
from dreamgym.curriculum.scoring import (
    reward_variance,
    sample_task_batch,
    select_top_k,
    success_balance,
)

__all__ = [
    "cluster_reward_variance",
    "hashed_text_embeddings",
    "kmeans_cosine",
    "reward_variance",
    "sample_task_batch",
    "select_top_k",
    "success_balance",
]
