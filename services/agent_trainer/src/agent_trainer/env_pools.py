"""Where rollouts are played: the imagined environment (REST) or a real one (in process).

Both pools speak one small async protocol over the shared abstract state, so the same rollout,
training and evaluation code runs in DreamGym, in sim-to-real fine-tuning and in the real-env
baseline (paper §4.3: the same mapping to the abstract state in both settings).

- :class:`ImaginedEnvPool` — episodes of the experience-model service; every real-environment
  counter stays at zero, by construction.
- :class:`RealEnvPool` — real adapters (``dreamgym.envs``), a fixed number of instances reused
  across waves of episodes, blocking calls run in worker threads; counts every real step in
  :attr:`RealEnvPool.real_steps` and, with a ``step_budget``, refuses every step (and reset)
  beyond it with :class:`RealStepBudgetExhausted`, so the budget is never exceeded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dreamgym.clients.experience_model import AsyncExperienceModelClient
from dreamgym.envs.base import RealEnv
from dreamgym.types import AbstractState, Task

__all__ = ["EnvPool", "EnvStep", "ImaginedEnvPool", "RealEnvPool", "RealStepBudgetExhausted"]


@dataclass(frozen=True)
class EnvStep:
    """One step's outcome in either environment."""

    state: AbstractState
    reward: float
    terminated: bool
    truncated: bool
    won: bool
    info: dict[str, Any]


class EnvPool(Protocol):
    """Episode factory used by rollouts. ``max_concurrency`` bounds simultaneous episodes."""

    max_concurrency: int
    real: bool

    async def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        """Start an episode; returns ``(handle, initial_state)``."""
        ...

    async def step(self, handle: Any, action: str) -> EnvStep:
        """Advance the episode."""
        ...

    async def close(self, handle: Any) -> None:
        """Release the episode (always called, also after errors)."""
        ...


class ImaginedEnvPool:
    """Episodes in the experience model (DreamGym's imagined environment).

    Args:
        client: async experience-model client.
        max_concurrency: episodes played at once.
        options: every episode's reset options (``use_reasoning``, ``use_retrieval``,
            ``history_length``; ablations on a shared service), ``None``: the service's.
    """

    real = False

    def __init__(
        self,
        client: AsyncExperienceModelClient,
        *,
        max_concurrency: int = 1024,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.max_concurrency = max_concurrency
        self.options = options or None

    async def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        ep = await self.client.reset(task, seed=seed, max_steps=max_steps, options=self.options)
        return ep.episode_id, ep.state

    async def step(self, handle: Any, action: str) -> EnvStep:
        out = await self.client.step(handle, action)
        return EnvStep(
            state=out.state,
            reward=out.reward,
            terminated=out.terminated,
            truncated=out.truncated,
            won=out.info.won,
            info={"reasoning": out.info.reasoning, "retrieved": out.info.retrieved},
        )

    async def step_many(self, items: list[tuple[Any, str]]) -> list[EnvStep | BaseException]:
        """All steps of a lockstep round in one request (one experience-model batch)."""
        out: list[EnvStep | BaseException] = []
        for r in await self.client.step_many([(h, a, None) for h, a in items]):
            if isinstance(r, BaseException):
                out.append(r)
            else:
                out.append(
                    EnvStep(
                        state=r.state,
                        reward=r.reward,
                        terminated=r.terminated,
                        truncated=r.truncated,
                        won=r.info.won,
                        info={"reasoning": r.info.reasoning, "retrieved": r.info.retrieved},
                    )
                )
        return out

    async def close(self, handle: Any) -> None:
        with contextlib.suppress(Exception):  # already expired/closed: nothing left to free
            await self.client.close_episode(handle)


class RealStepBudgetExhausted(RuntimeError):
    """A real step (or reset) was refused: the pool's budget of real steps is spent."""


class RealEnvPool:
    """Episodes in real environments, one adapter instance per concurrent episode.

    Args:
        make_env: factory of a fresh adapter (e.g. ``lambda: make_env("twx-coin", max_steps=10)``).
        max_concurrency: adapter instances (each may hold a JVM or a game process).
        step_budget: the most real steps this pool may take (``None`` = unlimited). A step is
            reserved before it runs (concurrent steps cannot overshoot) and released if the
            adapter raises; once ``real_steps == step_budget`` every ``step`` and ``reset``
            raises :class:`RealStepBudgetExhausted` (the rollout is then masked, not scored).
    """

    real = True

    def __init__(
        self,
        make_env: Callable[[], RealEnv],
        *,
        max_concurrency: int = 8,
        step_budget: int | None = None,
    ) -> None:
        if step_budget is not None and step_budget < 0:
            raise ValueError(f"step_budget must be >= 0 or None, got {step_budget}")
        self.make_env = make_env
        self.max_concurrency = max_concurrency
        self.step_budget = step_budget
        self._free: list[RealEnv] = []
        self._all: list[RealEnv] = []
        self.real_steps = 0
        self.refused_steps = 0

    @property
    def budget_exhausted(self) -> bool:
        """True once the pool took ``step_budget`` real steps (never without a budget)."""
        return self.step_budget is not None and self.real_steps >= self.step_budget

    def _check_budget(self, what: str) -> None:
        if self.budget_exhausted:
            self.refused_steps += what == "step"
            raise RealStepBudgetExhausted(
                f"{what} refused: the budget of {self.step_budget} real steps is spent"
            )

    def _acquire(self) -> RealEnv:
        if self._free:
            return self._free.pop()
        if len(self._all) >= self.max_concurrency:
            raise RuntimeError(f"more than max_concurrency={self.max_concurrency} live episodes")
        env = self.make_env()
        self._all.append(env)
        return env

    async def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        if task.game_seed is None:
            raise ValueError(f"task '{task.task_id}' has no game_seed: it cannot run in a real env")
        self._check_budget("reset")
        env = self._acquire()
        env.max_steps = max_steps
        try:
            state, _ = await asyncio.to_thread(env.reset, task.game_seed, task.split)
        except BaseException:
            self._free.append(env)
            raise
        del seed  # real games are deterministic in (split, game_seed)
        return env, state

    async def step(self, handle: Any, action: str) -> EnvStep:
        self._check_budget("step")
        self.real_steps += 1  # reserved before the await: concurrent steps cannot overshoot
        try:
            result = await asyncio.to_thread(handle.step, action)
        except BaseException:
            self.real_steps -= 1  # the adapter did not complete the step
            raise
        return EnvStep(
            state=result.state,
            reward=result.reward,
            terminated=result.terminated,
            truncated=result.truncated,
            won=result.won,
            info=dict(result.info),
        )

    async def close(self, handle: Any) -> None:
        self._free.append(handle)

    def shutdown(self) -> None:
        """Close every adapter."""
        for env in self._all:
            env.close()
        self._all.clear()
        self._free.clear()
