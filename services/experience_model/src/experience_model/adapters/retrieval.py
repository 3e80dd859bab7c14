"""Top-k retrieval from the replay store over REST (paper Eq. 4, arXiv 2511.03773).

Retrieval acts as the caller: the replay store only returns the caller's team's transitions, so
each query is sent with the API key of the request it came from
(:func:`~experience_model.domain.caller.caller_of`; without one, with the client's own key).
Queries of one batch are grouped by (team, key, environment) and sent as one ``POST /v1/retrieve``
per group, restricted to that environment and to ``source`` (real, synthetic or any). Results are
cached per ``(team, environment, source, k, task, observation, action)`` for ``cache_ttl_s``
seconds, so a team never gets another team's cached transitions: imagined rollouts revisit the
same abstract states constantly, and the real part of the buffer only changes when new real data
is ingested (set the TTL to 0 to disable the cache). Keys are never logged nor cached.

With ``synthetic_fraction`` set (``EXPERIENCE_MODEL_RETRIEVAL_SOURCE=mix``) each group is
retrieved twice, from the real and from the synthetic part of the buffer, and
:func:`~experience_model.domain.mixing.mix_retrieved` keeps that share of synthetic examples.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence

from cachetools import TTLCache

from dreamgym.clients.replay_store import AsyncReplayStoreClient
from dreamgym.replay_types import MAX_RETRIEVAL_QUERIES, RetrievalQuery, RetrievedTransition
from dreamgym.types import DataSource
from experience_model.domain.caller import caller_of
from experience_model.domain.mixing import mix_retrieved
from experience_model.domain.prompts import ExampleTransition
from experience_model.domain.simulator import RetrievedExample, StepQuery

__all__ = ["ReplayStoreRetriever", "to_example"]


def to_example(t: RetrievedTransition) -> RetrievedExample:
    """Convert a replay-store hit into a prompt example with a ``trajectory#step`` reference."""
    return RetrievedExample(
        example=ExampleTransition(
            observation=t.observation,
            action=t.action,
            next_observation=t.next_observation,
            next_admissible_actions=list(t.next_admissible_actions),
            reward=t.reward,
            terminated=t.terminated,
        ),
        ref=f"{t.trajectory_id}#{t.step}",
        score=t.score,
    )


class ReplayStoreRetriever:
    """Retrieve demonstrations d_j from the replay store.

    Args:
        client: async replay-store client.
        source: ``"real"``, ``"synthetic"`` or ``None`` (any); ignored when
            ``synthetic_fraction`` is set.
        synthetic_fraction: mix real and synthetic examples with this synthetic share of k, in
            [0, 1] (``None``: retrieve from ``source`` only).
        cache_ttl_s: seconds a retrieval result is reused (0 disables caching).
        cache_size: most cached queries.
    """

    def __init__(
        self,
        client: AsyncReplayStoreClient,
        source: DataSource | None = "real",
        *,
        synthetic_fraction: float | None = None,
        cache_ttl_s: float = 300.0,
        cache_size: int = 100_000,
    ) -> None:
        if synthetic_fraction is not None and not 0.0 <= synthetic_fraction <= 1.0:
            raise ValueError(f"synthetic_fraction must be in [0, 1], got {synthetic_fraction}")
        self.client = client
        self.source = source
        self.synthetic_fraction = synthetic_fraction
        self._cache: TTLCache[tuple[object, ...], list[RetrievedExample]] | None = (
            TTLCache(maxsize=cache_size, ttl=cache_ttl_s) if cache_ttl_s > 0 else None
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, q: StepQuery, k: int) -> tuple[object, ...]:
        team = caller_of(q).team
        source = self.source if self.synthetic_fraction is None else self.synthetic_fraction
        return (team, q.environment, source, k, q.task, q.observation, q.action)

    async def _fetch(
        self, queries: list[RetrievalQuery], k: int, environment: str | None, api_key: str | None
    ) -> list[list[RetrievedTransition]]:
        if self.synthetic_fraction is None:
            return await self.client.retrieve(
                queries, k=k, environment=environment, source=self.source, api_key=api_key
            )
        kwargs = {"k": k, "environment": environment, "api_key": api_key}
        real = await self.client.retrieve(queries, source="real", **kwargs)
        synthetic = await self.client.retrieve(queries, source="synthetic", **kwargs)
        return [
            mix_retrieved(
                r, s, k, synthetic_fraction=self.synthetic_fraction, score=lambda t: t.score
            )
            for r, s in zip(real, synthetic, strict=True)
        ]

    async def retrieve(self, queries: Sequence[StepQuery], k: int) -> list[list[RetrievedExample]]:
        """k nearest stored transitions per query (same environment, the query caller's team),
        most similar first.

        Raises:
            BackendUnavailableError: the replay store cannot be reached (after retries).
            AuthenticationError: the replay store refused a caller's key (401).
        """
        results: list[list[RetrievedExample]] = [[] for _ in queries]
        groups: dict[tuple[str, str | None, str | None], list[int]] = defaultdict(list)
        for i, q in enumerate(queries):
            cached = self._lookup(self._key(q, k))
            if cached is not None:
                results[i] = cached
            else:
                caller = caller_of(q)
                groups[(caller.team, caller.api_key, q.environment)].append(i)
        for (_, api_key, environment), idx in groups.items():
            for start in range(0, len(idx), MAX_RETRIEVAL_QUERIES):
                chunk = idx[start : start + MAX_RETRIEVAL_QUERIES]
                hits = await self._fetch(
                    [
                        RetrievalQuery(
                            task=queries[i].task,
                            observation=queries[i].observation,
                            action=queries[i].action,
                        )
                        for i in chunk
                    ],
                    k,
                    environment,
                    api_key,
                )
                for i, row in zip(chunk, hits, strict=True):
                    results[i] = [to_example(t) for t in row]
                    self._store(self._key(queries[i], k), results[i])
        return results

    def _lookup(self, key: tuple[object, ...]) -> list[RetrievedExample] | None:
        if self._cache is None:
            return None
        with self._lock:
            value = self._cache.get(key)
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
            return value

    def _store(self, key: tuple[object, ...], value: list[RetrievedExample]) -> None:
        if self._cache is not None:
            with self._lock:
                self._cache[key] = value
