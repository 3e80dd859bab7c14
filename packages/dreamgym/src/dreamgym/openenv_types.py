"""Wire models of the experience model's OpenEnv interface (``/openenv`` on the service).

The experience model is reachable as an `OpenEnv <https://github.com/meta-pytorch/OpenEnv>`_
environment: the routes and message shapes are those of ``openenv-core``'s
``HTTPEnvServer`` (``openenv-http/1.x``), so its ``EnvClient`` / ``GenericEnvClient`` and
``openenv validate --url`` work against ``http://<host>:<port>/openenv`` unchanged.

- ``POST /reset`` :class:`OpenEnvResetRequest` → :class:`OpenEnvResult` (starts an episode; its id
  is ``observation.episode_id``)
- ``POST /step`` :class:`OpenEnvStepRequest` → :class:`OpenEnvResult` (HTTP is stateless, so the
  body names the ``episode_id``)
- ``GET /state?episode_id=`` → :class:`ExperienceModelState`
- ``GET /schema`` → :class:`OpenEnvSchema`; ``GET /metadata``; ``GET /health``; ``POST /mcp``
- ``WS /ws`` — one session per connection, holding at most one live episode. Client messages
  ``{"type": "reset", "data": {seed?, episode_id?, task, max_steps?}}``,
  ``{"type": "step", "data": <ExperienceModelAction>}``, ``{"type": "state"}``,
  ``{"type": "close"}``; server messages ``{"type": "observation", "data": <OpenEnvResult>}``,
  ``{"type": "state", "data": <ExperienceModelState>}`` and ``{"type": "error", "data":
  {"message", "code", "error_type", "status", "param"}}`` (``code`` is OpenEnv's
  ``WSErrorCode``). Closing the socket closes the episode.

OpenEnv's ``Observation`` keeps ``done``, ``reward`` and ``metadata`` next to the env-specific
fields; on the wire (:class:`OpenEnvResult`) ``done`` and ``reward`` are lifted out of the
observation, exactly as ``openenv-core``'s ``serialize_observation`` does.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dreamgym.experience_types import MAX_ACTION_CHARS
from dreamgym.types import Task, WireModel

__all__ = [
    "OPENENV_API_VERSION",
    "ExperienceModelAction",
    "ExperienceModelObservation",
    "ExperienceModelState",
    "OpenEnvMetadata",
    "OpenEnvResetRequest",
    "OpenEnvResult",
    "OpenEnvSchema",
    "OpenEnvStepRequest",
    "WSErrorCode",
]

OPENENV_API_VERSION = "1.0.0"
"""``info.version`` of the OpenEnv sub-app's OpenAPI document (profile ``openenv-http/1.x``)."""

WSErrorCode = Literal[
    "INVALID_JSON",
    "UNKNOWN_TYPE",
    "VALIDATION_ERROR",
    "EXECUTION_ERROR",
    "CAPACITY_REACHED",
    "FACTORY_ERROR",
    "SESSION_ERROR",
]


class ExperienceModelAction(WireModel):
    """An OpenEnv action: the agent's text action.

    Attributes:
        text: the action, e.g. ``"take coin"`` (need not be admissible).
        seed: sampling seed of this step (default: derived from the episode seed).
        metadata: free-form client data (OpenEnv's ``Action.metadata``; ignored).
    """

    text: str = Field(min_length=1, max_length=MAX_ACTION_CHARS)
    seed: int | None = Field(default=None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ExperienceModelObservation(WireModel):
    """An OpenEnv observation of an imagined episode.

    Attributes:
        done: ``terminated or truncated``.
        reward: r_{t+1} of the last step (``None`` after reset).
        metadata: free-form server data (empty).
        text: the abstract observation.
        admissible_actions: actions available now.
        task: the task instruction τ.
        task_id: the task's id.
        episode_id: the episode (step it with this id over HTTP).
        step: actions taken so far.
        terminated / truncated: Gymnasium's flags (model verdict / step limit).
        reasoning: the experience model's reasoning trace of the last step.
        won: the last step completed the task.
    """

    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    text: str
    admissible_actions: list[str] = Field(default_factory=list)
    task: str
    task_id: str
    episode_id: str
    step: int = Field(default=0, ge=0)
    terminated: bool = False
    truncated: bool = False
    reasoning: str = ""
    won: bool = False


class ExperienceModelState(BaseModel):
    """OpenEnv ``State`` of an episode (``episode_id`` and ``step_count`` plus DreamGym fields)."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0)
    task_id: str | None = None
    task: str | None = None
    observation: str = ""
    admissible_actions: list[str] = Field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    max_steps: int | None = None


class OpenEnvResetRequest(WireModel):
    """Body of ``POST /reset`` and ``data`` of a WebSocket ``reset`` message.

    Attributes:
        task: the task to play (required: the experience model simulates any task).
        seed: base sampling seed of the episode.
        episode_id: optional client-chosen episode id (409 if live).
        max_steps: step limit (default: the service's).
    """

    task: Task
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, min_length=1, max_length=200)
    max_steps: int | None = Field(default=None, ge=1)


class OpenEnvStepRequest(WireModel):
    """Body of ``POST /step`` (OpenEnv's ``StepRequest`` plus the episode to step).

    Attributes:
        action: the action.
        episode_id: the episode, from the reset's ``observation.episode_id``.
        timeout_s: accepted for OpenEnv compatibility; the service's step deadline applies.
        request_id: optional tracing id.
    """

    action: ExperienceModelAction
    episode_id: str = Field(min_length=1)
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


class OpenEnvResult(WireModel):
    """``ResetResponse`` / ``StepResponse``: the observation without ``done``/``reward``."""

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False

    @classmethod
    def of(cls, observation: ExperienceModelObservation) -> OpenEnvResult:
        """Lift ``done`` and ``reward`` out of the observation (OpenEnv serialization)."""
        fields = observation.model_dump(exclude={"done", "reward", "metadata"})
        return cls(observation=fields, reward=observation.reward, done=observation.done)


class OpenEnvSchema(WireModel):
    """``GET /schema``: JSON schemas of action, observation and state."""

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]


class OpenEnvMetadata(WireModel):
    """``GET /metadata``: what this environment is."""

    name: str
    description: str
    version: str | None = None
    readme_content: str | None = None
    author: str | None = None
    documentation_url: str | None = None
