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
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from agent_trainer.config import GRPOConfig
from agent_trainer.env_pools import EnvPool
from agent_trainer.policy import Decision, LMPolicy
from agent_trainer.rollout import Rollout, collect_rollouts, to_trajectory
from dreamgym.rl.advantages import group_relative_advantages
from dreamgym.rl.losses import grpo_loss
from dreamgym.sampling import length_grouped_batches
from dreamgym.types import Task, Trajectory

__all__ = ["GRPOTrainer", "ReplaySink", "TaskSource", "TurnBatch", "build_turn_batch"]

logger = logging.getLogger(__name__)


class TaskSource(Protocol):
    """Tasks and curriculum (the task generator service, or a fixed list in tests)."""

    def sample(self, batch_size: int, seed: int) -> list[Task]: ...

    def report(self, task_id: str, rewards: list[float], policy_version: str) -> None: ...

    def generate(self, num_seed_tasks: int, variations_per_task: int, seed: int) -> int: ...


class ReplaySink(Protocol):
    """Where imagined trajectories go (the replay store)."""

    def push(self, trajectories: list[Trajectory]) -> None: ...


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


def _old_log_probs(decisions: list[Decision], mask: torch.Tensor) -> torch.Tensor:
    old = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    for i, d in enumerate(decisions):
        old[i, : len(d.sampled_log_probs)] = torch.tensor(d.sampled_log_probs)
    return torch.where(mask, old, 0.0)


