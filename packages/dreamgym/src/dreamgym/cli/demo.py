"""The main job: DreamGym end to end on a real text environment, driven over the services' APIs.

1. start the local stack (PostgreSQL + pgvector, the four services);
2. ``collect`` — real expert / random / ε-greedy episodes on train games → replay store, tasks;
3. experience-model SFT (``/v1/training-jobs``), then ``/v1/model:reload``;
4. ``fidelity`` — the experience model on held-out real transitions;
5. ``grpo`` — the policy trained in the imagined environment only (0 real steps);
6. ``evaluate`` — random, before-RL and DreamGym policies on the same held-out real games;
7. the report (``report.json``, ``report.md``, ``training_curve.png``).
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from dreamgym.clients.agent_trainer import AgentTrainerClient, wait_for_job
from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.jobs import JobRecord
from dreamgym.pipeline import collect_job, default_stack, evaluate_job, fidelity_job, sft_job
from dreamgym.report import write_report
from dreamgym.stack.local import LocalStack, StackConfig

__all__ = ["PRESETS", "DemoConfig", "default_stack", "run_demo"]


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """Everything the main job does, with the CPU-demo defaults."""

    environment: str = "twx-coin"
    max_steps: int = 10
    seed: int = 0
    # seed data
    train_seeds: int = 120
    collect_policies: tuple[str, ...] = ("expert", "random", "epsilon_greedy:0.3")
    eval_tasks: int = 200
    # experience model
    em_base_model: str = "tiny:layers=4,hidden=256,heads=4,intermediate=768"
    em_steps: int = 250
    em_batch_size: int = 16
    em_learning_rate: float = 1e-3
    retrieval_k: int = 2
    history_length: int = 2
    fidelity_episodes: int = 60
    # agent
    policy_model: str = "tiny:layers=2,hidden=128,heads=4,intermediate=512"
    grpo: dict[str, Any] = field(
        default_factory=lambda: {
            "iterations": 10,
            "tasks_per_iteration": 8,
            "group_size": 8,
            "learning_rate": 1e-3,
            "epochs_per_iteration": 2,
            "minibatch_size": 128,
            "curriculum_every": 4,
            "curriculum_seed_tasks": 4,
            "curriculum_variations": 2,
            "checkpoint_every": 4,
        }
    )
    # evaluation
    eval_episodes: int = 200
    eval_greedy: bool = False


PRESETS: dict[str, DemoConfig] = {
    "default": DemoConfig(),
    # A few minutes: wiring checks and CI, not a result.
    "quick": DemoConfig(
        train_seeds=12,
        eval_tasks=10,
        # the smallest experience model that learns the output format in minutes (rollouts
        # must be valid for the loop to be exercised: synthetic pushes, curriculum reports)
        em_base_model="tiny:layers=2,hidden=128,heads=4,intermediate=256",
        em_steps=200,
        em_learning_rate=2e-3,
        fidelity_episodes=4,
        eval_episodes=12,
        grpo={
            "iterations": 2,
            "tasks_per_iteration": 2,
            "group_size": 2,
            "minibatch_size": 32,
            "curriculum_every": 1,
            "curriculum_seed_tasks": 2,
            "curriculum_variations": 1,
            "checkpoint_every": 1,
        },
    ),
}


class _Phases:
    """Progress display and timing of the demo's phases."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description:<34}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=console,
        )
        self.seconds: dict[str, float] = {}

    def job(self, name: str, get: Any, job: JobRecord) -> JobRecord:
        task = self.progress.add_task(name, total=1.0, note="")
        start = time.perf_counter()

        last = {"message": "", "time": 0.0}

        def update(r: JobRecord) -> None:
            self.progress.update(task, completed=r.progress, note=r.message[:60])
            now = time.perf_counter()
            if (
                not self.console.is_terminal
                and r.message != last["message"]
                and now - last["time"] > 10.0
            ):  # plain lines when there is no live display
                self.console.print(f"{name}: {100 * r.progress:5.1f}% {r.message}", markup=False)
                last.update(message=r.message, time=now)

        record = wait_for_job(get, job.job_id, on_update=update, poll_s=1.0)
        self.progress.update(task, completed=1.0)
        self.seconds[name] = time.perf_counter() - start
        return record


def _policy_eval(
    trainer: AgentTrainerClient, phases: _Phases, cfg: DemoConfig, name: str, policy: str
) -> dict[str, Any]:
    job = trainer.submit(
        "evaluate",
        evaluate_job(
            cfg.environment,
            policy=policy,
            episodes=cfg.eval_episodes,
            max_steps=cfg.max_steps,
            greedy=cfg.eval_greedy,
            seed=cfg.seed,
            history_length=cfg.history_length,
        ),
    )
    return phases.job(f"evaluate: {name}", trainer.get_job, job).result or {}


