"""RL math for the agent trainer: advantages, log-probabilities and losses (torch).

Small pure functions with shape docstrings; the shape legend is in ``dreamgym/rl/shapes.md``.
The trainer composes them and never writes RL math inline.
"""

from dreamgym.rl.advantages import (
    broadcast_to_tokens,
    generalized_advantage_estimation,
    group_relative_advantages,
    masked_whiten,
)
from dreamgym.rl.logprobs import entropy_from_logits, gather_log_probs, masked_log_probs
from dreamgym.rl.losses import (
    aggregate_loss,
    clipped_policy_loss,
    clipped_value_loss,
    grpo_loss,
    kl_penalty,
)
from dreamgym.rl.ppo import ppo_loss

__all__ = [
    "aggregate_loss",
    "broadcast_to_tokens",
    "clipped_policy_loss",
    "clipped_value_loss",
    "entropy_from_logits",
    "gather_log_probs",
    "generalized_advantage_estimation",
    "group_relative_advantages",
    "grpo_loss",
    "kl_penalty",
    "masked_log_probs",
    "masked_whiten",
    "ppo_loss",
]
