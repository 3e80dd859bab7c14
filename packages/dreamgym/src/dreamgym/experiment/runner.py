"""Run an experiment through the services: one local stack per environment, jobs over REST.

Per environment (a table column), on a fresh stack (its own databases, so columns never share
tasks or buffers):

1. ``collect`` — real seed data (expert / random / ε-greedy) → replay store; tasks registered;
2. experience-model SFT → ``/v1/model:reload``; ``fidelity`` on held-out real transitions
   (with an optional LLM judge of the predictions, ``judge``);
3. ablation experience models, each served by its own experience-model process
   (:meth:`~dreamgym.stack.local.LocalStack.start_replica`): ``no_replay`` (trained and served
   with retrieval off), ``no_reasoning`` (trained without reasoning traces — n/a while no stored
   transition carries one);
4. for every seed: the RL and BC jobs of every row (imagined rows sample from their own task
   pool, ``task_scope="run"``, so rows and seeds never train on each other's generated tasks),
   then the S2R jobs (from the DreamGym checkpoints), then one ``evaluate`` job playing every
   row's policy on the same held-out real games;
5. aggregation (:mod:`dreamgym.experiment.tables`), plots, ``experiment.json`` /
   ``experiment.md``.

Jobs run one at a time, so each job's wall/CPU time (:attr:`dreamgym.jobs.JobRecord.usage`) is
uncontended by other jobs, and the CPU the services spend meanwhile (e.g. the experience model
serving imagined steps) is attributed to that job.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dreamgym.clients.agent_trainer import AgentTrainerClient, JobFailedError, wait_for_job
from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.errors import DreamGymError
from dreamgym.experiment.config import ROWS, ExperimentConfig
from dreamgym.experiment.plots import plot_success_vs_real, plot_training_curves
from dreamgym.experiment.tables import aggregate_cell, check_claims, markdown_report, na_cell
from dreamgym.jobs import JobRecord
from dreamgym.pipeline import (
    collect_job,
    default_stack,
    evaluate_job,
    fidelity_job,
    free_port,
    sft_job,
)
from dreamgym.stack.local import LocalStack, StackConfig
from dreamgym.usage import processes_cpu_seconds

__all__ = ["run_experiment"]

logger = logging.getLogger(__name__)

Log = Callable[[str], None]
IMAGINED_GRPO = ("dreamgym", "no_replay", "no_reasoning", "no_curriculum")
TRAINED_BEFORE_S2R = ("dreamgym", "dreamgym_ppo", "no_replay", "no_reasoning", "no_curriculum")
S2R_SOURCE = {"dreamgym_s2r": "dreamgym", "dreamgym_ppo_s2r": "dreamgym_ppo"}


@dataclass
class JobRun:
    """A finished job, with the CPU the stack's services spent while it ran."""

    record: JobRecord
    services_cpu_s: float

    @property
    def result(self) -> dict[str, Any]:
        return self.record.result or {}


class _Driver:
    """Submits jobs one at a time and measures the services' CPU around each."""

    def __init__(self, local: LocalStack, urls: dict[str, str], log: Log) -> None:
        self.local, self.urls, self.log = local, urls, log
        self.trainer = AgentTrainerClient(urls["agent_trainer"], timeout_s=120)
        self.em = ExperienceModelClient(urls["experience_model"], timeout_s=600)

    def close(self) -> None:
        self.trainer.close()
        self.em.close()

    def _services_cpu(self) -> float:
        return processes_cpu_seconds(self.local.service_pids().values())

    def _wait(self, name: str, get: Callable[[str], JobRecord], job: JobRecord) -> JobRecord:
        last = {"t": 0.0}

        def update(r: JobRecord) -> None:
            if time.monotonic() - last["t"] > 30.0:
                self.log(f"  {name}: {r.state} {100 * r.progress:.0f}% {r.message[:70]}")
                last["t"] = time.monotonic()

        return wait_for_job(get, job.job_id, poll_s=0.5, timeout_s=24 * 3600, on_update=update)

    def job(self, name: str, kind: str, config: dict[str, Any]) -> JobRun:
        """Run a trainer job to completion (raises :class:`JobFailedError` if it fails)."""
        before, t0 = self._services_cpu(), time.perf_counter()
        record = self._wait(name, self.trainer.get_job, self.trainer.submit(kind, config))
        run = JobRun(record, self._services_cpu() - before)
        self.log(f"  {name}: done in {time.perf_counter() - t0:.0f} s")
        return run

    def sft(self, name: str, config: dict[str, Any]) -> JobRun:
        """Run an experience-model SFT job to completion."""
        before, t0 = self._services_cpu(), time.perf_counter()
        record = self._wait(name, self.em.get_training, self.em.start_training(config))
        run = JobRun(record, self._services_cpu() - before)
        self.log(f"  {name}: done in {time.perf_counter() - t0:.0f} s")
        return run

    def curve(self, job_id: str) -> list[dict[str, Any]]:
        """A job's metric rows, reduced to what the training-curve plot needs."""
        return [
            {
                "iteration": int(r.get("iteration", r.get("step", 0))),
                "success_rate": r.get("rollout/success_rate"),
                "episode_return": r.get("rollout/episode_return"),
                "real_steps": r.get("real/env_steps_total"),
                "bc_nll": r.get("bc/nll"),
                "generated_tasks": r.get("curriculum/generated_tasks"),
            }
            for r in self.trainer.metrics(job_id)
        ]


