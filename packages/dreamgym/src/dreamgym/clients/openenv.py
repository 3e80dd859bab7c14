"""A typed ``openenv-core`` client of the experience model's OpenEnv interface.

Needs the ``openenv`` extra (``openenv-core``). The client speaks WebSocket to
``<service>/openenv/ws``; one client is one session with one live episode at a time.

>>> async with ExperienceModelEnvClient("http://localhost:8001/openenv") as env:  # doctest: +SKIP
...     result = await env.reset(task=task, seed=0)
...     result = await env.step(result.observation.admissible_actions[0])
...     result.observation.text, result.reward, result.done
>>> with ExperienceModelEnvClient("http://localhost:8001/openenv").sync() as env:  # doctest: +SKIP
...     env.reset(task=task)
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from dreamgym.openenv_types import (
    ExperienceModelAction,
    ExperienceModelObservation,
    ExperienceModelState,
)
from dreamgym.types import Task

__all__ = ["ExperienceModelEnvClient"]


class ExperienceModelEnvClient(
    EnvClient[ExperienceModelAction, ExperienceModelObservation, ExperienceModelState]
):
    """``EnvClient`` with DreamGym's typed action, observation and state.

    ``reset(task=..., seed=..., max_steps=..., episode_id=...)`` accepts a :class:`Task` or its
    JSON dict; ``step`` accepts an :class:`ExperienceModelAction` or a plain string.
    Server errors are raised by ``openenv-core`` as ``RuntimeError("Server error: ... (code:
    ...)")``.
    """

    async def reset(self, **kwargs: Any) -> StepResult[ExperienceModelObservation]:
        """Start a new episode in this session (closing the previous one)."""
        if isinstance(kwargs.get("task"), Task):
            kwargs["task"] = kwargs["task"].model_dump(mode="json")
        return await super().reset(**kwargs)

    async def step(
        self, action: ExperienceModelAction | str, **kwargs: Any
    ) -> StepResult[ExperienceModelObservation]:
        """Apply one action (a string becomes ``ExperienceModelAction(text=...)``)."""
        if isinstance(action, str):
            action = ExperienceModelAction(text=action)
        return await super().step(action, **kwargs)

    def _step_payload(self, action: ExperienceModelAction) -> dict[str, Any]:
        return action.model_dump(mode="json", exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ExperienceModelObservation]:
        observation = ExperienceModelObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload.get("done", False),
            }
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> ExperienceModelState:
        return ExperienceModelState.model_validate(payload)
