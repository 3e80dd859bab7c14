"""Typed clients of the experience model service (the imagined environment).

>>> with ExperienceModelClient("http://localhost:8001") as env:      # doctest: +SKIP
...     ep = env.reset(task, seed=0, max_steps=10)
...     out = env.step(ep.episode_id, ep.state.admissible_actions[0])
...     out.observation, out.reward, out.terminated, out.truncated, out.info.reasoning
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from dreamgym.clients.base import AsyncServiceClient, ServiceClient
from dreamgym.errors import DreamGymError, error_class_for
from dreamgym.experience_types import (
    BatchStepItem,
    BatchStepRequest,
    BatchStepResponse,
    EpisodeDetail,
    EpisodeOptions,
    EpisodeResetRequest,
    EpisodeResponse,
    EpisodeStepRequest,
    EpisodeStepResponse,
    ModelInfo,
    Prediction,
    PredictQuery,
    PredictRequest,
    PredictResponse,
    ReloadRequest,
)
from dreamgym.jobs import JobRecord
from dreamgym.types import Task

__all__ = ["AsyncExperienceModelClient", "ExperienceModelClient"]


def _ep(episode_id: str) -> str:
    return f"/v1/episodes/{quote(episode_id, safe='')}"


def _reset_body(
    task: Task,
    seed: int | None,
    max_steps: int | None,
    episode_id: str | None,
    options: EpisodeOptions | dict[str, Any] | None = None,
) -> dict[str, Any]:
    return EpisodeResetRequest(
        task=task,
        seed=seed,
        max_steps=max_steps,
        episode_id=episode_id,
        options=None if options is None else EpisodeOptions.model_validate(options),
    ).model_dump(mode="json", exclude_none=True)


def _batch_body(items: Sequence[tuple[str, str, int | None]]) -> dict[str, Any]:
    req = BatchStepRequest(
        steps=[BatchStepItem(episode_id=e, action=a, seed=s) for e, a, s in items]
    )
    return req.model_dump(mode="json", exclude_none=True)


def _batch_results(data: Any) -> list[EpisodeStepResponse | DreamGymError]:
    out: list[EpisodeStepResponse | DreamGymError] = []
    for item in BatchStepResponse.model_validate(data).results:
        if item.error is not None:
            cls = error_class_for(item.error.type, item.error.code)
            err = cls.__new__(cls)
            DreamGymError.__init__(err, item.error.message, param=item.error.param)
            err.status_code, err.error_type = item.error.code, item.error.type
            out.append(err)
        else:
            assert item.result is not None
            out.append(item.result)
    return out


def _predict_body(queries: Sequence[PredictQuery | dict[str, Any]]) -> dict[str, Any]:
    req = PredictRequest(queries=[PredictQuery.model_validate(q) for q in queries])
    return req.model_dump(mode="json")


class ExperienceModelClient(ServiceClient):
    """Synchronous client. Step failures raise :mod:`dreamgym.errors` classes:
    ``EpisodeNotFoundError``-like 404s, 409 for finished episodes, ``MalformedTransitionError``-like
    502 (``error_type == "malformed_transition"``: mask the rollout), 429/503/504 after retries.
    """

    def reset(
        self,
        task: Task,
        *,
        seed: int | None = None,
        max_steps: int | None = None,
        episode_id: str | None = None,
        options: EpisodeOptions | dict[str, Any] | None = None,
    ) -> EpisodeResponse:
        """Start an imagined episode in ``task``'s initial state.

        ``options`` (:class:`~dreamgym.experience_types.EpisodeOptions`) switches reasoning,
        retrieval or history off or on for this episode only (ablations).
        """
        body = _reset_body(task, seed, max_steps, episode_id, options)
        data = self.request("POST", "/v1/episodes", json=body)
        return EpisodeResponse.model_validate(data)

    def step(self, episode_id: str, action: str, *, seed: int | None = None) -> EpisodeStepResponse:
        """Apply ``action``; returns next observation, reward, terminated, truncated, info."""
        body = EpisodeStepRequest(action=action, seed=seed).model_dump(exclude_none=True)
        return EpisodeStepResponse.model_validate(
            self.request("POST", f"{_ep(episode_id)}/step", json=body)
        )

    def step_many(
        self, items: Sequence[tuple[str, str, int | None]]
    ) -> list[EpisodeStepResponse | DreamGymError]:
        """Advance many episodes in one model batch: ``(episode_id, action, seed)`` per item.

        Returns, per item, the step response or the :class:`DreamGymError` it failed with.
        """
        return _batch_results(self.request("POST", "/v1/episodes:step", json=_batch_body(items)))

    def get(self, episode_id: str) -> EpisodeDetail:
        """The episode's state and transitions."""
        return EpisodeDetail.model_validate(self.request("GET", _ep(episode_id)))

    def close_episode(self, episode_id: str) -> None:
        """Free the episode (404 if unknown)."""
        self.request("DELETE", _ep(episode_id))

    def predict(self, queries: Sequence[PredictQuery | dict[str, Any]]) -> list[Prediction]:
        """Stateless next-state predictions (teacher-forced inputs)."""
        data = self.request("POST", "/v1/transitions:predict", json=_predict_body(queries))
        return PredictResponse.model_validate(data).predictions

    def model_info(self) -> ModelInfo:
        """What the service serves."""
        return ModelInfo.model_validate(self.request("GET", "/v1/model"))

    def start_training(self, config: dict[str, Any], *, kind: str = "sft") -> JobRecord:
        """Start an experience-model job (``POST /v1/training-jobs``): ``sft`` or ``annotate``."""
        body = {"kind": kind, "config": config}
        return JobRecord.model_validate(self.request("POST", "/v1/training-jobs", json=body))

    def start_annotation(self, config: dict[str, Any]) -> JobRecord:
        """Start a teacher-annotation job: reasoning traces for real transitions (see
        ``experience_model.training.annotate.AnnotateConfig``)."""
        return self.start_training(config, kind="annotate")

    def get_training(self, job_id: str) -> JobRecord:
        """An SFT job's record (its ``result.checkpoint`` once succeeded)."""
        return JobRecord.model_validate(
            self.request("GET", f"/v1/training-jobs/{quote(job_id, safe='')}")
        )

    def reload(self, model_path: str) -> ModelInfo:
        """Load another checkpoint into the service."""
        body = ReloadRequest(model_path=model_path).model_dump()
        return ModelInfo.model_validate(self.request("POST", "/v1/model:reload", json=body))


