"""Typed clients of the curriculum task generator service (sync and async).

>>> with TaskGeneratorClient("http://127.0.0.1:8003") as tasks:  # doctest: +SKIP
...     tasks.register_tasks(seed_tasks)
...     batch = tasks.sample(batch_size=8, seed=0)
...     tasks.report_outcomes(batch[0].task_id, [1.0, 0.0, 1.0, 0.0], policy_version="step-10")
...     tasks.generate(num_seed_tasks=4, variations_per_task=2, seed=0)

Errors come back as :mod:`dreamgym.errors` classes (``NotFoundError`` for an unknown task,
``ConflictError`` for a changed task registered under a known id, ``BackendUnavailableError``
when the service has no LLM backend). Task ids may contain ``/``; they are percent-encoded.

Retries: the base client retries 429/502/503/504 and connection errors. Registration is
idempotent; **outcome reports are not** (a report whose response was lost and is retried is
stored twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from dreamgym.clients.base import AsyncServiceClient, ServiceClient
from dreamgym.task_types import (
    TaskDetailResponse,
    TaskGenerateResponse,
    TaskListResponse,
    TaskOutcomeResponse,
    TaskRegisterResponse,
    TaskSampleResponse,
    TaskScoreListResponse,
)
from dreamgym.types import Split, Task, TaskOrigin

__all__ = ["AsyncTaskGeneratorClient", "TaskGeneratorClient"]

_Call = tuple[str, str, dict[str, Any]]
"""``(method, path, httpx request kwargs)`` shared by the sync and async clients."""


def _task_path(task_id: str) -> str:
    return f"/v1/tasks/{quote(task_id, safe='')}"


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _register_call(tasks: Sequence[Task]) -> _Call:
    return "POST", "/v1/tasks", {"json": {"tasks": [t.model_dump(mode="json") for t in tasks]}}


def _list_call(
    split: Split | None,
    origin: TaskOrigin | None,
    environment: str | None,
    limit: int,
    offset: int,
    parent_task_id: str | None = None,
) -> _Call:
    params = _drop_none(
        {
            "split": split,
            "origin": origin,
            "environment": environment,
            "parent_task_id": parent_task_id,
            "limit": limit,
            "offset": offset,
        }
    )
    return "GET", "/v1/tasks", {"params": params}


def _sample_call(batch_size: int, split: Split, seed: int | None, environment: str | None) -> _Call:
    body = _drop_none(
        {"batch_size": batch_size, "split": split, "seed": seed, "environment": environment}
    )
    return "POST", "/v1/tasks:sample", {"json": body}


def _outcome_call(task_id: str, rewards: Sequence[float], policy_version: str | None) -> _Call:
    body = _drop_none({"rewards": [float(r) for r in rewards], "policy_version": policy_version})
    return "POST", f"{_task_path(task_id)}/outcomes", {"json": body}


def _scores_call(environment: str | None, limit: int) -> _Call:
    return (
        "GET",
        "/v1/curriculum/scores",
        {"params": _drop_none({"environment": environment, "limit": limit})},
    )


def _generate_call(
    num_seed_tasks: int,
    variations_per_task: int,
    environment: str | None,
    seed: int | None,
    temperature: float | None,
    timeout_s: float | None,
    round: int | None = None,
    check_feasibility: bool | None = None,
) -> _Call:
    body = _drop_none(
        {
            "num_seed_tasks": num_seed_tasks,
            "variations_per_task": variations_per_task,
            "environment": environment,
            "seed": seed,
            "temperature": temperature,
            "round": round,
            "check_feasibility": check_feasibility,
        }
    )
    kwargs: dict[str, Any] = {"json": body}
    if timeout_s is not None:
        kwargs["timeout"] = timeout_s
    return "POST", "/v1/curriculum:generate", kwargs


class TaskGeneratorClient(ServiceClient):
    """Synchronous client of the task generator (``/v1/tasks``, ``/v1/curriculum``)."""

    def _call(self, call: _Call) -> Any:
        method, path, kwargs = call
        return self.request(method, path, **kwargs)

    def register_tasks(self, tasks: Sequence[Task]) -> TaskRegisterResponse:
        """Register tasks (idempotent by ``task_id``); ``{inserted, duplicates}``."""
        return TaskRegisterResponse.model_validate(self._call(_register_call(tasks)))

    def list_tasks(
        self,
        *,
        split: Split | None = None,
        origin: TaskOrigin | None = None,
        environment: str | None = None,
        limit: int = 100,
        offset: int = 0,
        parent_task_id: str | None = None,
    ) -> TaskListResponse:
        """A page of tasks matching the filters (``parent_task_id``: the variations of that
        task), and the total number matching."""
        call = _list_call(split, origin, environment, limit, offset, parent_task_id)
        return TaskListResponse.model_validate(self._call(call))

    def get_task(self, task_id: str) -> TaskDetailResponse:
        """One task with its score, number of outcome groups and lineage."""
        return TaskDetailResponse.model_validate(self._call(("GET", _task_path(task_id), {})))

    def sample(
        self,
        batch_size: int,
        split: Split = "train",
        seed: int | None = None,
        environment: str | None = None,
    ) -> list[Task]:
        """A curriculum batch of ``batch_size`` tasks (train: at most floor(λ·B) generated)."""
        body = self._call(_sample_call(batch_size, split, seed, environment))
        return TaskSampleResponse.model_validate(body).tasks

    def report_outcomes(
        self, task_id: str, rewards: Sequence[float], policy_version: str | None = None
    ) -> TaskOutcomeResponse:
        """Report one rollout group's rewards; returns the task's new score (Eq. 7)."""
        body = self._call(_outcome_call(task_id, rewards, policy_version))
        return TaskOutcomeResponse.model_validate(body)

    def scores(self, environment: str | None = None, limit: int = 100) -> TaskScoreListResponse:
        """Scored tasks ranked by score, highest first."""
        return TaskScoreListResponse.model_validate(self._call(_scores_call(environment, limit)))

    def generate(
        self,
        num_seed_tasks: int,
        variations_per_task: int,
        *,
        environment: str | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        timeout_s: float | None = None,
        round: int | None = None,
        check_feasibility: bool | None = None,
    ) -> TaskGenerateResponse:
        """Generate variations of the highest-variance tasks (may take long: see ``timeout_s``).

        ``round`` is stored as each new task's ``metadata.generation_round``;
        ``check_feasibility`` overrides the service's feasibility filter (see
        :class:`~dreamgym.task_types.TaskGenerateRequest`).
        """
        call = _generate_call(
            num_seed_tasks,
            variations_per_task,
            environment,
            seed,
            temperature,
            timeout_s,
            round,
            check_feasibility,
        )
        return TaskGenerateResponse.model_validate(self._call(call))


class AsyncTaskGeneratorClient(AsyncServiceClient):
    """Asynchronous client of the task generator; same methods as :class:`TaskGeneratorClient`."""

    async def _call(self, call: _Call) -> Any:
        method, path, kwargs = call
        return await self.request(method, path, **kwargs)

    async def register_tasks(self, tasks: Sequence[Task]) -> TaskRegisterResponse:
        """Register tasks (idempotent by ``task_id``); ``{inserted, duplicates}``."""
        return TaskRegisterResponse.model_validate(await self._call(_register_call(tasks)))

    async def list_tasks(
        self,
        *,
        split: Split | None = None,
        origin: TaskOrigin | None = None,
        environment: str | None = None,
        limit: int = 100,
        offset: int = 0,
        parent_task_id: str | None = None,
    ) -> TaskListResponse:
        """A page of tasks matching the filters (``parent_task_id``: the variations of that
        task), and the total number matching."""
        call = _list_call(split, origin, environment, limit, offset, parent_task_id)
        return TaskListResponse.model_validate(await self._call(call))

    async def get_task(self, task_id: str) -> TaskDetailResponse:
        """One task with its score, number of outcome groups and lineage."""
        body = await self._call(("GET", _task_path(task_id), {}))
        return TaskDetailResponse.model_validate(body)

    async def sample(
        self,
        batch_size: int,
        split: Split = "train",
        seed: int | None = None,
        environment: str | None = None,
    ) -> list[Task]:
        """A curriculum batch of ``batch_size`` tasks (train: at most floor(λ·B) generated)."""
        body = await self._call(_sample_call(batch_size, split, seed, environment))
        return TaskSampleResponse.model_validate(body).tasks

    async def report_outcomes(
        self, task_id: str, rewards: Sequence[float], policy_version: str | None = None
    ) -> TaskOutcomeResponse:
        """Report one rollout group's rewards; returns the task's new score (Eq. 7)."""
        body = await self._call(_outcome_call(task_id, rewards, policy_version))
        return TaskOutcomeResponse.model_validate(body)

    async def scores(
        self, environment: str | None = None, limit: int = 100
    ) -> TaskScoreListResponse:
        """Scored tasks ranked by score, highest first."""
        body = await self._call(_scores_call(environment, limit))
        return TaskScoreListResponse.model_validate(body)

    async def generate(
        self,
        num_seed_tasks: int,
        variations_per_task: int,
        *,
        environment: str | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        timeout_s: float | None = None,
        round: int | None = None,
        check_feasibility: bool | None = None,
    ) -> TaskGenerateResponse:
        """Generate variations of the highest-variance tasks (may take long: see ``timeout_s``).

        ``round`` is stored as each new task's ``metadata.generation_round``;
        ``check_feasibility`` overrides the service's feasibility filter (see
        :class:`~dreamgym.task_types.TaskGenerateRequest`).
        """
        call = _generate_call(
            num_seed_tasks,
            variations_per_task,
            environment,
            seed,
            temperature,
            timeout_s,
            round,
            check_feasibility,
        )
        return TaskGenerateResponse.model_validate(await self._call(call))