def _failure(exc: Exception) -> str:
    if isinstance(exc, JobFailedError):
        text = exc.record.error or exc.record.state
        return (
            f"job {exc.record.kind} {exc.record.job_id} {exc.record.state}: "
            + (text.strip().splitlines() or [""])[0][:300]
        )
    return f"{type(exc).__name__}: {exc}"[:300]


class _Environment:
    """One column: its stack, shared experience models and every (row, seed) job."""

    def __init__(
        self,
        cfg: ExperimentConfig,
        env: str,
        out_dir: Path,
        stack: StackConfig,
        log: Log,
        judge: dict[str, Any] | None = None,
    ) -> None:
        self.cfg, self.env, self.out, self.log = cfg, env, out_dir, log
        self.stack = stack
        self.judge = judge
        self.rows = cfg.ordered_rows()
        self.shared: dict[str, Any] = {}
        self.na: dict[str, str] = {}
        self.em_urls: dict[str, str] = {}
        self.outcomes: dict[str, list[dict[str, Any]]] = {r: [] for r in self.rows}
        self.failed: dict[str, str] = {}
        self.curves: dict[str, dict[str, list[dict[str, Any]]]] = {r: {} for r in self.rows}
        self.aborted: str | None = None

    # -- shared parts ---------------------------------------------------------------------------
    def _sft(self, d: _Driver, name: str, output: str, **extra: Any) -> JobRun:
        c = self.cfg
        return d.sft(
            name,
            sft_job(
                d.urls,
                environment=self.env,
                output_dir=self.out / output,
                base_model=c.em_base_model,
                steps=c.em_steps,
                batch_size=c.em_batch_size,
                learning_rate=c.em_learning_rate,
                retrieval_k=c.retrieval_k,
                history_length=c.history_length,
                seed=c.seeds[0],
                device=c.device,
                **extra,
            ),
        )

    def _replica(self, d: _Driver, name: str, checkpoint: str, env: dict[str, str]) -> str:
        return d.local.start_replica(
            "experience_model",
            name=f"experience_model_{name}",
            port=free_port(),
            env={
                "EXPERIENCE_MODEL_MODEL_PATH": checkpoint,
                "EXPERIENCE_MODEL_REDIS_KEY_PREFIX": f"dreamgym:experience_model:{name}",
                **env,
            },
        )

    def _reasoning_traces(self, d: _Driver) -> int:
        with ReplayStoreClient(d.urls["replay_store"], timeout_s=300) as replay:
            return sum(
                1
                for t in replay.iter_transitions(environment=self.env, source="real")
                if t.reasoning
            )

    def prepare(self, d: _Driver) -> None:
        """Seed data, the experience model(s) and its fidelity."""
        c = self.cfg
        self.log(f"[{self.env}] seed data")
        collect = d.job(
            "collect",
            "collect",
            collect_job(
                self.env,
                train_seeds=c.train_seeds,
                eval_tasks=c.eval_tasks,
                max_steps=c.max_steps,
                policies=c.collect_policies,
                seed=c.seeds[0],
            ),
        )
        self.shared["collect"] = collect.result
        self.log(f"[{self.env}] experience model SFT")
        sft = self._sft(d, "experience model SFT", "experience_model")
        d.em.reload(sft.result["checkpoint"])
        self.em_urls["main"] = d.urls["experience_model"]
        self.shared["experience_model"] = {
            k: v for k, v in sft.result.items() if k not in ("loss_curve", "config")
        }
        self.shared["experience_model_usage"] = sft.record.usage
        if c.fidelity_episodes > 0:
            fidelity = d.job(
                "fidelity",
                "fidelity",
                fidelity_job(
                    self.env,
                    episodes=c.fidelity_episodes,
                    max_steps=c.max_steps,
                    seed=c.seeds[0],
                    judge=self.judge,
                ),
            )
            self.shared["fidelity"] = fidelity.result
        if "no_replay" in self.rows:
            self._prepare_no_replay(d)
        if "no_reasoning" in self.rows:
            self._prepare_no_reasoning(d)

    def _prepare_no_replay(self, d: _Driver) -> None:
        self.log(f"[{self.env}] experience model without retrieval (no_replay)")
        try:
            sft = self._sft(
                d, "SFT without retrieval", "experience_model_no_replay", use_retrieval=False
            )
            url = self._replica(
                d,
                "no_replay",
                sft.result["checkpoint"],
                {"EXPERIENCE_MODEL_USE_RETRIEVAL": "false"},
            )
        except (JobFailedError, DreamGymError, RuntimeError) as exc:
            self.failed["no_replay"] = f"experience model without retrieval: {_failure(exc)}"
            return
        self.em_urls["no_replay"] = url
        self.shared["experience_model_no_replay"] = {"url": url, **sft.result.get("config", {})}

    def _prepare_no_reasoning(self, d: _Driver) -> None:
        traces = self._reasoning_traces(d)
        self.shared["reasoning_traces"] = traces
        if traces == 0:
            self.na["no_reasoning"] = (
                "no stored real transition carries a reasoning trace (no teacher annotation "
                "was run), so an experience model trained without reasoning is the same model "
                "as the DreamGym row's"
            )
            return
        self.log(f"[{self.env}] experience model without reasoning ({traces} traces stored)")
        try:
            sft = self._sft(
                d, "SFT without reasoning", "experience_model_no_reasoning", use_reasoning=False
            )
        except (JobFailedError, DreamGymError) as exc:
            self.na["no_reasoning"] = f"the SFT job refused use_reasoning=false: {_failure(exc)}"
            return
        if (sft.result.get("config") or {}).get("use_reasoning") is not False:
            self.na["no_reasoning"] = (
                f"{traces} reasoning traces are stored, but the experience-model SFT has no "
                "use_reasoning switch to leave them out"
            )
            return
        self.em_urls["no_reasoning"] = self._replica(
            d, "no_reasoning", sft.result["checkpoint"], {}
        )

    # -- job configs ----------------------------------------------------------------------------
    def _policy(self, seed: int, model: str | None = None) -> dict[str, Any]:
        return {
            "model": model or self.cfg.policy_model,
            "init_seed": seed,
            "history_length": self.cfg.history_length,
            "device": self.cfg.device,
        }

    def _rl(self, row: str, seed: int) -> tuple[str, dict[str, Any]]:
        c = self.cfg
        ppo = row in ("dreamgym_ppo", "real_ppo", "dreamgym_ppo_s2r")
        kind = "ppo" if ppo else "grpo"
        section: dict[str, Any] = {
            **c.rl,
            **(c.ppo if ppo else {}),
            "environment": self.env,
            "max_steps": c.max_steps,
            "seed": seed,
            "policy": self._policy(seed),
        }
        services: dict[str, Any] = {}
        if row in ("real_grpo", "real_ppo", *S2R_SOURCE):
            section.update(c.real_rl)
            section.update(
                environment_mode="real",
                real_step_budget=c.s2r_steps if row in S2R_SOURCE else c.real_budget,
                real_env_concurrency=c.real_env_concurrency,
                curriculum_every=0,
                push_synthetic=False,
            )
        else:
            section["task_scope"] = "run"
            if row == "no_curriculum":
                section["curriculum_every"] = 0
            if row == "no_replay":
                section["push_synthetic"] = False
            if row in ("no_replay", "no_reasoning"):
                services["experience_model"] = self.em_urls[row]
        return kind, {kind: section, "services": services}

    # -- per seed -------------------------------------------------------------------------------
    def _train(self, d: _Driver, row: str, seed: int, results: dict[str, JobRun]) -> None:
        if row in S2R_SOURCE:
            source = results.get(S2R_SOURCE[row])
            if source is None:
                raise RuntimeError(f"needs the {S2R_SOURCE[row]} checkpoint of seed {seed}")
            kind, config = self._rl(row, seed)
            config[kind]["policy"] = self._policy(seed, source.result["final_checkpoint"])
        elif row == "sft_expert":
            kind = "bc"
            config = {
                "bc": {
                    **self.cfg.bc,
                    "environment": self.env,
                    "seed": seed,
                    "policy": self._policy(seed),
                }
            }
        else:
            kind, config = self._rl(row, seed)
        run = d.job(f"{row} seed {seed}", kind, config)
        results[row] = run
        self.curves[row][str(seed)] = d.curve(run.record.job_id)

    def run_seed(self, d: _Driver, seed: int) -> None:
        """Train every row of ``seed``, then evaluate all their policies in one job."""
        self.log(f"[{self.env}] seed {seed}")
        results: dict[str, JobRun] = {}
        order = [r for r in self.rows if r not in S2R_SOURCE and r != "before_rl"]
        order += [r for r in self.rows if r in S2R_SOURCE]
        for row in order:
            if row in self.na or row in self.failed:
                continue
            try:
                self._train(d, row, seed, results)
            except (JobFailedError, DreamGymError, RuntimeError, TimeoutError) as exc:
                self.failed[row] = f"seed {seed}: {_failure(exc)}"
        checkpoints: dict[str, str] = {
            row: run.result["final_checkpoint"] for row, run in results.items()
        }
        if "before_rl" in self.rows:
            initial = next(
                (
                    r.result["initial_checkpoint"]
                    for r in results.values()
                    if "initial_checkpoint" in r.result
                ),
                None,
            )
            if initial is None:
                self.failed["before_rl"] = f"seed {seed}: no RL job left an initial checkpoint"
            else:
                checkpoints = {"before_rl": initial, **checkpoints}
        if not checkpoints:
            return
        c = self.cfg
        try:
            evaluation = d.job(
                f"evaluate seed {seed}",
                "evaluate",
                evaluate_job(
                    self.env,
                    policies=list(checkpoints.values()),
                    episodes=c.eval_episodes,
                    max_steps=c.max_steps,
                    greedy=c.eval_greedy,
                    seed=seed,
                    history_length=c.history_length,
                    concurrency=c.eval_concurrency,
                    device=c.device,
                ),
            )
        except (JobFailedError, DreamGymError, TimeoutError) as exc:
            for row in checkpoints:
                self.failed.setdefault(row, f"seed {seed} evaluation: {_failure(exc)}")
            return
        for row, res in zip(checkpoints, evaluation.result["results"], strict=True):
            train = results.get(row)
            if row == "sft_expert" and train is not None:
                real = int(train.result.get("real_transitions_used", 0))
            elif train is not None:
                real = int(train.result.get("real_env_steps", 0))
            else:
                real = 0
            self.outcomes[row].append(
                {
                    "seed": seed,
                    "success_rate": res["success_rate"],
                    "episodes": res["episodes"],
                    "mean_reward": res["mean_reward"],
                    "real_interactions": real,
                    "real_step_budget": None
                    if train is None
                    else train.result.get("real_step_budget"),
                    "train_usage": None if train is None else train.record.usage,
                    "services_cpu_s": None if train is None else round(train.services_cpu_s, 3),
                    "eval_usage": res.get("usage"),
                    "checkpoint": res["policy"],
                    "train_job": None if train is None else train.record.job_id,
                    "eval_job": evaluation.record.job_id,
                }
            )

    def abort(self, reason: str) -> None:
        """Give up on this column: every row not yet n/a is failed with ``reason``."""
        self.aborted = reason

    def cells(self) -> dict[str, dict[str, Any]]:
        """Aggregated cells of every row (``n/a`` and ``failed`` ones with their reason)."""
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            if self.aborted is not None and row not in self.na:
                out[row] = {"status": "failed", "reason": self.aborted}
            elif row in self.na:
                out[row] = na_cell(self.na[row])
            elif row in self.failed:
                out[row] = {"status": "failed", "reason": self.failed[row]}
            elif len(self.outcomes[row]) != len(self.cfg.seeds):
                out[row] = {"status": "failed", "reason": "not every seed was evaluated"}
            else:
                out[row] = {**aggregate_cell(self.outcomes[row]), "seeds": self.outcomes[row]}
        return out


