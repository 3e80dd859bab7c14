"""Pieces shared by the main job (``dreamgym demo``) and ``dreamgym experiment``.

Job-config builders for the seed-data, experience-model SFT, fidelity and evaluation steps (the
REST bodies the services validate), and the local stack on free ports under an output folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dreamgym.stack.local import StackConfig
from dreamgym.stack.ports import free_port

__all__ = [
    "collect_job",
    "default_stack",
    "evaluate_job",
    "fidelity_job",
    "free_port",
    "judge_from_env",
    "sft_job",
]

JUDGE_URL_ENV = "DREAMGYM_JUDGE_URL"
JUDGE_MODEL_ENV = "DREAMGYM_JUDGE_MODEL"
JUDGE_API_KEY_ENV = "DREAMGYM_JUDGE_API_KEY"


def default_stack(
    out_dir: Path,
    *,
    ports: dict[str, int] | None = None,
    job_backend: str = "celery",
    retrieval_k: int = 2,
    history_length: int = 2,
    max_new_tokens: int = 128,
    device: str = "cpu",
) -> StackConfig:
    """A stack living under ``out_dir/stack`` on free ports (jobs on ``job_backend``).

    The task generator loads the experience model written to ``out_dir/experience_model``
    (M_task shares M_exp's weights), so the SFT job must write there. ``device`` is where the
    experience model and the task generator's copy of it run (``"cuda"`` on a GPU node).
    """
    ports = ports or {}
    device_env = (
        {"EXPERIENCE_MODEL_DEVICE": device, "TASK_GENERATOR_LLM_DEVICE": device}
        if device != "cpu"
        else {}
    )
    return StackConfig(
        data_dir=out_dir / "stack",
        job_backend=job_backend,
        postgres_port=ports.get("postgres", free_port()),
        redis_port=ports.get("redis", free_port()),
        experience_model_port=ports.get("experience_model", free_port()),
        replay_store_port=ports.get("replay_store", free_port()),
        task_generator_port=ports.get("task_generator", free_port()),
        agent_trainer_port=ports.get("agent_trainer", free_port()),
        task_generator_model_path=str((out_dir / "experience_model").resolve()),
        extra_env={
            "EXPERIENCE_MODEL_RETRIEVAL_K": str(retrieval_k),
            "EXPERIENCE_MODEL_HISTORY_LENGTH": str(history_length),
            "EXPERIENCE_MODEL_MAX_NEW_TOKENS": str(max_new_tokens),
            **device_env,
        },
    )


def collect_job(
    environment: str,
    *,
    train_seeds: int,
    eval_tasks: int,
    max_steps: int,
    policies: Sequence[str],
    seed: int,
) -> dict[str, Any]:
    """Config of a ``collect`` job (real seed data → replay store, tasks → task generator)."""
    return {
        "environment": environment,
        "train_seeds": train_seeds,
        "seed": seed,
        "eval_tasks": eval_tasks,
        "max_steps": max_steps,
        "policies": list(policies),
    }


def sft_job(
    urls: dict[str, str],
    *,
    environment: str,
    output_dir: Path,
    base_model: str,
    steps: int,
    batch_size: int,
    learning_rate: float,
    retrieval_k: int,
    history_length: int,
    seed: int,
    **extra: Any,
) -> dict[str, Any]:
    """Config of an experience-model SFT job (``extra``: more SFT fields, e.g.
    ``use_retrieval=False`` for the no-replay ablation)."""
    return {
        "replay_store_url": urls["replay_store"],
        "task_generator_url": urls["task_generator"],
        "environment": environment,
        "output_dir": str(Path(output_dir).resolve()),
        "base_model": base_model,
        "steps": steps,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "retrieval_k": retrieval_k,
        "history_length": history_length,
        "seed": seed,
        **extra,
    }


def fidelity_job(
    environment: str,
    *,
    episodes: int,
    max_steps: int,
    seed: int,
    judge: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Config of a ``fidelity`` job (the experience model on held-out real transitions).

    ``judge``: the optional LLM-judge section (``base_url``, ``model``, ``api_key``, ...; see
    :func:`judge_from_env`); omitted when ``None``.
    """
    config: dict[str, Any] = {
        "environment": environment,
        "episodes": episodes,
        "max_steps": max_steps,
        "seed": seed,
    }
    if judge is not None:
        config["judge"] = dict(judge)
    return config


def judge_from_env(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``judge`` section of a ``fidelity`` job from ``DREAMGYM_JUDGE_*`` variables.

    ``DREAMGYM_JUDGE_URL`` (an OpenAI-compatible API root) turns the judge on and
    ``DREAMGYM_JUDGE_MODEL`` names the model; ``DREAMGYM_JUDGE_API_KEY`` is optional.

    Returns:
        ``{"base_url", "model"[, "api_key"]}``, or ``None`` when ``DREAMGYM_JUDGE_URL`` is unset
        or empty.

    Raises:
        ValueError: a URL without ``DREAMGYM_JUDGE_MODEL``.
    """
    url = environ.get(JUDGE_URL_ENV, "").strip()
    if not url:
        return None
    model = environ.get(JUDGE_MODEL_ENV, "").strip()
    if not model:
        raise ValueError(f"{JUDGE_URL_ENV} is set but {JUDGE_MODEL_ENV} is not; name the model")
    judge: dict[str, Any] = {"base_url": url, "model": model}
    key = environ.get(JUDGE_API_KEY_ENV, "").strip()
    if key:
        judge["api_key"] = key
    return judge


def evaluate_job(
    environment: str,
    *,
    episodes: int,
    max_steps: int,
    greedy: bool,
    seed: int,
    history_length: int,
    policy: str = "random",
    policies: Sequence[str] = (),
    concurrency: int | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Config of an ``evaluate`` job on held-out real games (one ``policy`` or ``policies``)."""
    section: dict[str, Any] = {
        "environment": environment,
        "policy": policy,
        "episodes": episodes,
        "max_steps": max_steps,
        "greedy": greedy,
        "seed": seed,
        "history_length": history_length,
    }
    if policies:
        section["policies"] = list(policies)
    if concurrency is not None:
        section["concurrency"] = concurrency
    if device is not None:
        section["device"] = device
    return {"evaluate": section}
