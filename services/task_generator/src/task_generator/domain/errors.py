"""Typed errors of the task generator; the shared handlers map them to the error envelope."""

from __future__ import annotations

from dreamgym.errors import (
    BackendUnavailableError,
    ConflictError,
    DreamGymError,
    NotFoundError,
    QuotaExceededError,
)

__all__ = [
    "FeasibilityCheckError",
    "FeasibilityNotConfiguredError",
    "LLMBackendNotConfiguredError",
    "LLMGenerationError",
    "NoTasksAvailableError",
    "TaskConflictError",
    "TaskNotFoundError",
    "TaskQuotaExceededError",
]


class TaskNotFoundError(NotFoundError):
    """The caller's team has no task with this id (404, also for other teams' task ids)."""

    error_type = "task_not_found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task '{task_id}' does not exist", param="task_id")
        self.task_id = task_id


class TaskConflictError(ConflictError):
    """A task id is already stored with different content (409); nothing was written."""

    error_type = "task_conflict"

    def __init__(self, task_id: str, param: str) -> None:
        super().__init__(
            f"task_id '{task_id}' already exists with different content; task ids are "
            "immutable, register the changed task under a new task_id",
            param=param,
        )
        self.task_id = task_id


class NoTasksAvailableError(NotFoundError):
    """The pool a sample was asked from is empty (404)."""

    error_type = "no_tasks_available"

    def __init__(self, pool: str, environment: str | None) -> None:
        where = f" in environment '{environment}'" if environment else ""
        super().__init__(
            f"no {pool} tasks are registered{where}; register tasks with POST /v1/tasks first",
            param="environment" if environment else "split",
        )


class LLMBackendNotConfiguredError(BackendUnavailableError):
    """Task generation was requested but the service runs without an LLM backend (503)."""

    error_type = "llm_backend_not_configured"

    def __init__(self) -> None:
        super().__init__(
            "no LLM backend is configured for task generation; start the service with "
            "TASK_GENERATOR_LLM_BACKEND=transformers or openai"
        )


class LLMGenerationError(DreamGymError):
    """The LLM backend failed while generating task variations (502); nothing was stored."""

    status_code = 502
    error_type = "llm_generation_failed"


class FeasibilityCheckError(DreamGymError):
    """The experience model failed while checking variations for feasibility (502); nothing
    was stored."""

    status_code = 502
    error_type = "feasibility_check_failed"

    def __init__(self, cause: str) -> None:
        super().__init__(
            f"the experience model failed during the feasibility check of generated tasks: {cause}"
        )


class FeasibilityNotConfiguredError(BackendUnavailableError):
    """A feasibility check was requested but no experience model is configured for it (503)."""

    error_type = "feasibility_not_configured"

    def __init__(self) -> None:
        super().__init__(
            "check_feasibility=true needs TASK_GENERATOR_FEASIBILITY_EXPERIENCE_MODEL_URL",
            param="body.check_feasibility",
        )


class TaskQuotaExceededError(QuotaExceededError):
    """Storing the new tasks would take the team past its task quota (429); nothing stored."""

    error_type = "task_quota_exceeded"

    def __init__(
        self, team: str, stored: int, quota: int, retry_after_s: float, param: str = "body.tasks"
    ) -> None:
        super().__init__(
            f"team '{team}' stores {stored} tasks; storing more would exceed its quota of "
            f"{quota} (TASK_GENERATOR_MAX_TASKS_PER_TEAM)",
            param=param,
            retry_after_s=retry_after_s,
        )
        self.team = team
        self.stored = stored
        self.quota = quota
