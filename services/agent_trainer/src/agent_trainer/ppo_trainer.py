"""PPO on imagined rollouts: a value head, turn-level GAE, clipped policy and value losses.

One iteration (paper §3.2 with the DreamGym loop of §4.3):

1. ``tasks = sample_tasks()``, ``rollouts = collect(tasks)`` — exactly as GRPO;
2. ``values = state_values(turns)`` — V(s_t) of every turn of every valid rollout, plus V(s_T) of
   the state after the last turn of episodes cut by the step limit (bootstrap), no gradient;
3. ``advantages, returns = turn_level_gae(...)`` — one advantage per turn (environment step):
   Â_t = Σ_l (γλ)^l δ_{t+l}, δ_t = r_t + γ·V(s_{t+1}) − V(s_t) (paper §3.2, GAE);
4. μ epochs of ``ppo_loss``: the turn's advantage on every one of the agent's own tokens of that
   turn (the stored, sampled ids; old log-probs = the sampled log-probs, nothing re-tokenised),
   β·KL to the reference policy, c_V · clipped value loss, optional entropy bonus;
5. curriculum report, synthetic trajectories to the replay buffer, task generation (shared).

The value head reads the last prompt token (see :meth:`agent_trainer.policy.LMPolicy.evaluate`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agent_trainer.config import PPOConfig
from agent_trainer.policy import Decision, LMPolicy
from agent_trainer.rl_trainer import RLTrainer, old_log_probs, stack_rows
from agent_trainer.rollout import Rollout
from agent_trainer.value_head import ValueHead
from dreamgym.rl.advantages import generalized_advantage_estimation, masked_whiten
from dreamgym.rl.ppo import ppo_loss

__all__ = ["PPOBatch", "PPOTrainer", "bootstrap_decision", "turn_level_gae"]


@dataclass
class PPOBatch:
    """M turns with their advantages, value targets and rollout-time values (all (M,))."""

    decisions: list[Decision]
    advantages: torch.Tensor
    returns: torch.Tensor
    old_values: torch.Tensor


def bootstrap_decision(policy: LMPolicy, rollout: Rollout) -> Decision | None:
    """A prompt-only decision whose value is V(s_T), or None when nothing follows s_T.

    An episode that ended ``terminated`` has V(s_T) = 0; one left without admissible actions
    cannot continue either. Only episodes cut by a step or time limit bootstrap.
    """
    last = rollout.transitions[-1]
    if last.terminated or rollout.state is None or not rollout.state.admissible_actions:
        return None
    prompt = policy.prompt_ids(rollout.state, rollout.history())
    return Decision(action="", prompt_ids=prompt, completion_ids=[], sampled_log_probs=[])


def turn_level_gae(
    rollouts: Sequence[Rollout],
    values: torch.Tensor,
    last_values: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the turns of multi-turn episodes; one advantage and return per turn.

    Args:
        rollouts: K rollouts, each with >= 1 transition.
        values: (M,) V(s_t) of every turn, the rollouts' turns concatenated in order
            (M = total transitions).
        last_values: (K,) V(s_T) after each rollout's last turn; read only where that turn was
            not ``terminated`` (0 for episodes that cannot continue).
        gamma: discount γ per turn.
        gae_lambda: GAE λ.

    Returns:
        ``(advantages, returns)``, both (M,) in the order of ``values``.

    Raises:
        ValueError: a rollout without transitions, or ``values`` of the wrong length.
    """
    lengths = [len(r.transitions) for r in rollouts]
    if min(lengths, default=1) < 1 or values.shape != (sum(lengths),):
        raise ValueError(f"need >= 1 transition per rollout and values of shape ({sum(lengths)},)")
    k, s = len(rollouts), max(lengths, default=0)
    mask = torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]  # (K, S)
    rewards = torch.zeros(k, s, dtype=values.dtype)
    terminated = torch.zeros(k, s, dtype=torch.bool)
    for n, r in enumerate(rollouts):
        rewards[n, : lengths[n]] = torch.tensor([t.reward for t in r.transitions])
        terminated[n, : lengths[n]] = torch.tensor([t.terminated for t in r.transitions])
    grid = torch.zeros(k, s, dtype=values.dtype).masked_scatter(mask, values)  # (K, S)
    advantages, returns = generalized_advantage_estimation(
        rewards, grid, terminated, gamma=gamma, gae_lambda=gae_lambda,
        last_value=last_values.to(values.dtype), mask=mask,
    )  # fmt: skip
    return advantages[mask], returns[mask]  # (M,), row-major = the order of ``values``


