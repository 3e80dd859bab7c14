"""Wire models of the task generator service, shared by the service and its typed client.

Endpoints (all bodies forbid unknown fields; see ``services/task_generator``):

- ``POST /v1/tasks`` — :class:`TaskRegisterRequest` → :class:`TaskRegisterResponse`
- ``GET /v1/tasks`` — :class:`TaskListResponse`
- ``GET /v1/tasks/{task_id}`` — :class:`TaskDetailResponse`
- ``POST /v1/tasks:sample`` — :class:`TaskSampleRequest` → :class:`TaskSampleResponse`
- ``POST /v1/tasks/{task_id}/outcomes`` — :class:`TaskOutcomeRequest` → :class:`TaskOutcomeResponse`
- ``GET /v1/curriculum/scores`` — :class:`TaskScoreListResponse`
- ``POST /v1/curriculum:generate`` — :class:`TaskGenerateRequest` → :class:`TaskGenerateResponse`

A task's curriculum score is the reward variance V_τ of its most recent rollout group(s)
(DreamGym, arXiv 2511.03773, Eq. 7).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from dreamgym.types import Split, Task, TaskOrigin, WireModel

__all__ = [
    "MAX_GROUP_SIZE",
    "MAX_REGISTER_TASKS",
    "MAX_SAMPLE_BATCH_SIZE",
    "RejectedVariation",
    "TaskDetailResponse",
    "TaskGenerateRequest",
    "TaskGenerateResponse",
    "TaskListResponse",
    "TaskOutcomeRequest",
    "TaskOutcomeResponse",
    "TaskRegisterRequest",
    "TaskRegisterResponse",
    "TaskSampleRequest",
    "TaskSampleResponse",
    "TaskScore",
    "TaskScoreListResponse",
]

MAX_REGISTER_TASKS = 5000
MAX_SAMPLE_BATCH_SIZE = 1024
MAX_GROUP_SIZE = 1024

FiniteReward = Annotated[float, Field(allow_inf_nan=False)]


class TaskRegisterRequest(WireModel):
    """Tasks to register; idempotent by ``task_id``."""

    tasks: list[Task] = Field(min_length=1, max_length=MAX_REGISTER_TASKS)


class TaskRegisterResponse(WireModel):
    """Result of a registration.

    Attributes:
        inserted: tasks newly stored.
        duplicates: tasks already stored with identical content (left unchanged).
    """

    inserted: int = Field(ge=0)
    duplicates: int = Field(ge=0)


class TaskListResponse(WireModel):
    """A page of tasks; ``count`` is the number of tasks matching the filters (all pages)."""

    data: list[Task]
    count: int = Field(ge=0)


class TaskDetailResponse(WireModel):
    """One task with its curriculum state.

    Generated tasks carry their lineage in ``task.parent_task_id`` and in
    ``task.metadata``: ``generation_depth`` (1 for a variation of a seed task, parent's + 1
    after that), ``generation_round`` (the generating request's ``round``, when given) and
    ``feasibility`` (imagined successes / rollouts, when checked).

    Attributes:
        task: the task.
        score: curriculum score V_τ (``None`` until an outcome group is reported).
        num_groups: outcome groups reported for the task so far.
        lineage: ancestor task ids, nearest first (parent, grandparent, ...); empty for seeds.
    """

    task: Task
    score: float | None
    num_groups: int = Field(ge=0)
    lineage: list[str]


class TaskSampleRequest(WireModel):
    """Ask the curriculum for a batch of tasks.

    Attributes:
        batch_size: number of tasks B to return (with repetition when the pool is smaller).
        split: ``"train"`` (seed + generated tasks, at most floor(λ·B) generated) or ``"eval"``
            (uniform over eval seed tasks, never generated ones).
        environment: restrict to one environment.
        seed: RNG seed; equal seeds over an unchanged task pool give equal batches.
    """

    batch_size: int = Field(ge=1, le=MAX_SAMPLE_BATCH_SIZE)
    split: Split = "train"
    environment: str | None = Field(default=None, min_length=1)
    seed: int | None = None


class TaskSampleResponse(WireModel):
    """A sampled batch; ``num_generated`` of ``tasks`` have ``origin == "generated"``."""

    tasks: list[Task]
    num_generated: int = Field(ge=0)


class TaskOutcomeRequest(WireModel):
    """The outcome rewards of one rollout group of a task.

    Attributes:
        rewards: the G outcome rewards of the group (finite floats).
        policy_version: checkpoint tag of the policy that produced them.
    """

    rewards: list[FiniteReward] = Field(min_length=1, max_length=MAX_GROUP_SIZE)
    policy_version: str | None = Field(default=None, min_length=1, max_length=200)


class TaskOutcomeResponse(WireModel):
    """The task's curriculum state after recording the group."""

    task_id: str
    score: float
    num_groups: int = Field(ge=1)


class TaskScore(WireModel):
    """One row of the curriculum ranking."""

    task_id: str
    score: float
    num_groups: int = Field(ge=1)
    origin: TaskOrigin
    split: Split


class TaskScoreListResponse(WireModel):
    """Scored tasks ranked by score (desc); ``count`` counts all scored tasks matching."""

    data: list[TaskScore]
    count: int = Field(ge=0)


class TaskGenerateRequest(WireModel):
    """Generate task variations from the highest-variance tasks (Eq. 6–7).

    Attributes:
        num_seed_tasks: m, the number of seed tasks to vary (top-m by score, score > 0).
        variations_per_task: n, completions generated per seed task.
        environment: restrict seed tasks to one environment.
        seed: seed of seed-task selection, LLM sampling and the feasibility rollouts.
        temperature: LLM sampling temperature (service default when omitted).
        round: the caller's generation round (e.g. the trainer iteration), stored in each
            created task's ``metadata.generation_round`` (lineage).
        check_feasibility: keep only variations the experience model can complete in
            imagination; ``None``: the service's default (on when it has an experience model
            configured for it).
    """

    num_seed_tasks: int = Field(ge=1, le=64)
    variations_per_task: int = Field(ge=1, le=16)
    environment: str | None = Field(default=None, min_length=1)
    seed: int | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    round: int | None = Field(default=None, ge=0)
    check_feasibility: bool | None = None


class RejectedVariation(WireModel):
    """A generated completion that was not stored.

    Attributes:
        parent_task_id: the seed task it was generated from.
        reason: why it was rejected (parse error reason or duplicate).
        completion: the completion text, truncated to 500 characters.
    """

    parent_task_id: str
    reason: str
    completion: str = ""


class TaskGenerateResponse(WireModel):
    """Result of a generation round.

    Attributes:
        created: new tasks stored (``origin="generated"``, ``split="train"``).
        rejected: completions not stored, with reasons.
        seed_task_ids: the selected seed tasks, in selection order.
        message: why nothing was generated, when that is the case.
        num_infeasible: rejected variations the experience model could not complete in
            imagination (their reasons start with ``"infeasible"``).
    """

    created: list[Task]
    rejected: list[RejectedVariation]
    seed_task_ids: list[str]
    message: str | None = None
    num_infeasible: int = Field(default=0, ge=0)
