"""Wire models of the replay store API, shared by the service and its typed client.

The replay store keeps trajectories (real and synthetic) and answers three kinds of reads:

- **retrieval** — top-k transitions nearest to a query ``(task, observation, action)`` under cosine
  similarity of φ(s_t, a_t) embeddings (DreamGym, arXiv 2511.03773, Eq. 4): the experience model
  conditions on them as demonstrations;
- **sampling** — uniform transitions without replacement, each returned with Reverb-style
  ``probability`` / ``table_size`` metadata;
- **export** — keyset-paginated transitions (SFT data for the experience model).

Endpoints (all JSON, errors in the :class:`dreamgym.errors.ErrorResponse` envelope):

- ``POST /v1/trajectories`` :class:`TrajectoryIngestRequest` → :class:`IngestResult`
- ``POST /v1/retrieve`` :class:`RetrievalRequest` → :class:`RetrievalResponse`
- ``POST /v1/transitions:sample`` :class:`TransitionSampleRequest` →
  :class:`TransitionSampleResponse`
- ``GET /v1/transitions`` → :class:`TransitionPage`
- ``PATCH /v1/transitions`` :class:`TransitionReasoningRequest` →
  :class:`TransitionReasoningResponse` (teacher reasoning traces R*_t on transitions, Eq. 5)
- ``PATCH /v1/transitions/{id}`` :class:`TransitionReasoningPatch` → :class:`TransitionRecord`
- ``GET /v1/trajectories/{trajectory_id}`` → :class:`dreamgym.types.Trajectory`
- ``GET /v1/trajectories`` → :class:`TrajectoryList`
- ``GET /v1/stats`` → :class:`ReplayStats`
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from dreamgym.types import DataSource, NonEmptyStr, Split, Trajectory, Transition, WireModel

__all__ = [
    "MAX_EXCLUDED_TRAJECTORIES",
    "MAX_PAGE_SIZE",
    "MAX_REASONING_CHARS",
    "MAX_REASONING_UPDATES",
    "MAX_RETRIEVAL_QUERIES",
    "MAX_SAMPLE_SIZE",
    "IngestResult",
    "ReplayStats",
    "RetrievalFilters",
    "RetrievalQuery",
    "RetrievalRequest",
    "RetrievalResponse",
    "RetrievedTransition",
    "TrajectoryIngestRequest",
    "TrajectoryList",
    "TrajectorySummary",
    "TransitionPage",
    "TransitionReasoning",
    "TransitionReasoningPatch",
    "TransitionReasoningRequest",
    "TransitionReasoningResponse",
    "TransitionRecord",
    "TransitionSampleRequest",
    "TransitionSampleResponse",
]

MAX_RETRIEVAL_QUERIES = 256
MAX_SAMPLE_SIZE = 10_000
MAX_PAGE_SIZE = 5_000
MAX_EXCLUDED_TRAJECTORIES = 10_000
MAX_REASONING_UPDATES = 5_000
MAX_REASONING_CHARS = 8_000


class RetrievalFilters(WireModel):
    """Restrict which stored transitions a retrieval or sample may return.

    Attributes:
        environment: only transitions of this environment id.
        source: only ``"real"`` or only ``"synthetic"`` transitions.
        split: only transitions of this split (``"train"`` / ``"eval"``).
        exclude_trajectory_ids: never return transitions of these trajectories (e.g. the episode
            being simulated, so it cannot retrieve itself).
        has_reasoning: only transitions with (``True``) or without (``False``) a stored
            reasoning trace; ``None``: either.
    """

    environment: str | None = None
    source: DataSource | None = None
    split: Split | None = None
    has_reasoning: bool | None = None
    exclude_trajectory_ids: list[str] = Field(
        default_factory=list, max_length=MAX_EXCLUDED_TRAJECTORIES
    )


class RetrievalQuery(WireModel):
    """One retrieval key: the state-action pair (s_t, a_t) plus its task (arXiv 2511.03773 Eq. 4).

    Attributes:
        task: the task instruction τ.
        observation: abstract observation of s_t.
        action: the candidate action a_t.
    """

    task: str
    observation: str
    action: str


class TrajectoryIngestRequest(WireModel):
    """Body of ``POST /v1/trajectories``: a batch stored in one transaction (all or nothing)."""

    trajectories: list[Trajectory] = Field(min_length=1)


class IngestResult(WireModel):
    """Result of an ingest.

    Attributes:
        inserted: trajectories newly stored by this request.
        duplicates: trajectories already stored (same id and content, or same content under
            another id); ``inserted + duplicates == len(trajectories)``.
        trajectory_ids: for each input trajectory, in order, the id it is stored under (the
            client's ``trajectory_id``, the content-derived ``"traj-<sha256>"``, or — for content
            already stored under another id — that existing id).
        evicted_trajectories: trajectories the retention policy removed to make room
            (``REPLAY_STORE_MAX_TRAJECTORIES``), in the same transaction as the insert.
        evicted_transitions: their transitions (removed with them).
    """

    inserted: int = Field(ge=0)
    duplicates: int = Field(ge=0)
    trajectory_ids: list[str]
    evicted_trajectories: int = Field(default=0, ge=0)
    evicted_transitions: int = Field(default=0, ge=0)


class TransitionRecord(Transition):
    """A stored transition with where it comes from.

    Attributes:
        id: the store's monotonically increasing transition id (keyset-pagination cursor).
        trajectory_id: the trajectory it belongs to.
        task: that trajectory's task instruction τ.
        environment: environment id.
        source: ``"real"`` or ``"synthetic"``.
        split: split of the game seed, if any.
        policy: behaviour policy that produced it.
    """

    id: int
    trajectory_id: str
    task: str
    environment: str
    source: DataSource
    split: Split | None = None
    policy: str


class RetrievedTransition(TransitionRecord):
    """A retrieved transition and its similarity to the query.

    Attributes:
        score: cosine similarity cos(φ(s_t, a_t), φ(s_i, a_i)) in [-1, 1]; results are in
            descending order of it.
    """

    score: float


class RetrievalRequest(WireModel):
    """Body of ``POST /v1/retrieve``.

    Attributes:
        queries: 1..256 retrieval keys, embedded in one batch.
        k: neighbours per query (1..the service's ``max_k``).
        filters: restrictions applied to every query.
    """

    queries: list[RetrievalQuery] = Field(min_length=1, max_length=MAX_RETRIEVAL_QUERIES)
    k: int = Field(default=5, ge=1)
    filters: RetrievalFilters = Field(default_factory=RetrievalFilters)


class RetrievalResponse(WireModel):
    """``results[i]`` holds up to ``k`` transitions for ``queries[i]``, most similar first."""

    results: list[list[RetrievedTransition]]


class TransitionSampleRequest(WireModel):
    """Body of ``POST /v1/transitions:sample``.

    Attributes:
        n: transitions to draw without replacement (fewer when the filtered table holds fewer).
        filters: restrict the table sampled from.
        seed: seeds the sampler; the same seed over the same table gives the same sample.
        strategy: ``uniform`` (P = 1/N), ``prioritized`` (P(i) = p_i^α / Σ p_k^α over the
            transitions' ``priority``) or ``recency`` (P(i) ∝ 2^(-age_i / half_life), age_i the
            number of matching transitions stored after i).
        alpha: α of ``prioritized`` (0: uniform).
        half_life: half-life of ``recency``, in transitions.
    """

    n: int = Field(ge=1, le=MAX_SAMPLE_SIZE)
    filters: RetrievalFilters = Field(default_factory=RetrievalFilters)
    seed: int | None = Field(default=None, ge=0)
    strategy: Literal["uniform", "prioritized", "recency"] = "uniform"
    alpha: float = Field(default=1.0, ge=0.0, le=100.0)
    half_life: float = Field(default=1000.0, gt=0.0)


class TransitionSampleResponse(WireModel):
    """Sampled transitions with Reverb-style sample info.

    Attributes:
        transitions: the sample, in draw order.
        probabilities: per transition, the probability P(i) that one draw of the strategy picks
            it (``1 / table_size`` for ``uniform``).
        table_size: N, the number of transitions that matched the filters.
    """

    transitions: list[TransitionRecord]
    probabilities: list[float]
    table_size: int = Field(ge=0)


class TransitionPage(WireModel):
    """One page of ``GET /v1/transitions``, ordered by ``id``.

    Attributes:
        data: the transitions of this page.
        next_after_id: pass as ``after_id`` to get the next page; ``None`` on the last page.
    """

    data: list[TransitionRecord]
    next_after_id: int | None = None


class TrajectorySummary(WireModel):
    """A stored trajectory without its transitions."""

    trajectory_id: str
    task: NonEmptyStr
    task_id: str | None = None
    environment: str
    game_seed: int | None = None
    split: Split | None = None
    policy: str
    source: DataSource
    policy_version: str | None = None
    num_transitions: int
    episode_return: float
    success: bool
    created_at: datetime


class TrajectoryList(WireModel):
    """A page of trajectory summaries; ``count`` is the total matching the filters."""

    data: list[TrajectorySummary]
    count: int


class ReplayStats(WireModel):
    """Table statistics (Dreamer's ``Replay.stats()`` in spirit).

    Attributes:
        trajectories: stored trajectories.
        transitions: stored transitions.
        by_source: trajectory count per source.
        by_environment: trajectory count per environment.
        by_policy: trajectory count per policy.
        success_rate_by_policy: fraction of successful trajectories per policy, in [0, 1].
        evicted_trajectories: trajectories removed by the retention policy so far.
        evicted_transitions: transitions removed with them.
    """

    trajectories: int
    transitions: int
    by_source: dict[str, int]
    by_environment: dict[str, int]
    by_policy: dict[str, int]
    success_rate_by_policy: dict[str, float]
    evicted_trajectories: int = 0
    evicted_transitions: int = 0


class TransitionReasoning(WireModel):
    """A reasoning trace R*_t for one stored transition (paper Eq. 5, teacher annotation).

    Attributes:
        id: the transition's store id (:attr:`TransitionRecord.id`).
        reasoning: why a_t in s_t leads to s_{t+1} and r_{t+1} (1..8000 characters).
    """

    id: int = Field(ge=1)
    reasoning: NonEmptyStr = Field(max_length=MAX_REASONING_CHARS)


class TransitionReasoningRequest(WireModel):
    """Body of ``PATCH /v1/transitions``: reasoning traces for many transitions, all or nothing.

    Attributes:
        updates: 1..5000 ``(id, reasoning)`` pairs; an id may appear twice only with the same
            reasoning.
        overwrite: replace a trace a transition already has; ``False`` (default) keeps existing
            traces, so re-running an annotation job never clobbers one.
    """

    updates: list[TransitionReasoning] = Field(min_length=1, max_length=MAX_REASONING_UPDATES)
    overwrite: bool = False


class TransitionReasoningPatch(WireModel):
    """Body of ``PATCH /v1/transitions/{id}`` (see :class:`TransitionReasoningRequest`)."""

    reasoning: NonEmptyStr = Field(max_length=MAX_REASONING_CHARS)
    overwrite: bool = False


class TransitionReasoningResponse(WireModel):
    """Result of storing reasoning traces.

    Attributes:
        updated: transitions whose trace was written by this request.
        unchanged: transitions left as they were: they already had this trace, or another one
            and ``overwrite`` was false. ``updated + unchanged`` = distinct ids sent.
    """

    updated: int = Field(ge=0)
    unchanged: int = Field(ge=0)