class AsyncExperienceModelClient(AsyncServiceClient):
    """Asynchronous client; same methods as :class:`ExperienceModelClient`, awaitable."""

    async def reset(
        self,
        task: Task,
        *,
        seed: int | None = None,
        max_steps: int | None = None,
        episode_id: str | None = None,
        options: EpisodeOptions | dict[str, Any] | None = None,
    ) -> EpisodeResponse:
        """Start an imagined episode in ``task``'s initial state.

        ``options`` (:class:`~dreamgym.experience_types.EpisodeOptions`) switches reasoning,
        retrieval or history off or on for this episode only (ablations).
        """
        body = _reset_body(task, seed, max_steps, episode_id, options)
        data = await self.request("POST", "/v1/episodes", json=body)
        return EpisodeResponse.model_validate(data)

    async def step(
        self, episode_id: str, action: str, *, seed: int | None = None
    ) -> EpisodeStepResponse:
        """Apply ``action``."""
        body = EpisodeStepRequest(action=action, seed=seed).model_dump(exclude_none=True)
        return EpisodeStepResponse.model_validate(
            await self.request("POST", f"{_ep(episode_id)}/step", json=body)
        )

    async def step_many(
        self, items: Sequence[tuple[str, str, int | None]]
    ) -> list[EpisodeStepResponse | DreamGymError]:
        """Advance many episodes in one model batch (see the sync client)."""
        data = await self.request("POST", "/v1/episodes:step", json=_batch_body(items))
        return _batch_results(data)

    async def get(self, episode_id: str) -> EpisodeDetail:
        """The episode's state and transitions."""
        return EpisodeDetail.model_validate(await self.request("GET", _ep(episode_id)))

    async def close_episode(self, episode_id: str) -> None:
        """Free the episode (404 if unknown)."""
        await self.request("DELETE", _ep(episode_id))

    async def predict(self, queries: Sequence[PredictQuery | dict[str, Any]]) -> list[Prediction]:
        """Stateless next-state predictions."""
        data = await self.request("POST", "/v1/transitions:predict", json=_predict_body(queries))
        return PredictResponse.model_validate(data).predictions

    async def model_info(self) -> ModelInfo:
        """What the service serves."""
        return ModelInfo.model_validate(await self.request("GET", "/v1/model"))

    async def start_training(self, config: dict[str, Any], *, kind: str = "sft") -> JobRecord:
        """Start an experience-model job (``POST /v1/training-jobs``): ``sft`` or ``annotate``."""
        body = {"kind": kind, "config": config}
        data = await self.request("POST", "/v1/training-jobs", json=body)
        return JobRecord.model_validate(data)

    async def start_annotation(self, config: dict[str, Any]) -> JobRecord:
        """Start a teacher-annotation job (see the sync client)."""
        return await self.start_training(config, kind="annotate")

    async def get_training(self, job_id: str) -> JobRecord:
        """An SFT job's record (its ``result.checkpoint`` once succeeded)."""
        data = await self.request("GET", f"/v1/training-jobs/{quote(job_id, safe='')}")
        return JobRecord.model_validate(data)

    async def reload(self, model_path: str) -> ModelInfo:
        """Load another checkpoint into the service."""
        body = ReloadRequest(model_path=model_path).model_dump()
        return ModelInfo.model_validate(await self.request("POST", "/v1/model:reload", json=body))
