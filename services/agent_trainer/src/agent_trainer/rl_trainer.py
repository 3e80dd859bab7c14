"""What GRPO and PPO share: the DreamGym loop around one policy update (paper §4.3, Fig. 2).

:class:`RLTrainer` owns the event loop, the rollouts, the reference policy, the optimizer step,
the curriculum and replay plumbing, metrics and checkpoints. A subclass writes ``step()`` as a
short list of named calls:

    tasks = self.sample_tasks()
    rollouts = self.collect(tasks)
    … advantages, ``self.run_epochs(decisions, minibatch)`` …
    return self.finish_iteration(tasks, rollouts, stats, t0, t1)

and ``_param_groups()`` (what the optimizer updates).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import torch

from agent_trainer.config import RLConfig
from agent_trainer.em_refresh import ExperienceModelRefresher
from agent_trainer.env_pools import EnvPool
from agent_trainer.policy import Decision, LMPolicy
from agent_trainer.policy_io import is_lora_model, save_policy_model, trainable_parameters
from agent_trainer.rollout import Rollout, collect_rollouts, to_trajectory
from dreamgym.sampling import length_grouped_batches
from dreamgym.types import Task, Trajectory

__all__ = ["RLTrainer", "ReplaySink", "TaskSource", "old_log_probs", "stack_rows"]

logger = logging.getLogger(__name__)

# Loss stats → metric names; anything else is logged as ``policy/<name>``.
_METRIC_NAMES = {
    "policy_loss": "loss/policy",
    "value_loss": "loss/value",
    "value_clip_fraction": "value/clip_fraction",
    "value_mean": "value/mean",
}


class TaskSource(Protocol):
    """Tasks and curriculum (the task generator service, or a fixed list in tests)."""

    def sample(self, batch_size: int, seed: int) -> list[Task]: ...

    def report(self, task_id: str, rewards: list[float], policy_version: str) -> None: ...

    def generate(self, num_seed_tasks: int, variations_per_task: int, seed: int) -> int: ...


class ReplaySink(Protocol):
    """Where imagined trajectories go (the replay store)."""

    def push(self, trajectories: list[Trajectory]) -> None: ...


def old_log_probs(decisions: Sequence[Decision], mask: torch.Tensor) -> torch.Tensor:
    """(N, Tc) the log-probs recorded at sampling time (the behaviour policy), 0 off ``mask``."""
    old = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    for i, d in enumerate(decisions):
        old[i, : len(d.sampled_log_probs)] = torch.tensor(d.sampled_log_probs)
    return torch.where(mask, old, 0.0)


def stack_rows(
    rows: Sequence[torch.Tensor], like: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Right-pad per-decision rows (each (≤Tc,)) into ``like``'s (N, Tc) shape; 0 off ``mask``."""
    out = torch.zeros_like(like)
    for row, values in enumerate(rows):
        n = min(values.shape[0], like.shape[1])
        out[row, :n] = values[:n].to(like.device)
    return torch.where(mask, out, 0.0)


