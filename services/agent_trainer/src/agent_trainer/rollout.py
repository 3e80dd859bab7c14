"""Multi-turn rollouts of the policy in an :class:`~agent_trainer.env_pools.EnvPool`.

``collect_rollouts`` plays ``group_size`` episodes per task, group-contiguous (rollout ``n``
belongs to task ``n // G``), all from the task's identical initial state. Live episodes advance in
lockstep: one batched policy decode for every live episode, then all their steps concurrently
(the experience model batches them). Episodes are always closed, also when a step fails.

A step that fails (malformed experience-model output after the server's retries, timeout,
capacity) ends that rollout with ``error`` set: the trainer masks it out of the group instead of
scoring it 0 (the "zero-reward for crashed rollouts" failure mode in ``anchors.md``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agent_trainer.env_pools import EnvPool
from agent_trainer.policy import Decision, HistoryItem, LMPolicy
from dreamgym.types import AbstractState, Provenance, Task, Trajectory, Transition

__all__ = ["Rollout", "collect_rollouts", "to_trajectory"]


@dataclass
class Rollout:
    """One episode of the policy.

    Attributes:
        task: the task played.
        group_index: position inside its task's group (0..G-1).
        state: the current (finally: last) abstract state.
        decisions: the policy's sampled decisions, one per step (token ids + log-probs).
        transitions: the environment's transitions, one per step.
        error: why the rollout was cut short by a failure (``None`` when it ran normally).
    """

    task: Task
    group_index: int
    state: AbstractState | None = None
    decisions: list[Decision] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    won: bool = False
    done: bool = False
    error: str | None = None
    handle: Any = None

    @property
    def valid(self) -> bool:
        """False when the rollout failed and must be masked."""
        return self.error is None

    @property
    def episode_return(self) -> float:
        """Undiscounted return."""
        return float(sum(t.reward for t in self.transitions))

    def history(self) -> list[HistoryItem]:
        """(observation, action) pairs so far, for the policy prompt."""
        return [HistoryItem(t.observation, t.action) for t in self.transitions]


async def _reset_all(pool: EnvPool, rollouts: list[Rollout], max_steps: int, seed: int) -> None:
    async def one(i: int, r: Rollout) -> None:
        try:
            r.handle, r.state = await pool.reset(r.task, seed=seed + i, max_steps=max_steps)
        except Exception as exc:  # the episode never started: masked, not scored
            r.error, r.done = f"reset failed: {type(exc).__name__}: {exc}", True

    await asyncio.gather(*(one(i, r) for i, r in enumerate(rollouts)))


async def _step_all(
    pool: EnvPool, live: list[Rollout], decisions: list[Decision], max_steps: int
) -> None:
    step_many = getattr(pool, "step_many", None)
    if step_many is not None:  # one request, one model batch for the whole round
        try:
            results = await step_many(
                [(r.handle, d.action) for r, d in zip(live, decisions, strict=True)]
            )
        except Exception as exc:  # the whole request failed: every rollout in it is masked
            results = [exc] * len(live)
    else:
        results = await asyncio.gather(
            *(pool.step(r.handle, d.action) for r, d in zip(live, decisions, strict=True)),
            return_exceptions=True,
        )
    for r, d, res in zip(live, decisions, results, strict=True):
        if isinstance(res, BaseException):
            r.error, r.done = f"step failed: {type(res).__name__}: {res}", True
            continue
        assert r.state is not None
        step = len(r.transitions)
        truncated = res.truncated or (not res.terminated and step + 1 >= max_steps)
        r.decisions.append(d)
        r.transitions.append(
            Transition(
                step=step,
                observation=r.state.observation,
                admissible_actions=list(r.state.admissible_actions),
                action=d.action,
                next_observation=res.state.observation,
                next_admissible_actions=list(res.state.admissible_actions),
                reward=res.reward,
                terminated=res.terminated,
                truncated=truncated,
                won=res.won,
                reasoning=res.info.get("reasoning") or None,
            )
        )
        r.state, r.won = res.state, res.won
        r.done = res.terminated or truncated or not res.state.admissible_actions


async def _play_wave(
    policy: LMPolicy,
    pool: EnvPool,
    wave: list[Rollout],
    *,
    max_steps: int,
    seed: int,
    temperature: float,
    generator: torch.Generator | None,
) -> None:
    await _reset_all(pool, wave, max_steps, seed)
    try:
        while live := [r for r in wave if not r.done]:
            states = [r.state for r in live]
            decisions = policy.act(
                states,
                [r.history() for r in live],  # type: ignore[arg-type]
                temperature=temperature,
                generator=generator,
            )
            await _step_all(pool, live, decisions, max_steps)
    finally:
        await asyncio.gather(
            *(pool.close(r.handle) for r in wave if r.handle is not None), return_exceptions=True
        )


async def collect_rollouts(
    policy: LMPolicy,
    pool: EnvPool,
    tasks: Sequence[Task],
    *,
    group_size: int,
    max_steps: int,
    seed: int = 0,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[Rollout]:
    """Play ``group_size`` episodes of every task.

    Args:
        policy: the agent policy.
        pool: imagined or real environment pool.
        tasks: B tasks.
        group_size: G episodes per task, all from the task's initial state.
        max_steps: episode step limit.
        seed: base seed; episode i of the batch resets with ``seed + i``.
        temperature: policy sampling temperature (0 = greedy).
        generator: torch RNG for the policy's sampling.

    Returns:
        N = B·G rollouts, group-contiguous.
    """
    rollouts = [Rollout(task=t, group_index=g) for t in tasks for g in range(group_size)]
    size = max(1, pool.max_concurrency)
    for start in range(0, len(rollouts), size):
        await _play_wave(
            policy,
            pool,
            rollouts[start : start + size],
            max_steps=max_steps,
            seed=seed + start,
            temperature=temperature,
            generator=generator,
        )
    return rollouts


def to_trajectory(
    r: Rollout,
    *,
    environment: str,
    source: str,
    policy_version: str,
    rng: random.Random | None = None,
) -> Trajectory | None:
    """The rollout as a replay-store :class:`Trajectory` (``None`` if it has no valid step).

    Synthetic rollouts are tagged ``source="synthetic"`` with the policy version that produced
    them, so the co-evolving buffer can filter or mix them (paper §2).
    """
    del rng
    if not r.transitions or not r.valid:
        return None
    return Trajectory(
        task=r.task.instruction,
        task_id=r.task.task_id,
        transitions=list(r.transitions),
        provenance=Provenance(
            environment=environment,
            game_seed=r.task.game_seed,
            split=r.task.split,
            policy="agent",
            source=source,  # type: ignore[arg-type]
            policy_version=policy_version,
        ),
    )
