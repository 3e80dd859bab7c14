"""``collect`` job: seed the replay buffer with real trajectories and register the tasks."""

from __future__ import annotations

from typing import Any

from agent_trainer.jobs.schemas import CollectJobConfig
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.collect import collect, parse_policy, summarize
from dreamgym.envs import make_env
from dreamgym.envs.splits import seeds as split_seeds
from dreamgym.jobs import JobContext
from dreamgym.types import AbstractState, Task, Trajectory

__all__ = ["run", "seed_task"]

INGEST_BATCH = 200


def seed_task(environment: str, split: str, seed: int, state: AbstractState) -> Task:
    """The task of a real game: its instruction and initial abstract state."""
    return Task(
        task_id=f"{environment}/{split}/{seed}",
        environment=environment,
        instruction=state.task,
        initial_observation=state.observation,
        initial_admissible_actions=list(state.admissible_actions),
        game_seed=seed,
        split=split,
        origin="seed",
    )  # type: ignore[arg-type]


def _train_tasks(environment: str, trajectories: list[Trajectory]) -> list[Task]:
    tasks: dict[int, Task] = {}
    for t in trajectories:
        seed = t.provenance.game_seed
        if seed is not None and seed not in tasks:
            first = t.transitions[0]
            state = AbstractState(
                task=t.task,
                observation=first.observation,
                admissible_actions=first.admissible_actions,
            )
            tasks[seed] = seed_task(environment, "train", seed, state)
    return list(tasks.values())


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Collect, ingest, register; returns counts and per-policy success rates."""
    cfg = CollectJobConfig.model_validate(config)
    env = make_env(cfg.environment, max_steps=cfg.max_steps)
    specs = [(name, parse_policy(name), 1) for name in cfg.policies]
    seeds = split_seeds("train", cfg.train_seeds)
    try:
        trajectories = collect(
            env,
            seeds,
            specs,
            rng_seed=cfg.seed,
            split="train",
            progress=lambda done, total, _: ctx.report(
                0.8 * done / total, f"collected {done}/{total} episodes"
            ),
        )
        eval_tasks = []
        for s in split_seeds("eval", cfg.eval_tasks):
            state, _ = env.reset(s, "eval")
            eval_tasks.append(seed_task(cfg.environment, "eval", s, state))
        real_steps = env.num_steps_total  # type: ignore[attr-defined]
    finally:
        env.close()
    with ReplayStoreClient(
        cfg.services.replay_store or "", timeout_s=300, api_key=cfg.services.api_key
    ) as replay:
        for start in range(0, len(trajectories), INGEST_BATCH):
            ctx.raise_if_cancelled()
            replay.ingest(trajectories[start : start + INGEST_BATCH])
            ctx.report(0.8 + 0.15 * start / len(trajectories), "ingesting into the replay store")
    tasks = _train_tasks(cfg.environment, trajectories) + eval_tasks
    with TaskGeneratorClient(
        cfg.services.task_generator or "", api_key=cfg.services.api_key
    ) as task_client:
        registered = task_client.register_tasks(tasks)
    return {
        "trajectories": len(trajectories),
        "transitions": sum(len(t.transitions) for t in trajectories),
        "real_steps": int(real_steps),
        "by_policy": summarize(trajectories),
        "tasks_registered": registered.inserted,
        "train_tasks": len(tasks) - len(eval_tasks),
        "eval_tasks": len(eval_tasks),
    }
