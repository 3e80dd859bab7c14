"""A Gymnasium environment over the experience model service (imagined text episodes).

:class:`ExperienceModelEnv` is a ``gymnasium.Env[str, str]``: observations and actions are text
(:class:`~dreamgym.gym.spaces.UnicodeText`), each ``reset`` starts an imagined episode with
``POST /v1/episodes`` and each ``step`` is one ``POST /v1/episodes/{id}/step``.

- ``reset(seed=None, options={"task": Task | dict, "max_steps": int})`` returns
  ``(observation, info)`` with ``info = {"episode_id", "task_id", "task", "admissible_actions",
  "step", "max_steps"}``. Without ``options["task"]`` a task is drawn from the env's ``tasks``
  with ``self.np_random``; the episode's sampling seed is drawn from it too, so a seeded reset
  reproduces the task and the server-side sampling.
- ``step(action)`` returns ``(observation, reward, terminated, truncated, info)`` with
  ``info = {"admissible_actions", "reasoning", "won", "step"}``; ``terminated`` is the
  experience model's verdict, ``truncated`` the episode's step limit. The full response
  (latency, retrieved demonstrations, the transition) is kept in :attr:`last_step`.

Errors of the service are raised as :mod:`dreamgym.errors` classes (e.g. a 502
``malformed_transition`` after the server's parse retries: the episode is unchanged and the
step may be retried). Stepping a finished or never-reset env raises
``gymnasium.error.ResetNeeded``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.error import ResetNeeded

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.errors import NotFoundError
from dreamgym.experience_types import (
    MAX_ACTION_CHARS,
    EpisodeResponse,
    EpisodeStepResponse,
)
from dreamgym.gym.spaces import UnicodeText
from dreamgym.types import Task

__all__ = ["ExperienceModelEnv"]

MAX_OBSERVATION_CHARS = 16_384
RESET_OPTIONS = frozenset({"task", "max_steps"})


def as_task(value: Task | dict[str, Any]) -> Task:
    """A :class:`Task` from a task or its JSON dict (``ValidationError`` names the field)."""
    return value if isinstance(value, Task) else Task.model_validate(value)


def episode_seed(rng: np.random.Generator) -> int:
    """A server-side sampling seed drawn from ``rng`` (in ``[0, 2**31 - 1)``)."""
    return int(rng.integers(0, 2**31 - 1))


def check_options(options: dict[str, Any] | None, valid: frozenset[str]) -> dict[str, Any]:
    """``options`` (``{}`` for ``None``).

    Raises:
        ValueError: an unknown key (the message lists the valid ones).
    """
    options = dict(options or {})
    unknown = set(options) - valid
    if unknown:
        raise ValueError(f"unknown reset option(s) {sorted(unknown)}; valid: {sorted(valid)}")
    return options


def choose_task(
    task: Task | dict[str, Any] | None, tasks: Sequence[Task], rng: np.random.Generator
) -> Task:
    """The task a reset starts: ``task`` when given, else a uniform draw from ``tasks``.

    Raises:
        ValueError: no task given and ``tasks`` is empty.
        pydantic.ValidationError: ``task`` is a dict that is not a valid task.
    """
    if task is not None:
        return as_task(task)
    if not tasks:
        raise ValueError("no task: pass tasks=[...] to the env or options={'task': task} to reset")
    return tasks[int(rng.integers(len(tasks)))]


def reset_info(episode: EpisodeResponse, task: Task) -> dict[str, Any]:
    """The ``info`` dict of a reset (fresh objects on every call)."""
    return {
        "episode_id": episode.episode_id,
        "task_id": task.task_id,
        "task": task.model_dump(mode="json"),
        "admissible_actions": list(episode.state.admissible_actions),
        "step": episode.state.step,
        "max_steps": episode.max_steps,
    }


def step_info(out: EpisodeStepResponse) -> dict[str, Any]:
    """The ``info`` dict of a step: only fields that the same seed and action reproduce."""
    return {
        "admissible_actions": list(out.admissible_actions),
        "reasoning": out.info.reasoning,
        "won": out.info.won,
        "step": out.state.step,
    }


def render_text(observation: str, admissible_actions: Sequence[str]) -> str:
    """``ansi`` rendering: the observation and the admissible actions."""
    return f"{observation}\nActions: {' | '.join(admissible_actions)}\n"


class ExperienceModelEnv(gymnasium.Env[str, str]):
    """One imagined episode at a time, served by the experience model.

    >>> env = ExperienceModelEnv("http://localhost:8001", tasks=tasks)  # doctest: +SKIP
    >>> observation, info = env.reset(seed=0)  # doctest: +SKIP
    >>> observation, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])

    Args:
        client: an :class:`ExperienceModelClient`, or the service URL (the env then owns a
            client built with ``client_kwargs`` and closes it in :meth:`close`).
        tasks: tasks a reset draws from when ``options["task"]`` is not given.
        max_steps: step limit of each episode (default: the service's).
        max_observation_chars: ``max_length`` of the observation space.
        max_action_chars: ``max_length`` of the action space (the service accepts up to 2000).
        render_mode: ``None`` or ``"ansi"``.
        client_kwargs: ``api_key``, ``timeout_s``, ``max_retries``... for an owned client.

    Attributes:
        episode_id: the live episode, ``None`` before the first reset.
        last_step: the full response of the last step.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        client: ExperienceModelClient | str,
        tasks: Sequence[Task | dict[str, Any]] = (),
        *,
        max_steps: int | None = None,
        max_observation_chars: int = MAX_OBSERVATION_CHARS,
        max_action_chars: int = MAX_ACTION_CHARS,
        render_mode: str | None = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self._owns_client = isinstance(client, str)
        self.client = (
            ExperienceModelClient(client, **(client_kwargs or {}))
            if isinstance(client, str)
            else client
        )
        self.tasks = [as_task(t) for t in tasks]
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.observation_space = UnicodeText(max_observation_chars)
        self.action_space = UnicodeText(max_action_chars, min_length=1)
        self.episode_id: str | None = None
        self.last_step: EpisodeStepResponse | None = None
        self._observation = ""
        self._actions: list[str] = []
        self._done = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Close the previous episode and start a new one (see the module docstring)."""
        super().reset(seed=seed)
        options = check_options(options, RESET_OPTIONS)
        task = choose_task(options.get("task"), self.tasks, self.np_random)
        max_steps = options.get("max_steps", self.max_steps)
        self._close_episode()
        episode = self.client.reset(task, seed=episode_seed(self.np_random), max_steps=max_steps)
        self.episode_id, self.last_step, self._done = episode.episode_id, None, False
        self._observation = episode.state.observation
        self._actions = list(episode.state.admissible_actions)
        return episode.state.observation, reset_info(episode, task)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send ``action`` to the experience model (see the module docstring)."""
        if self.episode_id is None or self._done:
            raise ResetNeeded("call reset() before step(): the episode has ended or not started")
        out = self.client.step(self.episode_id, action)
        self.last_step, self._done = out, out.terminated or out.truncated
        self._observation, self._actions = out.observation, list(out.admissible_actions)
        return out.observation, float(out.reward), out.terminated, out.truncated, step_info(out)

    def render(self) -> str | None:
        """The current observation and actions as text (``render_mode="ansi"``), else ``None``."""
        if self.render_mode != "ansi":
            return None
        return render_text(self._observation, self._actions)

    def close(self) -> None:
        """Free the live episode on the service and close an owned client (idempotent)."""
        with contextlib.suppress(Exception):
            self._close_episode()
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    def _close_episode(self) -> None:
        if self.episode_id is not None:
            with contextlib.suppress(NotFoundError):
                self.client.close_episode(self.episode_id)
            self.episode_id = None
