"""The feasibility filter over the experience-model service's REST API.

``POST /v1/episodes`` (reset) per rollout, ``POST /v1/episodes:step`` per lockstep round (one model
batch for all candidate variations), ``DELETE /v1/episodes/{id}`` when an episode ends; see
:mod:`task_generator.domain.feasibility` for the rule. Episodes are reset with the caller's API key
when the request carried one, so they count against the caller's team.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import httpx

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.errors import DreamGymError
from dreamgym.experience_types import MAX_BATCH_STEPS
from dreamgym.types import AbstractState, Task
from task_generator.domain.errors import FeasibilityCheckError
from task_generator.domain.feasibility import (
    FeasibilityResult,
    ImaginedStep,
    play_random_rollouts,
)

__all__ = ["ExperienceModelEnv", "ImaginedFeasibilityChecker"]


class ExperienceModelEnv:
    """:class:`~task_generator.domain.feasibility.ImaginedEnv` over an experience-model client."""

    def __init__(self, client: ExperienceModelClient) -> None:
        self.client = client

    def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        """Start an imagined episode of ``task``."""
        ep = self.client.reset(task, seed=seed, max_steps=max_steps)
        return ep.episode_id, ep.state

    def step_many(self, items: Sequence[tuple[Any, str]]) -> list[ImaginedStep]:
        """Step every episode (chunks of the service's batch limit); errors per item."""
        out: list[ImaginedStep] = []
        for start in range(0, len(items), MAX_BATCH_STEPS):
            chunk = [(h, a, None) for h, a in items[start : start + MAX_BATCH_STEPS]]
            for r in self.client.step_many(chunk):
                if isinstance(r, DreamGymError):
                    out.append(ImaginedStep(error=f"{r.error_type}: {r.message}"))
                else:
                    out.append(
                        ImaginedStep(
                            state=r.state, reward=r.reward, done=r.terminated or r.truncated
                        )
                    )
        return out

    def close(self, handle: Any) -> None:
        """Close the episode (already gone: nothing to do)."""
        with contextlib.suppress(DreamGymError):
            self.client.close_episode(handle)


class ImaginedFeasibilityChecker:
    """Random-policy rollouts in the experience-model service decide feasibility.

    Args:
        base_url: the experience-model service.
        rollouts: k imagined episodes per candidate task.
        max_steps: step limit of each.
        api_key: key used when the request brought none (default ``$DREAMGYM_API_KEY``).
        timeout_s / max_retries: of the HTTP client.
        transport: httpx transport (tests).
    """

    def __init__(
        self,
        base_url: str,
        *,
        rollouts: int = 4,
        max_steps: int = 10,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        transport: Any = None,
    ) -> None:
        if rollouts < 1 or max_steps < 1:
            raise ValueError(f"rollouts and max_steps must be >= 1, got {rollouts}, {max_steps}")
        self.base_url, self.rollouts, self.max_steps = base_url, rollouts, max_steps
        self.api_key, self.timeout_s, self.max_retries = api_key, timeout_s, max_retries
        self.transport = transport

    def check(
        self, tasks: Sequence[Task], *, seed: int | None, api_key: str | None
    ) -> list[FeasibilityResult]:
        """Judge every task; see :func:`play_random_rollouts`.

        Raises:
            FeasibilityCheckError: the experience model could not be reached (after the client's
                retries) or refused a reset (502, naming the cause; the round stores nothing).
        """
        kwargs: dict[str, Any] = {"timeout_s": self.timeout_s, "max_retries": self.max_retries}
        if self.transport is not None:
            kwargs["transport"] = self.transport
        key = api_key or self.api_key
        if key is not None:
            kwargs["api_key"] = key
        try:
            with ExperienceModelClient(self.base_url, **kwargs) as client:
                return play_random_rollouts(
                    ExperienceModelEnv(client),
                    tasks,
                    rollouts=self.rollouts,
                    max_steps=self.max_steps,
                    seed=(seed or 0) % 2**31,
                )
        except DreamGymError as exc:
            raise FeasibilityCheckError(f"{exc.error_type}: {exc.message}") from exc
        except httpx.HTTPError as exc:  # unreachable after the client's retries
            raise FeasibilityCheckError(f"{type(exc).__name__}: {exc}") from exc
