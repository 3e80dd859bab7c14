"""DreamGym curriculum task generator service (arXiv 2511.03773 §3.3).

Stores seed and generated tasks in PostgreSQL, scores tasks by the reward variance of their
rollout groups (Eq. 7), samples λ-capped train batches, and generates task variations of the
highest-variance tasks with the LLM that also plays the experience model (Eq. 6).
"""

__version__ = "0.1.0"