class GRPOTrainer:
    """Train a policy with GRPO in an environment pool.

    Args:
        config: GRPO hyperparameters.
        policy: the policy to train.
        pool: where rollouts run (imagined by default).
        task_source: tasks and curriculum.
        replay: sink for synthetic trajectories (``None`` = do not push).
        run_dir: checkpoints and ``metrics.jsonl`` go here.
        on_metrics: callback ``(iteration, metrics)`` (job progress reporting).
        should_stop: polled between iterations (cancellation).
    """

    def __init__(
        self,
        config: GRPOConfig,
        *,
        policy: LMPolicy,
        pool: EnvPool,
        task_source: TaskSource,
        replay: ReplaySink | None,
        run_dir: Path,
        on_metrics: Callable[[int, dict[str, Any]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.config, self.policy, self.pool = config, policy, pool
        self.task_source, self.replay, self.run_dir = task_source, replay, Path(run_dir)
        self.on_metrics, self.should_stop = on_metrics, should_stop
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.learning_rate)
        self.reference = copy.deepcopy(policy.model).eval() if config.beta > 0 else None
        self.generator = torch.Generator().manual_seed(config.seed)
        self.iteration = 0
        self.env_steps = 0
        # One event loop for the trainer's lifetime: async HTTP clients keep pooled connections
        # bound to the loop that opened them, so a fresh loop per iteration would break them.
        self._loop = asyncio.new_event_loop()

    def run_async(self, coro: Any) -> Any:
        """Run ``coro`` on the trainer's own event loop (rollouts, client shutdown)."""
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the trainer's event loop (after closing any async clients on it)."""
        if not self._loop.is_closed():
            self._loop.close()

    # -- the loop -----------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run from ``self.iteration`` to ``config.iterations``; returns the final metrics."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2))
        metrics: dict[str, Any] = {}
        while self.iteration < self.config.iterations:
            if self.should_stop is not None and self.should_stop():
                break
            metrics = self.step()
            self.iteration += 1
            if self.iteration % self.config.checkpoint_every == 0:
                self.save_checkpoint()
        self.save_checkpoint()
        return metrics

    def step(self) -> dict[str, Any]:
        """One GRPO iteration; returns its metrics."""
        c, t0 = self.config, time.perf_counter()
        tasks = self.task_source.sample(
            c.tasks_per_iteration, seed=c.seed * 100_003 + self.iteration
        )
        self.policy.model.eval()
        rollouts = self.run_async(
            collect_rollouts(
                self.policy,
                self.pool,
                tasks,
                group_size=c.group_size,
                max_steps=c.max_steps,
                seed=(c.seed * 1_000_003 + self.iteration * 10_007) % 2**31,
                temperature=c.temperature,
                generator=self.generator,
            )
        )
        t1 = time.perf_counter()
        returns = torch.tensor([r.episode_return for r in rollouts])
        valid = torch.tensor([r.valid for r in rollouts])
        advantages = group_relative_advantages(
            returns, group_size=c.group_size, scale=c.advantage_scale, valid=valid
        )
        update_stats = self.update(build_turn_batch(rollouts, advantages))
        t2 = time.perf_counter()
        self.report_outcomes(tasks, rollouts)
        pushed = self.push_synthetic(rollouts)
        generated = self.maybe_generate_tasks()
        steps = sum(len(r.transitions) for r in rollouts)
        self.env_steps += steps
        metrics = self._metrics(rollouts, returns, valid, advantages, update_stats)
        metrics.update(
            {
                "iteration": self.iteration,
                "time/rollout_s": t1 - t0,
                "time/update_s": t2 - t1,
                "perf/env_steps_per_s": steps / max(t1 - t0, 1e-9),
                "replay/pushed_trajectories": pushed,
                "curriculum/generated_tasks": generated,
                "rollout/env_steps_total": self.env_steps,
            }
        )
        self._log(metrics)
        return metrics

    def update(self, batch: TurnBatch) -> dict[str, float]:
        """μ epochs of minibatch GRPO updates on the batch's turns."""
        c = self.config
        if not batch.decisions:
            return {}
        lengths = [len(d.prompt_ids) + len(d.completion_ids) for d in batch.decisions]
        rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=self.generator)))
        ref = self._reference_log_probs(batch.decisions, lengths, rng)
        self.policy.model.train()
        sums: dict[str, float] = {}
        count = 0
        for _ in range(c.epochs_per_iteration):
            for idx in length_grouped_batches(lengths, c.minibatch_size, rng):
                stats = self._minibatch(
                    [batch.decisions[i] for i in idx],
                    torch.tensor([batch.advantages[i] for i in idx]),
                    None if ref is None else [ref[i] for i in idx],
                )
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
                count += 1
        self.policy.model.eval()
        return {k: v / count for k, v in sums.items()}

    def _reference_log_probs(
        self, decisions: list[Decision], lengths: list[int], rng: random.Random
    ) -> list[torch.Tensor] | None:
        """log π_ref of every turn's completion tokens, computed once per iteration."""
        if self.reference is None:
            return None
        ref_policy = LMPolicy(self.reference, self.policy.tokenizer, decoding=self.policy.decoding)
        out: list[torch.Tensor | None] = [None] * len(decisions)
        with torch.no_grad():
            for idx in length_grouped_batches(lengths, self.config.minibatch_size, rng):
                lp, _ = ref_policy.completion_log_probs([decisions[i] for i in idx])
                for row, i in enumerate(idx):
                    out[i] = lp[row]
        return [t for t in out if t is not None]

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
        ref = None
        if ref_rows is not None:  # (N, Tc): rows computed once per iteration, right-padded
            ref = torch.zeros_like(log_probs)
            for row, values in enumerate(ref_rows):
                n = min(values.shape[0], log_probs.shape[1])
                ref[row, :n] = values[:n]
            ref = torch.where(mask, ref, 0.0)
        loss, stats = grpo_loss(
            log_probs,
            _old_log_probs(decisions, mask),
            ref,
            advantages.to(log_probs.device),
            mask,
            epsilon_low=c.epsilon_low,
            epsilon_high=c.epsilon_high,
            beta=c.beta,
            kl_estimator=c.kl_estimator,
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), c.max_grad_norm)
        self.optimizer.step()
        out = {
            f"policy/{k}" if k != "policy_loss" else "loss/policy": float(v)
            for k, v in stats.items()
        }
        out["loss/total"] = float(loss.detach())
        out["policy/grad_norm"] = float(grad_norm)
        return out

    # -- DreamGym loop plumbing --------------------------------------------------------------
    @property
    def policy_version(self) -> str:
        """Version tag of the policy that produced this iteration's rollouts."""
        return f"{self.run_dir.name}@{self.iteration}"

    def report_outcomes(self, tasks: list[Task], rollouts: list[Rollout]) -> None:
        """Send each task's group rewards (valid rollouts only) to the curriculum."""
        g = self.config.group_size
        for i, task in enumerate(tasks):
            group = [r.episode_return for r in rollouts[i * g : (i + 1) * g] if r.valid]
            if group:
                self.task_source.report(task.task_id, group, self.policy_version)

    def push_synthetic(self, rollouts: list[Rollout]) -> int:
        """Add valid imagined trajectories to the replay buffer, tagged synthetic."""
        if (
            self.replay is None
            or not self.config.push_synthetic
            or getattr(self.pool, "real", False)
        ):
            return 0
        trajectories = [
            t
            for r in rollouts
            if (
                t := to_trajectory(
                    r,
                    environment=self.config.environment,
                    source="synthetic",
                    policy_version=self.policy_version,
                )
            )
            is not None
        ]
        if trajectories:
            self.replay.push(trajectories)
        return len(trajectories)

    def maybe_generate_tasks(self) -> int:
        """Every ``curriculum_every`` iterations, ask for variations of high-variance tasks."""
        c = self.config
        if c.curriculum_every == 0 or (self.iteration + 1) % c.curriculum_every != 0:
            return 0
        return self.task_source.generate(
            c.curriculum_seed_tasks, c.curriculum_variations, seed=c.seed + self.iteration
        )

    def _metrics(
        self,
        rollouts: list[Rollout],
        returns: torch.Tensor,
        valid: torch.Tensor,
        advantages: torch.Tensor,
        update_stats: dict[str, float],
    ) -> dict[str, Any]:
        ok = [r for r in rollouts if r.valid]
        errors = [r.error for r in rollouts if r.error is not None]
        if errors:  # masked rollouts are visible, never silent zeros
            logger.warning(
                "iteration %d: %d/%d rollouts failed and were masked; first: %s",
                self.iteration,
                len(errors),
                len(rollouts),
                errors[0],
            )
        return {
            "rollout/episode_return": float(returns[valid].mean()) if ok else 0.0,
            "rollout/success_rate": sum(r.won for r in ok) / max(1, len(ok)),
            "rollout/episode_length": sum(len(r.transitions) for r in ok) / max(1, len(ok)),
            "rollout/valid_fraction": len(ok) / len(rollouts),
            "rollout/failed": len(errors),
            "advantage/std": float(advantages[valid].std()) if len(ok) > 1 else 0.0,
            **update_stats,
        }

    def _log(self, metrics: dict[str, Any]) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)  # step() may run without train()
        with (self.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        logger.info(
            "iteration %d: return %.3f success %.3f",
            metrics["iteration"],
            metrics["rollout/episode_return"],
            metrics["rollout/success_rate"],
        )
        if self.on_metrics is not None:
            self.on_metrics(self.iteration, metrics)

    # -- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write policy weights, tokenizer, optimizer and trainer state; update ``latest``."""
        path = self.run_dir / "checkpoints" / f"iter-{self.iteration:05d}"
        path.mkdir(parents=True, exist_ok=True)
        self.policy.model.save_pretrained(path)
        self.policy.tokenizer.save_pretrained(path)
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state()},
            path / "trainer_state.pt",
        )
        (path / "trainer_state.json").write_text(
            json.dumps({"iteration": self.iteration, "env_steps": self.env_steps})
        )
        latest = self.run_dir / "checkpoints" / "latest"
        latest.unlink(missing_ok=True)
        latest.symlink_to(path.name)
        return path

    def load_checkpoint(self, path: Path) -> None:
        """Resume optimizer, RNG and counters from a checkpoint written by this trainer.

        The policy weights are loaded by whoever builds the policy (from the same directory).
        """
        state = torch.load(path / "trainer_state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        meta = json.loads((path / "trainer_state.json").read_text())
        self.iteration, self.env_steps = int(meta["iteration"]), int(meta["env_steps"])