class RLTrainer:
    """The shared loop of GRPO and PPO in an environment pool.

    Args:
        config: hyperparameters (:class:`~agent_trainer.config.GRPOConfig` or ``PPOConfig``).
        policy: the policy to train (a LoRA policy trains only its adapters).
        pool: where rollouts run (imagined by default).
        task_source: tasks and curriculum.
        replay: sink for synthetic trajectories (``None`` = do not push).
        run_dir: checkpoints and ``metrics.jsonl`` go here.
        on_metrics: callback ``(iteration, metrics)`` (job progress reporting).
        should_stop: polled between iterations (cancellation).
        em_refresher: retrains and reloads the experience model every
            ``config.em_refresh_every`` iterations (``None``: never).
    """

    config: RLConfig

    def __init__(
        self,
        config: RLConfig,
        *,
        policy: LMPolicy,
        pool: EnvPool,
        task_source: TaskSource,
        replay: ReplaySink | None,
        run_dir: Path,
        on_metrics: Callable[[int, dict[str, Any]], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        em_refresher: ExperienceModelRefresher | None = None,
    ) -> None:
        self.config, self.policy, self.pool = config, policy, pool
        self.em_refresher = em_refresher
        self.task_source, self.replay, self.run_dir = task_source, replay, Path(run_dir)
        self.on_metrics, self.should_stop = on_metrics, should_stop
        self.optimizer = torch.optim.AdamW(self._param_groups(), lr=config.learning_rate)
        # LoRA: the base with adapters switched off is the reference; no copy is kept.
        lora = is_lora_model(policy.model)
        self.reference = (
            copy.deepcopy(policy.model).eval() if config.beta > 0 and not lora else None
        )
        self.generator = torch.Generator().manual_seed(config.seed)
        self.iteration = 0
        self.env_steps = 0
        # One event loop for the trainer's lifetime: async HTTP clients keep pooled connections
        # bound to the loop that opened them, so a fresh loop per iteration would break them.
        self._loop = asyncio.new_event_loop()

    def _param_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups; the default is the policy's trainable parameters."""
        return [{"params": trainable_parameters(self.policy.model)}]

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
            if self.budget_exhausted:  # real mode: the budget of real steps is spent
                break
            metrics = self.step()
            self.iteration += 1
            if self.iteration % self.config.checkpoint_every == 0:
                self.save_checkpoint()
        self.save_checkpoint()
        return metrics

    def step(self) -> dict[str, Any]:
        """One iteration; returns its metrics (subclasses implement it)."""
        raise NotImplementedError

    @property
    def budget_exhausted(self) -> bool:
        """Whether the pool's budget of real steps is spent (never for imagined pools)."""
        return bool(getattr(self.pool, "budget_exhausted", False))

    def sample_tasks(self) -> list[Task]:
        """B tasks for this iteration (seed tasks plus λ-capped curriculum variations)."""
        c = self.config
        return self.task_source.sample(
            c.tasks_per_iteration, seed=c.seed * 100_003 + self.iteration
        )

    def collect(self, tasks: list[Task]) -> list[Rollout]:
        """G multi-turn rollouts per task with the current policy (no gradient)."""
        c = self.config
        self.policy.model.eval()
        return self.run_async(  # type: ignore[no-any-return]
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

    def run_epochs(
        self,
        decisions: list[Decision],
        minibatch: Callable[[list[int], list[torch.Tensor] | None], dict[str, float]],
    ) -> dict[str, float]:
        """μ epochs of ``minibatch(indices, reference rows)`` over length-grouped minibatches.

        Reference log-probs are computed once, before the first update. Returns the mean of
        every stat over the minibatches that returned it.
        """
        if not decisions:
            return {}
        lengths = [len(d.prompt_ids) + len(d.completion_ids) for d in decisions]
        rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=self.generator)))
        ref = self._reference_log_probs(decisions, lengths, rng)
        self._train_mode(True)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for _ in range(self.config.epochs_per_iteration):
            for idx in length_grouped_batches(lengths, self.config.minibatch_size, rng):
                stats = minibatch(idx, None if ref is None else [ref[i] for i in idx])
                for k, v in stats.items():
                    sums[k], counts[k] = sums.get(k, 0.0) + v, counts.get(k, 0) + 1
        self._train_mode(False)
        return {k: v / counts[k] for k, v in sums.items()}

    def _train_mode(self, training: bool) -> None:
        self.policy.model.train(training)

    def _reference_log_probs(
        self, decisions: list[Decision], lengths: list[int], rng: random.Random
    ) -> list[torch.Tensor] | None:
        """log π_ref of every turn's completion tokens (None when β = 0)."""
        if self.config.beta == 0:
            return None
        policy, context = self._reference_policy()
        out: list[torch.Tensor | None] = [None] * len(decisions)
        with torch.no_grad(), context:
            for idx in length_grouped_batches(lengths, self.config.minibatch_size, rng):
                lp, _ = policy.completion_log_probs([decisions[i] for i in idx])
                for row, i in enumerate(idx):
                    out[i] = lp[row]
        return [t for t in out if t is not None]

    def _reference_policy(self) -> tuple[LMPolicy, AbstractContextManager[Any]]:
        if self.reference is None:  # LoRA: the policy with its adapters switched off
            return self.policy, self.policy.model.disable_adapter()
        ref = LMPolicy(self.reference, self.policy.tokenizer, decoding=self.policy.decoding)
        return ref, nullcontext()

    def apply_gradients(self, loss: torch.Tensor) -> float:
        """Backward, clip the global gradient norm, optimizer step; returns the norm."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        self.optimizer.step()
        return float(grad_norm)

    @staticmethod
    def loss_metrics(loss: torch.Tensor, stats: dict[str, torch.Tensor]) -> dict[str, float]:
        """Loss stats under their metric names, plus ``loss/total``."""
        out = {_METRIC_NAMES.get(k, f"policy/{k}"): float(v) for k, v in stats.items()}
        out["loss/total"] = float(loss.detach())
        return out

    def finish_iteration(
        self,
        tasks: list[Task],
        rollouts: list[Rollout],
        metrics: dict[str, Any],
        t0: float,
        t1: float,
    ) -> dict[str, Any]:
        """Report outcomes, push synthetic trajectories, curriculum, count steps, log."""
        t2 = time.perf_counter()
        self.report_outcomes(tasks, rollouts)
        pushed = self.push_synthetic(rollouts)
        pushed_real = self.push_real(rollouts)
        generated = self.maybe_generate_tasks()
        refreshed = self.maybe_refresh_experience_model()
        steps = sum(len(r.transitions) for r in rollouts)
        self.env_steps += steps
        metrics = {**self.rollout_metrics(rollouts), **metrics, **refreshed}
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
        if getattr(self.pool, "real", False):
            metrics["replay/pushed_real_trajectories"] = pushed_real
            metrics["real/env_steps_total"] = int(getattr(self.pool, "real_steps", 0))
            metrics["real/budget_exhausted"] = self.budget_exhausted
        self._log(metrics)
        return metrics

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
        version, env = self.policy_version, self.config.environment
        converted = [
            to_trajectory(r, environment=env, source="synthetic", policy_version=version)
            for r in rollouts
        ]
        trajectories = [t for t in converted if t is not None]
        if trajectories:
            self.replay.push(trajectories)
        return len(trajectories)

    def push_real(self, rollouts: list[Rollout]) -> int:
        """Real mode with ``push_real``: add the valid real rollouts to the replay store, tagged
        ``source="real"`` with this policy version (masked rollouts are never pushed)."""
        if (
            self.replay is None
            or not getattr(self.config, "push_real", False)
            or not getattr(self.pool, "real", False)
        ):
            return 0
        version, env = self.policy_version, self.config.environment
        converted = [
            to_trajectory(r, environment=env, source="real", policy_version=version)
            for r in rollouts
        ]
        trajectories = [t for t in converted if t is not None]
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

    def maybe_refresh_experience_model(self) -> dict[str, float]:
        """Every ``em_refresh_every`` iterations (imagined rollouts only), retrain and reload the
        experience model on the grown buffer; returns the refresh's metrics (or none)."""
        every = self.config.em_refresh_every
        if (
            self.em_refresher is None
            or every == 0
            or (self.iteration + 1) % every != 0
            or getattr(self.pool, "real", False)
        ):
            return {}
        return self.em_refresher.refresh(self.iteration)

    def rollout_metrics(self, rollouts: list[Rollout]) -> dict[str, Any]:
        """``rollout/*`` metrics of the valid rollouts; failed ones are counted and logged."""
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
            "rollout/episode_return": sum(r.episode_return for r in ok) / len(ok) if ok else 0.0,
            "rollout/success_rate": sum(r.won for r in ok) / max(1, len(ok)),
            "rollout/episode_length": sum(len(r.transitions) for r in ok) / max(1, len(ok)),
            "rollout/valid_fraction": len(ok) / len(rollouts),
            "rollout/failed": len(errors),
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
        """Write policy weights (or LoRA adapters), tokenizer, optimizer and trainer state.

        Updates the ``latest`` link. Subclasses add their own files in :meth:`_save_extra`.
        """
        path = self.run_dir / "checkpoints" / f"iter-{self.iteration:05d}"
        c = self.config.policy
        save_policy_model(
            self.policy.model,
            self.policy.tokenizer,
            path,
            base_model=c.model,
            init_seed=c.init_seed,
        )
        self._save_extra(path)
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state()},
            path / "trainer_state.pt",
        )
        (path / "trainer_state.json").write_text(
            json.dumps(
                {
                    "iteration": self.iteration,
                    "env_steps": self.env_steps,
                    "real_steps": int(getattr(self.pool, "real_steps", 0)),
                }
            )
        )
        latest = self.run_dir / "checkpoints" / "latest"
        latest.unlink(missing_ok=True)
        latest.symlink_to(path.name)
        return path

    def _save_extra(self, path: Path) -> None:
        """Hook: write subclass-specific files into checkpoint ``path``."""

    def load_checkpoint(self, path: Path) -> None:
        """Resume optimizer, RNG and counters from a checkpoint written by this trainer.

        The policy weights are loaded by whoever builds the policy (from the same directory).
        """
        state = torch.load(path / "trainer_state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        meta = json.loads((path / "trainer_state.json").read_text())
        self.iteration, self.env_steps = int(meta["iteration"]), int(meta["env_steps"])
        if getattr(self.pool, "real", False) and hasattr(self.pool, "real_steps"):
            # a resumed real run keeps spending the same budget
            self.pool.real_steps = int(meta.get("real_steps", 0))