def _notes(cfg: ExperimentConfig) -> list[str]:
    return [
        "One experience model per environment (SFT seed = first seed) is shared by every "
        "DreamGym row and seed; the no-replay and no-reasoning rows use their own, each served "
        "by a separate experience-model process.",
        f"Real-environment RL budget B = {cfg.real_budget} real steps; S2R budget = "
        f"{cfg.s2r_steps} (≤ B/10). Budgets are exact: a step beyond the budget is refused and "
        "the rollouts it cuts are masked (counted, not trained on).",
        "Imagined rows sample tasks from their own pool (the train seed tasks plus the "
        "variations that run generated), so no row trains on another row's curriculum tasks; "
        "the task generator picks the tasks to vary from the outcome scores of all runs.",
        "Evaluation: the same held-out real games (eval split) for every row and seed; seed s "
        "sets the policy init, the RL seed and the evaluation sampling seed.",
    ]


def run_experiment(
    cfg: ExperimentConfig,
    out_dir: Path,
    *,
    preset_name: str = "custom",
    job_backend: str = "celery",
    log: Log | None = None,
    keep_running: bool = False,
    judge: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Run ``cfg`` and write ``experiment.json``, ``experiment.md`` and the plots.

    Args:
        cfg: what to run.
        out_dir: output folder (one ``<env>/`` subfolder per environment holds its stack,
            experience models and logs).
        preset_name: recorded in the outputs.
        job_backend: ``"celery"`` (a worker per queue) or ``"local"`` (service child
            processes).
        log: progress lines (default: the module logger).
        keep_running: leave the last environment's stack up.
        judge: the ``judge`` section of every ``fidelity`` job (an LLM judge of the experience
            model, see :func:`dreamgym.pipeline.judge_from_env`); ``None``: no judge.

    Returns:
        ``{"json", "md", "plots": folder}`` paths.
    """
    log = log or logger.info
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    labels = {k: ROWS[k].label for k in cfg.ordered_rows()}
    result: dict[str, Any] = {
        "preset": preset_name,
        "environments": list(cfg.environments),
        "seeds": list(cfg.seeds),
        "rows": [asdict(ROWS[k]) for k in cfg.ordered_rows()],
        "config": asdict(cfg),
        "cells": {},
        "claims": {},
        "shared": {},
        "curves": {},
        "notes": _notes(cfg),
        "judge": {k: judge.get(k) for k in ("base_url", "model")} if judge else None,  # no key
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    for env in cfg.environments:
        env_dir = out_dir / env
        stack = default_stack(
            env_dir,
            job_backend=job_backend,
            retrieval_k=cfg.retrieval_k,
            history_length=cfg.history_length,
            device=cfg.device,
        )
        column = _Environment(cfg, env, env_dir, stack, log, judge)
        local = LocalStack(stack)
        t0 = time.perf_counter()
        try:
            urls = local.up(log=lambda m, env=env: log(f"[{env}] {m}"))
            driver = _Driver(local, urls, log)
            try:
                column.prepare(driver)
                for seed in cfg.seeds:
                    column.run_seed(driver, seed)
            except (JobFailedError, DreamGymError, TimeoutError) as exc:
                # without seed data or an experience model no row of this column can run
                column.abort(f"environment setup failed: {_failure(exc)}")
                log(f"[{env}] {column.aborted}")
            finally:
                driver.close()
        finally:
            if not keep_running or env != cfg.environments[-1]:
                local.down()
        cells = column.cells()
        result["cells"][env] = cells
        result["claims"][env] = check_claims(cells)
        result["shared"][env] = {**column.shared, "seconds": round(time.perf_counter() - t0, 1)}
        result["curves"][env] = column.curves
        plot_success_vs_real(env, cells, labels, out_dir / f"success_vs_real_{env}.png")
        plot_training_curves(env, column.curves, labels, out_dir / f"training_curves_{env}.png")
    result["seconds"] = round(time.perf_counter() - start, 1)
    paths = {"json": out_dir / "experiment.json", "md": out_dir / "experiment.md"}
    paths["json"].write_text(json.dumps(result, indent=2, default=str))
    paths["md"].write_text(markdown_report(result))
    paths["plots"] = out_dir
    return paths
