"""``grpo`` job: train the policy with GRPO in the imagined environment.

Rollouts go through the experience model over REST (``ImaginedEnvPool``), tasks come from
``/tasks`` (with curriculum), imagined trajectories go back to the replay store. The initial policy
is checkpointed before the first update (``iter-00000``: the "before RL" policy). A job restarted
with ``resume`` continues from its latest checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agent_trainer.env_pools import ImaginedEnvPool
from agent_trainer.jobs.schemas import GRPOJobConfig, grpo_config
from agent_trainer.policy import LMPolicy
from agent_trainer.trainer import GRPOTrainer
from dreamgym.clients.experience_model import AsyncExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.envs.accounting import real_steps_total
from dreamgym.errors import DreamGymError
from dreamgym.jobs import JobContext
from dreamgym.llm.models import load_causal_lm
from dreamgym.types import Task, Trajectory

__all__ = ["RestReplaySink", "RestTaskSource", "run"]

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


def _policy(model_spec: str, run_dir: Path, cfg: Any, resume: bool) -> tuple[LMPolicy, Path | None]:
    latest = run_dir / "checkpoints" / "latest"
    start = latest.resolve() if resume and latest.exists() else None
    model, tokenizer = load_causal_lm(
        str(start) if start else model_spec, device=cfg.device, dtype=cfg.dtype, seed=cfg.init_seed
    )
    return LMPolicy(
        model, tokenizer, history_length=cfg.history_length, decoding=cfg.decoding
    ), start


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Train; returns final metrics, checkpoint paths and the real-interaction count (0)."""
    job = GRPOJobConfig.model_validate(config)
    cfg = grpo_config(config)
    run_dir = ctx.workdir / "run"
    policy, resumed_from = _policy(cfg.policy.model, run_dir, cfg.policy, job.resume)
    em = AsyncExperienceModelClient(job.services.experience_model or "", timeout_s=600)
    pool = ImaginedEnvPool(em)
    with (
        TaskGeneratorClient(job.services.task_generator or "", timeout_s=600) as tasks,
        ReplayStoreClient(job.services.replay_store or "", timeout_s=300) as replay,
    ):
        trainer = GRPOTrainer(
            cfg,
            policy=policy,
            pool=pool,
            task_source=RestTaskSource(tasks, cfg.environment),
            replay=RestReplaySink(replay),
            run_dir=run_dir,
            on_metrics=lambda it, m: (
                ctx.log_metrics(it, m)
                or ctx.report(
                    progress=(it + 1) / cfg.iterations,
                    message=f"iteration {it + 1}/{cfg.iterations}: imagined success "
                    f"{m['rollout/success_rate']:.2f}",
                )
            ),
            should_stop=ctx.cancelled,
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
    }
