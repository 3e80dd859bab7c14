"""Typed clients of the replay store service (``services/replay_store``).

Both clients speak the wire models of :mod:`dreamgym.replay_types` and raise
:mod:`dreamgym.errors` classes for error envelopes (``NotFoundError`` for an unknown trajectory,
``ConflictError`` for an id re-used with other content, ``InvalidRequestError`` for a 422).

>>> with ReplayStoreClient("http://localhost:8002") as replay:  # doctest: +SKIP
...     replay.ingest([trajectory]).trajectory_ids
...     query = RetrievalQuery(task="find the coin", observation="A coin.", action="take coin")
...     neighbours = replay.retrieve([query], k=5, source="real")[0]
...     for record in replay.iter_transitions(environment="twx-coin"):
...         ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any
from urllib.parse import quote

from dreamgym.clients.base import AsyncServiceClient, ServiceClient
from dreamgym.replay_types import (
    IngestResult,
    ReplayStats,
    RetrievalFilters,
    RetrievalQuery,
    RetrievalRequest,
    RetrievalResponse,
    RetrievedTransition,
    TrajectoryIngestRequest,
    TrajectoryList,
    TransitionPage,
    TransitionReasoning,
    TransitionReasoningPatch,
    TransitionReasoningRequest,
    TransitionReasoningResponse,
    TransitionRecord,
    TransitionSampleRequest,
    TransitionSampleResponse,
)
from dreamgym.types import DataSource, Split, Trajectory

__all__ = ["AsyncReplayStoreClient", "ReplayStoreClient"]

QueryLike = RetrievalQuery | dict[str, str]


def _filters(
    environment: str | None,
    source: DataSource | None,
    split: Split | None,
    exclude_trajectory_ids: Sequence[str] | None,
) -> RetrievalFilters:
    return RetrievalFilters(
        environment=environment,
        source=source,
        split=split,
        exclude_trajectory_ids=list(exclude_trajectory_ids or ()),
    )


def _retrieval_body(queries: Sequence[QueryLike], k: int, filters: RetrievalFilters) -> Any:
    request = RetrievalRequest(
        queries=[RetrievalQuery.model_validate(q) for q in queries], k=k, filters=filters
    )
    return request.model_dump(mode="json")


ReasoningLike = TransitionReasoning | tuple[int, str]


def _reasoning_body(updates: Sequence[ReasoningLike], overwrite: bool) -> Any:
    items = [
        u if isinstance(u, TransitionReasoning) else TransitionReasoning(id=u[0], reasoning=u[1])
        for u in updates
    ]
    return TransitionReasoningRequest(updates=items, overwrite=overwrite).model_dump(mode="json")


def _trajectory_path(trajectory_id: str) -> str:
    return f"/v1/trajectories/{quote(trajectory_id, safe='')}"


def _list_params(**values: Any) -> dict[str, Any]:
    """Query parameters without the ``None`` ones."""
    return {name: value for name, value in values.items() if value is not None}


class ReplayStoreClient(ServiceClient):
    """Synchronous replay store client (retries 429/5xx with backoff; see ``ServiceClient``).

    Args:
        base_url: e.g. ``"http://replay-store:8002"``.
        **kwargs: ``api_key``, ``timeout_s``, ``max_retries``, ``backoff_s``.
    """

    def ingest(self, trajectories: Sequence[Trajectory]) -> IngestResult:
        """Store trajectories idempotently in one transaction.

        Raises:
            ConflictError: a ``trajectory_id`` is stored with different content (nothing stored).
            InvalidRequestError: a trajectory is malformed or the batch is too large.
        """
        body = TrajectoryIngestRequest(trajectories=list(trajectories)).model_dump(mode="json")
        return IngestResult.model_validate(self.request("POST", "/v1/trajectories", json=body))

    def retrieve(
        self,
        queries: Sequence[QueryLike],
        k: int = 5,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        exclude_trajectory_ids: Sequence[str] | None = None,
    ) -> list[list[RetrievedTransition]]:
        """Top-k stored transitions per ``(task, observation, action)`` query, most similar first.

        Returns:
            One list per query (arXiv 2511.03773 Eq. 4 neighbours).
        """
        filters = _filters(environment, source, split, exclude_trajectory_ids)
        data = self.request("POST", "/v1/retrieve", json=_retrieval_body(queries, k, filters))
        return RetrievalResponse.model_validate(data).results

    def sample(
        self,
        n: int,
        seed: int | None = None,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        exclude_trajectory_ids: Sequence[str] | None = None,
    ) -> TransitionSampleResponse:
        """Uniform sample of ``n`` transitions without replacement (``min(n, N)`` if fewer)."""
        request = TransitionSampleRequest(
            n=n, seed=seed, filters=_filters(environment, source, split, exclude_trajectory_ids)
        )
        data = self.request("POST", "/v1/transitions:sample", json=request.model_dump(mode="json"))
        return TransitionSampleResponse.model_validate(data)

    def iter_transitions(
        self,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        has_reasoning: bool | None = None,
        page_size: int = 1000,
    ) -> Iterator[TransitionRecord]:
        """Yield every stored transition matching the filters, by ascending id, page by page.

        ``has_reasoning=False`` yields only transitions without a reasoning trace (the ones a
        teacher still has to annotate).
        """
        after_id: int | None = None
        while True:
            params = _list_params(
                environment=environment,
                source=source,
                split=split,
                has_reasoning=None if has_reasoning is None else str(has_reasoning).lower(),
                after_id=after_id,
                limit=page_size,
            )
            page = TransitionPage.model_validate(
                self.request("GET", "/v1/transitions", params=params)
            )
            yield from page.data
            if page.next_after_id is None:
                return
            after_id = page.next_after_id

    def annotate(
        self, updates: Sequence[ReasoningLike], *, overwrite: bool = False
    ) -> TransitionReasoningResponse:
        """Store reasoning traces ``(transition id, reasoning)`` all or nothing (idempotent).

        Raises:
            NotFoundError: an id is not one of the caller's transitions (nothing stored).
            InvalidRequestError: an id is repeated with different reasoning, or > 5000 updates.
        """
        data = self.request("PATCH", "/v1/transitions", json=_reasoning_body(updates, overwrite))
        return TransitionReasoningResponse.model_validate(data)

    def annotate_transition(
        self, transition_id: int, reasoning: str, *, overwrite: bool = False
    ) -> TransitionRecord:
        """Store one reasoning trace; returns the transition as stored afterwards."""
        body = TransitionReasoningPatch(reasoning=reasoning, overwrite=overwrite)
        data = self.request("PATCH", f"/v1/transitions/{transition_id:d}", json=body.model_dump())
        return TransitionRecord.model_validate(data)

    def get_trajectory(self, trajectory_id: str) -> Trajectory:
        """The stored trajectory.

        Raises:
            NotFoundError: no trajectory has this id.
        """
        return Trajectory.model_validate(self.request("GET", _trajectory_path(trajectory_id)))

    def list_trajectories(
        self,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        policy: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> TrajectoryList:
        """Trajectory summaries (oldest first) and the total count matching the filters."""
        params = _list_params(
            environment=environment, source=source, policy=policy, limit=limit, offset=offset
        )
        return TrajectoryList.model_validate(self.request("GET", "/v1/trajectories", params=params))

    def stats(self) -> dict[str, Any]:
        """Table statistics (see :class:`~dreamgym.replay_types.ReplayStats`) as a dict."""
        return ReplayStats.model_validate(self.request("GET", "/v1/stats")).model_dump()


class AsyncReplayStoreClient(AsyncServiceClient):
    """Asynchronous replay store client; same methods as :class:`ReplayStoreClient`, awaitable.

    Args:
        base_url: e.g. ``"http://replay-store:8002"``.
        **kwargs: ``max_connections``, ``api_key``, ``timeout_s``, ``max_retries``, ``backoff_s``.
    """

    async def ingest(self, trajectories: Sequence[Trajectory]) -> IngestResult:
        """Store trajectories idempotently in one transaction (see ``ReplayStoreClient.ingest``)."""
        body = TrajectoryIngestRequest(trajectories=list(trajectories)).model_dump(mode="json")
        data = await self.request("POST", "/v1/trajectories", json=body)
        return IngestResult.model_validate(data)

    async def retrieve(
        self,
        queries: Sequence[QueryLike],
        k: int = 5,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        exclude_trajectory_ids: Sequence[str] | None = None,
        api_key: str | None = None,
    ) -> list[list[RetrievedTransition]]:
        """Top-k stored transitions per query, most similar first.

        ``api_key`` sends this one request with another key than the client's (a service
        retrieving on behalf of its caller's team).
        """
        filters = _filters(environment, source, split, exclude_trajectory_ids)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        data = await self.request(
            "POST", "/v1/retrieve", json=_retrieval_body(queries, k, filters), headers=headers
        )
        return RetrievalResponse.model_validate(data).results

    async def sample(
        self,
        n: int,
        seed: int | None = None,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        exclude_trajectory_ids: Sequence[str] | None = None,
    ) -> TransitionSampleResponse:
        """Uniform sample of ``n`` transitions without replacement."""
        request = TransitionSampleRequest(
            n=n, seed=seed, filters=_filters(environment, source, split, exclude_trajectory_ids)
        )
        data = await self.request(
            "POST", "/v1/transitions:sample", json=request.model_dump(mode="json")
        )
        return TransitionSampleResponse.model_validate(data)

    async def iter_transitions(
        self,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        split: Split | None = None,
        has_reasoning: bool | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[TransitionRecord]:
        """Yield every stored transition matching the filters, by ascending id, page by page."""
        after_id: int | None = None
        while True:
            params = _list_params(
                environment=environment,
                source=source,
                split=split,
                has_reasoning=None if has_reasoning is None else str(has_reasoning).lower(),
                after_id=after_id,
                limit=page_size,
            )
            data = await self.request("GET", "/v1/transitions", params=params)
            page = TransitionPage.model_validate(data)
            for record in page.data:
                yield record
            if page.next_after_id is None:
                return
            after_id = page.next_after_id

    async def annotate(
        self, updates: Sequence[ReasoningLike], *, overwrite: bool = False
    ) -> TransitionReasoningResponse:
        """Store reasoning traces all or nothing (see ``ReplayStoreClient.annotate``)."""
        body = _reasoning_body(updates, overwrite)
        data = await self.request("PATCH", "/v1/transitions", json=body)
        return TransitionReasoningResponse.model_validate(data)

    async def get_trajectory(self, trajectory_id: str) -> Trajectory:
        """The stored trajectory.

        Raises:
            NotFoundError: no trajectory has this id.
        """
        data = await self.request("GET", _trajectory_path(trajectory_id))
        return Trajectory.model_validate(data)

    async def list_trajectories(
        self,
        *,
        environment: str | None = None,
        source: DataSource | None = None,
        policy: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> TrajectoryList:
        """Trajectory summaries (oldest first) and the total count matching the filters."""
        params = _list_params(
            environment=environment, source=source, policy=policy, limit=limit, offset=offset
        )
        return TrajectoryList.model_validate(
            await self.request("GET", "/v1/trajectories", params=params)
        )

    async def stats(self) -> dict[str, Any]:
        """Table statistics as a dict."""
        return ReplayStats.model_validate(await self.request("GET", "/v1/stats")).model_dump()
