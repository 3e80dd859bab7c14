"""A typed ``openenv-core`` client of the experience model's OpenEnv interface.

Needs the ``openenv`` extra (``openenv-core``). The client speaks WebSocket to
``<service>/openenv/ws``; one client is one session with one live episode at a time.

>>> async with ExperienceModelEnvClient("http://localhost:8001/openenv") as env:  # doctest: +SKIP
...     result = await env.reset(task=task, seed=0)
...     result = await env.step(result.observation.admissible_actions[0])
...     result.observation.text, result.reward, result.done
>>> with ExperienceModelEnvClient("http://localhost:8001/openenv").sync() as env:  # doctest: +SKIP
...     env.reset(task=task)

With authentication enabled on the service, pass ``api_key=`` (default ``$DREAMGYM_API_KEY``): it
is sent in the WebSocket handshake as ``Authorization: Bearer <key>``, and the session's episodes
belong to the key's team.
"""

from __future__ import annotations

import os
from typing import Any, Self

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.asyncio.client import connect as ws_connect

from dreamgym.clients.base import API_KEY_ENV
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

    Args:
        base_url: the OpenEnv root, e.g. ``"http://localhost:8001/openenv"``.
        api_key: the team's key, sent in the handshake (default: ``$DREAMGYM_API_KEY``; none:
            no header, for a service without authentication).
        **kwargs: ``connect_timeout_s``, ``message_timeout_s``, ... of ``EnvClient``.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._auth_headers = {"Authorization": f"Bearer {key}"} if key else None

    async def connect(self) -> Self:
        """Open the WebSocket, presenting the API key when there is one.

        Raises:
            ConnectionError: the connection failed or the handshake was refused.
        """
        if self._ws is not None or self._auth_headers is None:
            await super().connect()
            return self
        local = any(host in self._ws_url.lower() for host in ("localhost", "127.0.0.1"))
        try:
            self._ws = await ws_connect(
                self._ws_url,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
                additional_headers=self._auth_headers,
                proxy=None if local else True,
            )
        except Exception as exc:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self

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
