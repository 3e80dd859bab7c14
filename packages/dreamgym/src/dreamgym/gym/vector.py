"""A Gymnasium vector environment over the experience model's batch step endpoint.

:class:`ExperienceModelVectorEnv` runs ``num_envs`` imagined episodes side by side. Every
:meth:`~ExperienceModelVectorEnv.step` sends **one** ``POST /v1/episodes:step`` carrying the
actions of all sub-environments that are not being reset, so the service advances them in one
model batch. Resets are one ``POST /v1/episodes`` per sub-environment (the service has no batch
reset; a reset does not call the model).

Autoreset (``metadata["autoreset_mode"]``, Gymnasium's vocabulary):

- ``NEXT_STEP`` (default): a sub-environment that terminated or truncated is reset on the
  *next* call to ``step``; its action in that call is ignored and it returns the reset
  observation with reward 0, ``terminated = truncated = False`` and the reset ``info``.
- ``SAME_STEP``: it is reset in the same ``step``; the returned observation is the reset one and
  ``info["final_obs"]`` / ``info["final_info"]`` hold the last observation and info.
- ``DISABLED``: stepping a finished sub-environment raises ``ResetNeeded``; reset it with
  ``reset(options={"reset_mask": mask})``.

A sub-environment whose step failed on the service (e.g. 502 ``malformed_transition`` after the
server's parse retries, 504 deadline) keeps its observation, gets reward 0 and
``truncated=True`` and reports ``info["error"] = {"type", "message", "status"}``; it is then
autoreset like any finished episode, so one bad sample never stops the batch. An autoreset
draws a task from ``tasks`` (like ``reset()`` without options), or replays the sub-environment's
last task when the env was built without ``tasks``. Whole-request
failures (429 capacity after retries, 503) raise.

Reset options: ``{"task": Task}`` (the same initial state for every sub-environment: a GRPO
group), ``{"tasks": [Task | None, ...]}`` (one per sub-environment, ``None`` draws from
``tasks``), ``{"max_steps": int}`` and ``{"reset_mask": np.ndarray[bool]}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.error import ResetNeeded
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.errors import DreamGymError, NotFoundError
from dreamgym.experience_types import MAX_ACTION_CHARS, MAX_BATCH_STEPS, EpisodeStepResponse
from dreamgym.gym.env import (
    MAX_OBSERVATION_CHARS,
    as_task,
    check_options,
    choose_task,
    episode_seed,
    reset_info,
    step_info,
)
from dreamgym.gym.spaces import UnicodeText
from dreamgym.types import Task

__all__ = ["ExperienceModelVectorEnv"]

VECTOR_RESET_OPTIONS = frozenset({"task", "tasks", "max_steps", "reset_mask"})


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"seed: expected {n} seeds (one per sub-environment), got {len(seed)}")
    return list(seed)


def _error_info(error: DreamGymError) -> dict[str, Any]:
    return {"type": error.error_type, "message": error.message, "status": error.status_code}


class ExperienceModelVectorEnv(VectorEnv):  # type: ignore[type-arg]
    """``num_envs`` imagined episodes stepped with one batch request per vector step.

    >>> envs = ExperienceModelVectorEnv("http://localhost:8001", 8, tasks=tasks)  # doctest: +SKIP
    >>> observations, infos = envs.reset(seed=0, options={"task": tasks[0]})  # doctest: +SKIP
    >>> actions = [a[0] for a in infos["admissible_actions"]]  # doctest: +SKIP
    >>> observations, rewards, terminated, truncated, infos = envs.step(actions)  # doctest: +SKIP

    Args:
        client: an :class:`ExperienceModelClient` or the service URL (then owned and closed).
        num_envs: sub-environments, 1..1024 (the batch endpoint's limit).
        tasks: tasks resets draw from when no task option is given.
        max_steps: step limit of each episode (default: the service's).
        autoreset_mode: see the module docstring.
        max_observation_chars / max_action_chars: ``max_length`` of the single spaces.
        client_kwargs: ``api_key``, ``timeout_s``... for an owned client.

    Observations are tuples of ``num_envs`` strings; rewards ``(num_envs,) float64``;
    terminations and truncations ``(num_envs,) bool``; infos follow Gymnasium's vector
    convention (``infos[key]`` an array with a ``infos["_" + key]`` mask).
    """

    def __init__(
        self,
        client: ExperienceModelClient | str,
        num_envs: int,
        tasks: Sequence[Task | dict[str, Any]] = (),
        *,
        max_steps: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_observation_chars: int = MAX_OBSERVATION_CHARS,
        max_action_chars: int = MAX_ACTION_CHARS,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not 1 <= num_envs <= MAX_BATCH_STEPS:
            raise ValueError(f"num_envs must be in [1, {MAX_BATCH_STEPS}], got {num_envs}")
        self._owns_client = isinstance(client, str)
        self.client = (
            ExperienceModelClient(client, **(client_kwargs or {}))
            if isinstance(client, str)
            else client
        )
        self.num_envs = num_envs
        self.tasks = [as_task(t) for t in tasks]
        self.max_steps = max_steps
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.single_observation_space = UnicodeText(max_observation_chars)
        self.single_action_space = UnicodeText(max_action_chars, min_length=1)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rngs = [seeding.np_random()[0] for _ in range(num_envs)]
        self._episode_ids: list[str | None] = [None] * num_envs
        self._last_tasks: list[Task | None] = [None] * num_envs
        self._observations = [""] * num_envs
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self._started = np.zeros(num_envs, dtype=np.bool_)

    @property
    def episode_ids(self) -> tuple[str | None, ...]:
        """The live episode of each sub-environment."""
        return tuple(self._episode_ids)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset all (or the ``reset_mask``-ed) sub-environments.

        Args:
            seed: ``None`` (keep each sub-environment's generator), an int ``s`` (seeds
                ``s, s+1, ...``) or one seed per sub-environment.
            options: see the module docstring.

        Raises:
            ValueError: unknown option, wrong number of seeds or tasks, no task to draw.
        """
        if isinstance(seed, int):
            super().reset(seed=seed)
        options = check_options(options, VECTOR_RESET_OPTIONS)
        mask = np.asarray(options.get("reset_mask", np.ones(self.num_envs, dtype=np.bool_)))
        if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},)")
        tasks = options.get("tasks") or [options.get("task")] * self.num_envs
        if len(tasks) != self.num_envs:
            raise ValueError(f"tasks: expected {self.num_envs} (one per sub-environment)")
        infos: dict[str, Any] = {}
        for i, sub_seed in enumerate(_seeds(seed, self.num_envs)):
            if sub_seed is not None:
                self._rngs[i] = seeding.np_random(sub_seed)[0]
            if mask[i]:
                info = self._reset_one(i, tasks[i], options.get("max_steps", self.max_steps))
                infos = self._add_info(infos, info, i)
        return tuple(self._observations), infos

    def step(
        self, actions: Sequence[str]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every sub-environment by one action (one batch request; see the module)."""
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"actions: expected {self.num_envs}, got {len(actions)}")
        if not self._started.all():
            raise ResetNeeded("call reset() before step()")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        stepping = [i for i in range(self.num_envs) if not self._autoreset[i]]
        for j in map(int, np.flatnonzero(self._autoreset)):
            if self.autoreset_mode != AutoresetMode.NEXT_STEP:
                raise ResetNeeded(f"sub-environment {j} has ended; reset it with a reset_mask")
            infos = self._add_info(infos, self._reset_one(j, None, self.max_steps), j)
        for i, result in self._step_batch(stepping, actions):
            if isinstance(result, DreamGymError):
                truncated[i], info = True, {"error": _error_info(result)}
            else:
                self._observations[i], rewards[i] = result.observation, result.reward
                terminated[i], truncated[i] = result.terminated, result.truncated
                info = step_info(result)
            if self.autoreset_mode == AutoresetMode.SAME_STEP and (terminated[i] or truncated[i]):
                final = {"final_obs": self._observations[i], "final_info": info}
                infos = self._add_info(infos, final, i)
                info = self._reset_one(i, None, self.max_steps)
            infos = self._add_info(infos, info, i)
        if self.autoreset_mode != AutoresetMode.SAME_STEP:
            self._autoreset = terminated | truncated
        return tuple(self._observations), rewards, terminated, truncated, infos

    def _step_batch(
        self, stepping: list[int], actions: list[str]
    ) -> list[tuple[int, EpisodeStepResponse | DreamGymError]]:
        """One ``POST /v1/episodes:step`` for the sub-environments in ``stepping``."""
        if not stepping:
            return []
        items = [(self._episode_ids[i] or "", actions[i], None) for i in stepping]
        return list(zip(stepping, self.client.step_many(items), strict=True))

    def close_extras(self) -> None:
        """Free the live episodes on the service and close an owned client."""
        with contextlib.suppress(Exception):
            for i in range(self.num_envs):
                self._close_episode(i)
        if self._owns_client:
            self.client.close()

    def _reset_one(
        self, i: int, task: Task | dict[str, Any] | None, max_steps: int | None
    ) -> dict[str, Any]:
        if task is None and not self.tasks:
            task = self._last_tasks[i]
        chosen = choose_task(task, self.tasks, self._rngs[i])
        self._last_tasks[i] = chosen
        self._close_episode(i)
        episode = self.client.reset(chosen, seed=episode_seed(self._rngs[i]), max_steps=max_steps)
        self._episode_ids[i] = episode.episode_id
        self._observations[i] = episode.state.observation
        self._autoreset[i], self._started[i] = False, True
        return reset_info(episode, chosen)

    def _close_episode(self, i: int) -> None:
        episode_id, self._episode_ids[i] = self._episode_ids[i], None
        if episode_id is not None:
            with contextlib.suppress(NotFoundError):
                self.client.close_episode(episode_id)
