"""GRPO on imagined rollouts — the DreamGym training loop (arXiv 2511.03773 §4.3, Fig. 2).

One iteration reads like the paper's loop:

1. ``tasks = task_source.sample(B)`` — seed tasks plus curriculum variations (λ-capped);
2. ``rollouts = collect_rollouts(policy, pool, tasks, G)`` — multi-turn, in the experience model;
3. ``advantages = group_relative_advantages(returns, G)`` — failed rollouts masked, not zeroed;
4. μ epochs of ``grpo_loss`` on the agent's own tokens (old log-probs = the sampled ones);
5. ``task_source.report(...)`` — group rewards back to the curriculum (Eq. 7 scores);
6. ``replay.push(...)`` — imagined trajectories into the co-evolving replay buffer;
7. every ``curriculum_every`` iterations, ``task_source.generate(...)`` — new variations of the
   highest-variance tasks (Eq. 6).

The loop plumbing (rollouts, reference policy, curriculum, replay, checkpoints) is shared with
PPO in :class:`agent_trainer.rl_trainer.RLTrainer`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from agent_trainer.config import GRPOConfig
from agent_trainer.policy import Decision
from agent_trainer.rl_trainer import ReplaySink, RLTrainer, TaskSource, old_log_probs, stack_rows
from agent_trainer.rollout import Rollout
from dreamgym.rl.advantages import group_relative_advantages
from dreamgym.rl.losses import grpo_loss

__all__ = ["GRPOTrainer", "ReplaySink", "TaskSource", "TurnBatch", "build_turn_batch"]


@dataclass
class TurnBatch:
    """The turns that carry learning signal, with their trajectory-level advantage."""

    decisions: list[Decision]
    advantages: list[float]


def build_turn_batch(rollouts: list[Rollout], advantages: torch.Tensor) -> TurnBatch:
    """Every decision of every valid rollout with a non-zero advantage.

    Args:
        rollouts: N rollouts.
        advantages: (N,) group-relative advantages (0 for masked rollouts).

    Returns:
        The turns and, for each, its rollout's advantage (broadcast over its tokens by the loss).
    """
    decisions, advs = [], []
    for r, a in zip(rollouts, advantages.tolist(), strict=True):
        if r.valid and a != 0.0:
            decisions.extend(r.decisions)
            advs.extend([a] * len(r.decisions))
    return TurnBatch(decisions, advs)


class GRPOTrainer(RLTrainer):
    """Train a policy with GRPO in an environment pool (arguments: see :class:`RLTrainer`)."""

    config: GRPOConfig

    def step(self) -> dict[str, Any]:
        """One GRPO iteration; returns its metrics."""
        c, t0 = self.config, time.perf_counter()
        tasks = self.sample_tasks()
        rollouts = self.collect(tasks)
        t1 = time.perf_counter()
        returns = torch.tensor([r.episode_return for r in rollouts])
        valid = torch.tensor([r.valid for r in rollouts])
        advantages = group_relative_advantages(
            returns, group_size=c.group_size, scale=c.advantage_scale, valid=valid
        )
        update_stats = self.update(build_turn_batch(rollouts, advantages))
        adv_std = float(advantages[valid].std()) if int(valid.sum()) > 1 else 0.0
        return self.finish_iteration(
            tasks, rollouts, {"advantage/std": adv_std, **update_stats}, t0, t1
        )

    def update(self, batch: TurnBatch) -> dict[str, float]:
        """μ epochs of minibatch GRPO updates on the batch's turns."""
        return self.run_epochs(
            batch.decisions,
            lambda idx, ref: self._minibatch(
                [batch.decisions[i] for i in idx],
                torch.tensor([batch.advantages[i] for i in idx]),
                ref,
            ),
        )

    def _minibatch(
        self,
        decisions: list[Decision],
        advantages: torch.Tensor,
        ref_rows: list[torch.Tensor] | None = None,
    ) -> dict[str, float]:
        c = self.config
        log_probs, mask = self.policy.completion_log_probs(decisions)
        if not bool(mask.any()):
            return {}
        ref = None if ref_rows is None else stack_rows(ref_rows, log_probs, mask)
        loss, stats = grpo_loss(
            log_probs,
            old_log_probs(decisions, mask),
            ref,
            advantages.to(log_probs.device),
            mask,
            epsilon_low=c.epsilon_low,
            epsilon_high=c.epsilon_high,
            beta=c.beta,
            kl_estimator=c.kl_estimator,
        )
        grad_norm = self.apply_gradients(loss)
        return {**self.loss_metrics(loss, stats), "policy/grad_norm": grad_norm}