class PPOTrainer(RLTrainer):
    """Train a policy and its value head with PPO in an environment pool.

    Args:
        config: PPO hyperparameters.
        policy: the policy to train.
        value_head: the critic; None creates a zero-initialised head for the policy's model.
        **kwargs: ``pool``, ``task_source``, ``replay``, ``run_dir``, ``on_metrics``,
            ``should_stop`` (see :class:`~agent_trainer.rl_trainer.RLTrainer`).
    """

    config: PPOConfig

    def __init__(
        self,
        config: PPOConfig,
        *,
        policy: LMPolicy,
        value_head: ValueHead | None = None,
        **kwargs: Any,
    ) -> None:
        self.value_head = (
            value_head if value_head is not None else ValueHead.for_model(policy.model)
        )
        super().__init__(config, policy=policy, **kwargs)

    def _param_groups(self) -> list[dict[str, Any]]:
        lr = self.config.value_learning_rate or self.config.learning_rate
        return [*super()._param_groups(), {"params": list(self.value_head.parameters()), "lr": lr}]

    def _train_mode(self, training: bool) -> None:
        super()._train_mode(training)
        self.value_head.train(training)

    def step(self) -> dict[str, Any]:
        """One PPO iteration; returns its metrics."""
        t0 = time.perf_counter()
        tasks = self.sample_tasks()
        rollouts = self.collect(tasks)
        t1 = time.perf_counter()
        if not any(r.valid and r.transitions for r in rollouts):
            # every rollout failed or was cut by a real-step budget: nothing to learn from
            return self.finish_iteration(tasks, rollouts, {}, t0, t1)
        batch, advantage_stats = self.build_batch(rollouts)
        update_stats = self.update(batch)
        return self.finish_iteration(tasks, rollouts, {**advantage_stats, **update_stats}, t0, t1)

    def build_batch(self, rollouts: list[Rollout]) -> tuple[PPOBatch, dict[str, float]]:
        """Values, GAE advantages and returns of every turn of the valid rollouts."""
        c = self.config
        played = [r for r in rollouts if r.valid and r.transitions]
        decisions = [d for r in played for d in r.decisions]
        boots = [bootstrap_decision(self.policy, r) for r in played]
        values = self.state_values(decisions + [b for b in boots if b is not None])
        old_values, tail = values[: len(decisions)], iter(values[len(decisions) :].tolist())
        last_values = torch.tensor([next(tail) if b is not None else 0.0 for b in boots])
        advantages, returns = turn_level_gae(
            played, old_values, last_values, gamma=c.gamma, gae_lambda=c.gae_lambda
        )
        stats = _advantage_stats(advantages, returns, old_values)
        if c.whiten_advantages and advantages.numel() > 1:
            advantages = masked_whiten(advantages, torch.ones_like(advantages, dtype=torch.bool))
        return PPOBatch(decisions, advantages, returns, old_values), stats

    @torch.no_grad()
    def state_values(self, decisions: Sequence[Decision]) -> torch.Tensor:
        """(M,) float32 V(s) of each decision's prompt under the current weights (CPU)."""
        self._train_mode(False)
        size, out = self.config.minibatch_size, []
        for start in range(0, len(decisions), size):
            ev = self.policy.evaluate(decisions[start : start + size], value_head=self.value_head)
            assert ev.values is not None
            out.append(ev.values.float().cpu())
        return torch.cat(out) if out else torch.zeros(0)

    def update(self, batch: PPOBatch) -> dict[str, float]:
        """μ epochs of minibatch PPO updates on the batch's turns."""
        return self.run_epochs(batch.decisions, lambda idx, ref: self._minibatch(batch, idx, ref))

    def _minibatch(
        self, batch: PPOBatch, idx: list[int], ref_rows: list[torch.Tensor] | None
    ) -> dict[str, float]:
        c = self.config
        decisions = [batch.decisions[i] for i in idx]
        ev = self.policy.evaluate(decisions, value_head=self.value_head, with_entropy=True)
        assert ev.values is not None
        mask, device, pick = ev.action_mask, ev.values.device, torch.tensor(idx)
        loss, stats = ppo_loss(
            ev.log_probs,
            old_log_probs(decisions, mask),
            None if ref_rows is None else stack_rows(ref_rows, ev.log_probs, mask),
            batch.advantages[pick].to(device),
            mask,
            ev.values[:, None],  # (mb, 1): one value per turn
            batch.old_values[pick][:, None].to(device),
            batch.returns[pick][:, None].to(device),
            torch.ones(len(idx), 1, dtype=torch.bool, device=device),
            epsilon_low=c.epsilon_low,
            epsilon_high=c.epsilon_high,
            beta=c.beta,
            vf_coef=c.vf_coef,
            vf_clip=c.vf_clip,
            entropy=ev.entropy,
            entropy_coef=c.entropy_coef,
            kl_estimator=c.kl_estimator,
        )
        grad_norm = self.apply_gradients(loss)
        return {**self.loss_metrics(loss, stats), "policy/grad_norm": grad_norm}

    # -- checkpoints: the value head travels with the policy ----------------------------------
    def _save_extra(self, path: Path) -> None:
        self.value_head.save(path)

    def load_checkpoint(self, path: Path) -> None:
        """Resume optimizer, RNG, counters and the value head's weights from ``path``."""
        super().load_checkpoint(path)
        loaded = ValueHead.load(path)
        with torch.no_grad():
            for mine, saved in zip(self.value_head.parameters(), loaded.parameters(), strict=True):
                mine.copy_(saved)


def _advantage_stats(
    advantages: torch.Tensor, returns: torch.Tensor, values: torch.Tensor
) -> dict[str, float]:
    """Raw advantage mean/std and the critic's explained variance 1 − Var(R − V)/Var(R)."""
    if advantages.numel() == 0:
        return {}
    stats = {
        "advantage/mean": float(advantages.mean()),
        "advantage/std": float(advantages.std(correction=0)),
        "value/return_mean": float(returns.mean()),
    }
    var_returns = float(returns.var(correction=0))
    if var_returns > 0:  # undefined for constant returns: not logged
        stats["value/explained_variance"] = 1.0 - float((returns - values).var(correction=0)) / (
            var_returns
        )
    return stats