def _pipeline(
    cfg: DemoConfig, urls: dict[str, str], out_dir: Path, phases: _Phases
) -> dict[str, Any]:
    trainer = AgentTrainerClient(urls["agent_trainer"], timeout_s=120)
    em = ExperienceModelClient(urls["experience_model"], timeout_s=600)
    collect = (
        phases.job(
            "seed data (real env)",
            trainer.get_job,
            trainer.submit(
                "collect",
                collect_job(
                    cfg.environment,
                    train_seeds=cfg.train_seeds,
                    eval_tasks=cfg.eval_tasks,
                    max_steps=cfg.max_steps,
                    policies=cfg.collect_policies,
                    seed=cfg.seed,
                ),
            ),
        ).result
        or {}
    )
    sft = (
        phases.job(
            "experience model SFT",
            em.get_training,
            em.start_training(
                sft_job(
                    urls,
                    environment=cfg.environment,
                    output_dir=out_dir / "experience_model",
                    base_model=cfg.em_base_model,
                    steps=cfg.em_steps,
                    batch_size=cfg.em_batch_size,
                    learning_rate=cfg.em_learning_rate,
                    retrieval_k=cfg.retrieval_k,
                    history_length=cfg.history_length,
                    seed=cfg.seed,
                )
            ),
        ).result
        or {}
    )
    em.reload(sft["checkpoint"])
    fidelity = (
        phases.job(
            "experience model fidelity",
            trainer.get_job,
            trainer.submit(
                "fidelity",
                fidelity_job(
                    cfg.environment,
                    episodes=cfg.fidelity_episodes,
                    max_steps=cfg.max_steps,
                    seed=cfg.seed,
                ),
            ),
        ).result
        or {}
    )
    grpo_job = trainer.submit(
        "grpo",
        {
            "grpo": {
                **cfg.grpo,
                "environment": cfg.environment,
                "max_steps": cfg.max_steps,
                "seed": cfg.seed,
                "policy": {"model": cfg.policy_model, "history_length": cfg.history_length},
            }
        },
    )
    grpo = phases.job("GRPO in the imagined env", trainer.get_job, grpo_job).result or {}
    curve = trainer.metrics(grpo_job.job_id)
    policies = {
        "random": _policy_eval(trainer, phases, cfg, "random", "random"),
        "before_rl": _policy_eval(trainer, phases, cfg, "before RL", grpo["initial_checkpoint"]),
        "dreamgym": _policy_eval(trainer, phases, cfg, "DreamGym", grpo["final_checkpoint"]),
    }
    trainer.close()
    em.close()
    return {
        "collect": collect,
        "sft": sft,
        "fidelity": fidelity,
        "grpo": grpo,
        "policies": policies,
        "curve": curve,
    }


def _stop_on_sigterm() -> Any:
    """Turn SIGTERM into ``SystemExit`` so ``kill`` also stops the stack (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, handler)


def run_demo(
    cfg: DemoConfig,
    out_dir: Path,
    *,
    console: Console | None = None,
    keep_running: bool = False,
    stack: StackConfig | None = None,
) -> dict[str, Path]:
    """Run the main job and write the report into ``out_dir``; returns the report paths."""
    console = console or Console()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    stack_cfg = stack or default_stack(out_dir)
    local = LocalStack(stack_cfg)
    start = time.perf_counter()
    phases = _Phases(console)
    previous = _stop_on_sigterm()
    try:
        t = time.perf_counter()
        urls = local.up(log=lambda msg: console.print(f"[dim]{msg}[/dim]"))
        phases.seconds["stack start"] = time.perf_counter() - t
        with phases.progress:
            results = _pipeline(cfg, urls, out_dir, phases)
    finally:
        if not keep_running:
            local.down()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    collect, fidelity, grpo = results["collect"], results["fidelity"], results["grpo"]
    evaluation_steps = sum(int(p.get("real_steps", 0)) for p in results["policies"].values())
    report = {
        "environment": cfg.environment,
        "seconds": round(time.perf_counter() - start, 1),
        "phase_seconds": {k: round(v, 1) for k, v in phases.seconds.items()},
        "policies": results["policies"],
        "real_interactions_rl": int(grpo.get("real_env_steps", 0)),
        "real_interactions": {
            "seed_data": collect.get("real_steps", 0),
            "fidelity_measurement": fidelity.get("real_steps", 0),
            "policy_evaluation": evaluation_steps,
            "rl_training": int(grpo.get("real_env_steps", 0)),
        },
        "experience_model": {
            "fidelity": fidelity,
            "sft": {k: v for k, v in results["sft"].items() if k != "loss_curve"},
        },
        "seed_data": collect,
        "training": {k: v for k, v in grpo.items() if k != "final_metrics"}
        | {"final_metrics": grpo.get("final_metrics", {})},
        "config": asdict(cfg)
        | {"stack": {k: str(v) for k, v in asdict(stack_cfg).items() if k != "extra_env"}},
    }
    paths = write_report(report, results["curve"], out_dir)
    return paths


def preset(name: str, **overrides: Any) -> DemoConfig:
    """A preset with overrides applied.

    Raises:
        ValueError: unknown preset (lists the valid ones).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset '{name}'; valid: {sorted(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
