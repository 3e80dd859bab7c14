"""The shared body of the RL training jobs (``grpo``, ``ppo``).

Rollouts go through the experience model over REST (``ImaginedEnvPool``), tasks come from
``/tasks`` (with curriculum), imagined trajectories go back to the replay store. The initial policy
is checkpointed before the first update (``iter-00000``: the "before RL" policy). A job restarted
with ``resume`` continues from its latest checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_trainer.config import PolicyConfig, RLConfig
from agent_trainer.em_refresh import build_refresher
from agent_trainer.env_pools import ImaginedEnvPool
from agent_trainer.jobs.schemas import ServiceURLs
from agent_trainer.policy import LMPolicy
from agent_trainer.policy_io import load_policy_model
from agent_trainer.rl_trainer import RLTrainer
from dreamgym.clients.experience_model import AsyncExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.envs.accounting import real_steps_total
from dreamgym.errors import DreamGymError
from dreamgym.jobs import JobContext
from dreamgym.types import Task, Trajectory

__all__ = ["RestReplaySink", "RestTaskSource", "load_job_policy", "run_training"]

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
        Final metrics, checkpoint paths and the measured real-interaction count.
    """
    run_dir = ctx.workdir / "run"

    def on_metrics(iteration: int, metrics: dict[str, Any]) -> None:
        ctx.log_metrics(iteration, metrics)
        ctx.report(
            progress=(iteration + 1) / cfg.iterations,
            message=f"iteration {iteration + 1}/{cfg.iterations}: imagined success "
            f"{metrics['rollout/success_rate']:.2f}",
        )

    em = AsyncExperienceModelClient(
        services.experience_model or "", timeout_s=600, api_key=services.api_key
    )
    with (
        TaskGeneratorClient(
            services.task_generator or "", timeout_s=600, api_key=services.api_key
        ) as tasks,
        ReplayStoreClient(
            services.replay_store or "", timeout_s=300, api_key=services.api_key
        ) as replay,
    ):
        trainer = make_trainer(
            policy=policy,
            pool=ImaginedEnvPool(em, options=cfg.episode_options),
            task_source=RestTaskSource(tasks, cfg.environment),
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
            trainer.run_async(em.aclose())
            trainer.close()
            if trainer.em_refresher is not None:
                trainer.em_refresher.client.close()  # type: ignore[attr-defined]
        real_during_rl = real_steps_total() - real_before
        ctx.raise_if_cancelled()
    final = (run_dir / "checkpoints" / "latest").resolve()
    ctx.report(checkpoint=str(final))
    return {
        "final_checkpoint": str(final),
        "initial_checkpoint": str(initial or run_dir / "checkpoints" / "iter-00000"),
        "iterations": trainer.iteration,
        "imagined_env_steps": trainer.env_steps,
        "real_env_steps": real_during_rl,  # measured: real adapter steps in this process
        "final_metrics": metrics,
        "metrics_file": str(run_dir / "metrics.jsonl"),
        "resumed_from": str(resumed_from) if resumed_from else None,
        "experience_model_refreshes": getattr(trainer.em_refresher, "history", []),
    }
