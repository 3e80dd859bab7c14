"""The shared body of the RL training jobs (``grpo``, ``ppo``).

``environment_mode="imagined"`` (default): rollouts go through the experience model over REST
(``ImaginedEnvPool``), tasks come from ``/tasks`` (with curriculum), imagined trajectories go back
to the replay store. ``environment_mode="real"`` (the real-environment baseline and sim-to-real,
paper §4.3): rollouts run in real adapters (``RealEnvPool``) on the train-split games of the seed
tasks, within ``real_step_budget`` real steps; the curriculum is off. The initial policy is
checkpointed before the first update (``iter-00000``: the "before RL" policy). A job restarted
with ``resume`` continues from its latest checkpoint (a real run keeps its spent budget).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from agent_trainer.config import PolicyConfig, RLConfig
from agent_trainer.em_refresh import build_refresher
from agent_trainer.env_pools import EnvPool, ImaginedEnvPool, RealEnvPool
from agent_trainer.jobs.schemas import ServiceURLs
from agent_trainer.policy import LMPolicy
from agent_trainer.policy_io import load_policy_model
from agent_trainer.rl_trainer import RLTrainer
from dreamgym.clients.experience_model import AsyncExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.curriculum.scoring import sample_task_batch
from dreamgym.envs import make_env
from dreamgym.envs.accounting import real_steps_total
from dreamgym.errors import DreamGymError
from dreamgym.jobs import JobContext
from dreamgym.types import Task, Trajectory

__all__ = [
    "RestReplaySink",
    "RestTaskSource",
    "RunTaskSource",
    "load_job_policy",
    "run_training",
]

logger = logging.getLogger(__name__)


class RestTaskSource:
    """Tasks and curriculum from the task generator service."""

    def __init__(self, client: TaskGeneratorClient, environment: str) -> None:
        self.client, self.environment = client, environment

    def sample(self, batch_size: int, seed: int) -> list[Task]:
        return self.client.sample(
            batch_size, split="train", seed=seed, environment=self.environment
        )

    def report(self, task_id: str, rewards: list[float], policy_version: str) -> None:
        self.client.report_outcomes(task_id, rewards, policy_version)

    def generate(self, num_seed_tasks: int, variations_per_task: int, seed: int) -> int:
        try:
            out = self.client.generate(
                num_seed_tasks,
                variations_per_task,
                environment=self.environment,
                seed=seed,
                timeout_s=600,
            )
        except DreamGymError as exc:  # e.g. no generator model configured: train on seed tasks
            logger.warning("curriculum generation skipped: %s", exc)
            return 0
        return len(out.created)


class RunTaskSource:
    """The train seed tasks of one environment plus the variations *this run* generated.

    Runs that share a task generator (an experiment's rows and seeds) would otherwise sample
    each other's generated tasks; here the batch is drawn client-side from the environment's seed
    tasks and the tasks returned by this run's own ``generate`` calls, with at most
    floor(λ·B) generated ones (:func:`dreamgym.curriculum.scoring.sample_task_batch`, uniform
    within each pool). Outcomes still go to the task generator, which picks the
    highest-variance tasks to vary (paper Eq. 7).

    Args:
        client: task generator client.
        environment: environment id of the seed tasks.
        generated_fraction: λ in [0, 1].
        curriculum: call the generator and report outcomes (False in real mode: generated tasks
            have no real game, and the real baseline has no curriculum).
        page_size: seed tasks fetched per request.

    Raises (on first ``sample``):
        RuntimeError: the environment has no train seed task with a game seed.
    """

    def __init__(
        self,
        client: TaskGeneratorClient,
        environment: str,
        *,
        generated_fraction: float,
        curriculum: bool = True,
        page_size: int = 1000,
    ) -> None:
        self.client, self.environment = client, environment
        self.generated_fraction, self.curriculum = generated_fraction, curriculum
        self.page_size = page_size
        self._seeds: dict[str, Task] | None = None
        self.generated: dict[str, Task] = {}

    def seed_tasks(self) -> dict[str, Task]:
        """``task_id → task`` of the environment's train seed tasks (fetched once)."""
        if self._seeds is None:
            seeds: dict[str, Task] = {}
            while True:
                page = self.client.list_tasks(
                    split="train",
                    origin="seed",
                    environment=self.environment,
                    limit=self.page_size,
                    offset=len(seeds),
                )
                seeds.update({t.task_id: t for t in page.data})
                if not page.data or len(seeds) >= page.count:
                    break
            seeds = {k: t for k, t in seeds.items() if t.game_seed is not None}
            if not seeds:
                raise RuntimeError(
                    f"no train seed tasks with a game seed for environment {self.environment!r}"
                    " (run a collect job first)"
                )
            self._seeds = seeds
        return self._seeds

    def sample(self, batch_size: int, seed: int) -> list[Task]:
        seeds = self.seed_tasks()
        ids = sample_task_batch(
            sorted(seeds),
            sorted(self.generated),
            batch_size,
            max_generated_fraction=self.generated_fraction,
            rng=np.random.default_rng(seed),
        )
        return [seeds.get(i) or self.generated[i] for i in ids]

    def report(self, task_id: str, rewards: list[float], policy_version: str) -> None:
        if self.curriculum:
            self.client.report_outcomes(task_id, rewards, policy_version)

    def generate(self, num_seed_tasks: int, variations_per_task: int, seed: int) -> int:
        if not self.curriculum:
            return 0
        try:
            out = self.client.generate(
                num_seed_tasks,
                variations_per_task,
                environment=self.environment,
                seed=seed,
                timeout_s=600,
            )
        except DreamGymError as exc:  # e.g. no generator model configured: train on seed tasks
            logger.warning("curriculum generation skipped: %s", exc)
            return 0
        self.generated.update({t.task_id: t for t in out.created})
        return len(out.created)


class RestReplaySink:
    """Imagined trajectories into the replay store."""

    def __init__(self, client: ReplayStoreClient) -> None:
        self.client = client

    def push(self, trajectories: list[Trajectory]) -> None:
        self.client.ingest(trajectories)


def load_job_policy(cfg: PolicyConfig, run_dir: Path, resume: bool) -> tuple[LMPolicy, Path | None]:
    """The policy to train: the run's latest checkpoint when resuming, else ``cfg.model``.

    Returns:
        ``(policy, checkpoint it was resumed from or None)``; LoRA adapters are added when
        ``cfg.lora`` is set (a LoRA checkpoint brings its own).
    """
    latest = run_dir / "checkpoints" / "latest"
    start = latest.resolve() if resume and latest.exists() else None
    model, tokenizer = load_policy_model(
        str(start) if start else cfg.model,
        device=cfg.device,
        dtype=cfg.dtype,
        seed=cfg.init_seed,
        lora=cfg.lora,
    )
    policy = LMPolicy(model, tokenizer, history_length=cfg.history_length, decoding=cfg.decoding)
    return policy, start


@contextlib.contextmanager
def _rollout_environment(
    services: ServiceURLs, cfg: RLConfig, tasks: TaskGeneratorClient
) -> Iterator[tuple[EnvPool, Any, AsyncExperienceModelClient | None]]:
    """``(pool, task source, experience-model client or None)`` of ``cfg.environment_mode``."""
    if cfg.environment_mode == "real":
        pool = RealEnvPool(
            lambda: make_env(cfg.environment, max_steps=cfg.max_steps),
            max_concurrency=cfg.real_env_concurrency,
            step_budget=cfg.real_step_budget,
        )
        source = RunTaskSource(tasks, cfg.environment, generated_fraction=0.0, curriculum=False)
        try:
            yield pool, source, None
        finally:
            pool.shutdown()
        return
    em = AsyncExperienceModelClient(
        services.experience_model or "", timeout_s=600, api_key=services.api_key
    )
    task_source: Any = (
        RunTaskSource(tasks, cfg.environment, generated_fraction=cfg.generated_task_fraction)
        if cfg.task_scope == "run"
        else RestTaskSource(tasks, cfg.environment)
    )
    yield ImaginedEnvPool(em, options=cfg.episode_options), task_source, em


def run_training(
    services: ServiceURLs,
    cfg: RLConfig,
    ctx: JobContext,
    make_trainer: Callable[..., RLTrainer],
    *,
    policy: LMPolicy,
    resumed_from: Path | None,
) -> dict[str, Any]:
    """Train with ``make_trainer(policy=, pool=, task_source=, replay=, run_dir=, …)``.

    Returns:
        Final metrics, checkpoint paths, ``environment_mode``, the measured real-interaction
        count ``real_env_steps`` (0 in imagined mode; in real mode the steps of this run, also
        across a resume) and, in real mode, ``real_step_budget`` and ``budget_exhausted``.
    """
    run_dir = ctx.workdir / "run"
    budget = cfg.real_step_budget

    with (
        TaskGeneratorClient(
            services.task_generator or "", timeout_s=600, api_key=services.api_key
        ) as tasks,
        ReplayStoreClient(
            services.replay_store or "", timeout_s=300, api_key=services.api_key
        ) as replay,
        _rollout_environment(services, cfg, tasks) as (pool, task_source, em),
    ):

        def on_metrics(iteration: int, metrics: dict[str, Any]) -> None:
            ctx.log_metrics(iteration, metrics)
            done = (iteration + 1) / cfg.iterations
            where = "imagined"
            if budget is not None:  # real mode: the budget usually ends the run first
                done = max(done, metrics.get("real/env_steps_total", 0) / budget)
                where = "real"
            ctx.report(
                progress=done,
                message=f"iteration {iteration + 1}/{cfg.iterations}: {where} success "
                f"{metrics['rollout/success_rate']:.2f}",
            )

        trainer = make_trainer(
            policy=policy,
            pool=pool,
            task_source=task_source,
            replay=RestReplaySink(replay),
            run_dir=run_dir,
            on_metrics=on_metrics,
            should_stop=ctx.cancelled,
            em_refresher=build_refresher(
                services.experience_model,
                services.replay_store,
                api_key=services.api_key,
                environment=cfg.environment,
                every=cfg.em_refresh_every,
                overrides=cfg.em_refresh_sft,
                run_dir=run_dir,
            ),
        )
        if resumed_from is not None:
            trainer.load_checkpoint(resumed_from)
        initial = trainer.save_checkpoint() if resumed_from is None else None
        real_before = real_steps_total()
        try:
            metrics = trainer.train()
        finally:
            if em is not None:
                trainer.run_async(em.aclose())
            trainer.close()
            if trainer.em_refresher is not None:
                trainer.em_refresher.client.close()  # type: ignore[attr-defined]
        real_during_rl = real_steps_total() - real_before
        ctx.raise_if_cancelled()
    final = (run_dir / "checkpoints" / "latest").resolve()
    ctx.report(checkpoint=str(final))
    out: dict[str, Any] = {
        "final_checkpoint": str(final),
        "initial_checkpoint": str(initial or run_dir / "checkpoints" / "iter-00000"),
        "iterations": trainer.iteration,
        "environment_mode": cfg.environment_mode,
        "imagined_env_steps": 0 if pool.real else trainer.env_steps,
        # measured: real adapter steps in this process (plus, in real mode, those of the
        # attempts this run resumed from)
        "real_env_steps": int(getattr(pool, "real_steps", real_during_rl))
        if pool.real
        else real_during_rl,
        "final_metrics": metrics,
        "metrics_file": str(run_dir / "metrics.jsonl"),
        "resumed_from": str(resumed_from) if resumed_from else None,
        "experience_model_refreshes": getattr(trainer.em_refresher, "history", []),
    }
    if pool.real:
        out["real_env_steps_this_process"] = real_during_rl
        out["real_step_budget"] = budget
        out["budget_exhausted"] = trainer.budget_exhausted
    return out
