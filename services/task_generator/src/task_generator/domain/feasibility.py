"""Feasibility of generated tasks: can the experience model reach success on them in imagination?

The task generator "can discard unrealistic or ill-formed tasks" and keeps variations that are
"challenging but feasible" (DreamGym, arXiv 2511.03773 §4.2, Appendix C). Here a variation is
accepted only when at least one of ``rollouts`` imagined episodes in the experience model, played
by a uniformly random policy over the admissible actions for at most ``max_steps`` steps, earns a
reward > 0 (the outcome reward of a success, §4.1.1). A variation the experience model cannot
complete would train the policy on an episode that never pays.

:func:`play_random_rollouts` plays the episodes of many tasks in lockstep (one batched step call
per round) against any :class:`ImaginedEnv`; the adapter
(:mod:`task_generator.adapters.feasibility`) puts the experience-model service behind it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dreamgym.types import AbstractState, Task

__all__ = [
    "FeasibilityChecker",
    "FeasibilityResult",
    "ImaginedEnv",
    "ImaginedStep",
    "infeasible_reason",
    "play_random_rollouts",
]


@dataclass(frozen=True)
class FeasibilityResult:
    """Outcome of the imagined rollouts of one task.

    Attributes:
        rollouts: episodes started.
        successes: episodes that earned a reward > 0.
        errors: episodes cut short by an error of the experience model (e.g. malformed output).
    """

    rollouts: int
    successes: int
    errors: int = 0

    @property
    def feasible(self) -> bool:
        """At least one imagined rollout succeeded."""
        return self.successes > 0


@dataclass(frozen=True)
class ImaginedStep:
    """What one imagined step returned (or ``error`` when it failed)."""

    state: AbstractState | None = None
    reward: float = 0.0
    done: bool = False
    error: str | None = None


class ImaginedEnv(Protocol):
    """Batched imagined episodes (the experience-model service)."""

    def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        """Start an episode; ``(handle, initial state)``."""
        ...

    def step_many(self, items: Sequence[tuple[Any, str]]) -> list[ImaginedStep]:
        """One step of each ``(handle, action)``, in one model batch."""
        ...

    def close(self, handle: Any) -> None:
        """Free an episode (never raises)."""
        ...


class FeasibilityChecker(Protocol):
    """Judges generated tasks (implemented over the experience-model service)."""

    max_steps: int

    def check(
        self, tasks: Sequence[Task], *, seed: int | None, api_key: str | None
    ) -> list[FeasibilityResult]:
        """One result per task, in order.

        Raises:
            DreamGymError: the experience model could not be reached or refused the episodes.
        """
        ...


@dataclass
class _Live:
    task: int
    handle: Any
    state: AbstractState
    steps: int = 0


def play_random_rollouts(
    env: ImaginedEnv, tasks: Sequence[Task], *, rollouts: int, max_steps: int, seed: int
) -> list[FeasibilityResult]:
    """Play ``rollouts`` random-policy episodes per task in lockstep; count the successes.

    Episode j of task i is reset with seed ``seed + 1000·i + j``; actions are drawn from
    ``random.Random(seed)`` uniformly over the current admissible actions. An episode ends when
    it earns a reward > 0 (a success), is done (terminated or truncated), has no admissible
    action, reaches ``max_steps`` or fails. A task without initial admissible actions gets no
    rollout (``rollouts=0``, infeasible). Every started episode is closed.

    Args:
        env: the imagined environment.
        tasks: the candidate tasks.
        rollouts: episodes per task (k >= 1).
        max_steps: step limit per episode (>= 1).
        seed: seeds episode resets and the policy.

    Returns:
        One :class:`FeasibilityResult` per task, in order.
    """
    rng = random.Random(seed)
    successes, errors, started = [0] * len(tasks), [0] * len(tasks), [0] * len(tasks)
    live: list[_Live] = []
    try:
        for i, task in enumerate(tasks):
            if not task.initial_admissible_actions:
                continue
            for j in range(rollouts):
                handle, state = env.reset(task, seed=seed + 1000 * i + j, max_steps=max_steps)
                live.append(_Live(i, handle, state))
                started[i] += 1
        while live:
            actions = [(ep.handle, rng.choice(list(ep.state.admissible_actions))) for ep in live]
            still: list[_Live] = []
            for ep, out in zip(live, env.step_many(actions), strict=True):
                ep.steps += 1
                if out.error is not None:
                    errors[ep.task] += 1
                elif out.reward > 0:
                    successes[ep.task] += 1
                elif (
                    not out.done
                    and out.state is not None
                    and out.state.admissible_actions
                    and ep.steps < max_steps
                ):
                    ep.state = out.state
                    still.append(ep)
                    continue
                env.close(ep.handle)
            live = still
    finally:
        for ep in live:
            env.close(ep.handle)
    return [
        FeasibilityResult(rollouts=started[i], successes=successes[i], errors=errors[i])
        for i in range(len(tasks))
    ]


def infeasible_reason(result: FeasibilityResult, max_steps: int) -> str | None:
    """The rejection reason of an infeasible task (``None`` when feasible)."""
    if result.feasible:
        return None
    if result.rollouts == 0:
        return "infeasible: the variation has no admissible actions to start from"
    failed = f", {result.errors} failed" if result.errors else ""
    return (
        f"infeasible: 0/{result.rollouts} imagined random-policy rollouts reached a reward > 0 "
        f"within {max_steps} steps{failed}"
    )
