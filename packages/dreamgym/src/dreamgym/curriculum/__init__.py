"""Curriculum math (numpy, pure): task scores from group outcomes, task selection, batch mixing.

The task-generator service composes these with its task store; see ``scoring`` for the formulas
(DreamGym arXiv 2511.03773 §3, Eq. 7 and the λ cap).
"""

from dreamgym.curriculum.scoring import (
    reward_variance,
    sample_task_batch,
    select_top_k,
    success_balance,
)

__all__ = ["reward_variance", "sample_task_batch", "select_top_k", "success_balance"]
