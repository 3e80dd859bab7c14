"""Tests of replay-store retrieval (experience_model.adapters.retrieval) with a fake client, and
with the real async client on a recording ``httpx.MockTransport`` (whose key each request
carries)."""

from __future__ import annotations

import json

import httpx

from dreamgym.clients.replay_store import AsyncReplayStoreClient
from dreamgym.replay_types import MAX_RETRIEVAL_QUERIES, RetrievedTransition
from experience_model.adapters.retrieval import ReplayStoreRetriever, to_example
from experience_model.domain.caller import Caller, CallerStepQuery
from experience_model.domain.simulator import StepQuery


def hit(trajectory_id: str, step: int, observation: str, environment: str = "twx-coin"):
    return RetrievedTransition(
        id=1,
        trajectory_id=trajectory_id,
        task="t",
        environment=environment,
        source="real",
        policy="expert",
        step=step,
        observation=observation,
        admissible_actions=["a"],
        action="a",
        next_observation=f"after {observation}",
        next_admissible_actions=["b"],
        reward=1.0,
        terminated=True,
        score=0.5,
    )


class FakeReplayStoreClient:
    """Answers each query with one hit whose observation echoes the query."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def retrieve(self, queries, k=5, *, environment=None, source=None, **_):
        self.calls.append({"n": len(queries), "k": k, "environment": environment, "source": source})
        return [
            [hit(f"traj-{environment}", 3, q.observation, environment or "any")] for q in queries
        ]


def query(observation: str, environment: str | None) -> StepQuery:
    return StepQuery(
        task="t",
        environment=environment,
        observation=observation,
        admissible_actions=["a"],
        action="a",
    )


def test_to_example_keeps_transition_and_builds_ref():
    example = to_example(hit("traj-9", 4, "the hall"))

    assert example.ref == "traj-9#4"
    assert example.score == 0.5
    assert example.example.observation == "the hall"
    assert example.example.next_observation == "after the hall"
    assert example.example.terminated is True


async def test_retriever_groups_by_environment_and_keeps_query_order():
    client = FakeReplayStoreClient()
    queries = [query("q0", "env-a"), query("q1", "env-b"), query("q2", "env-a")]

    results = await ReplayStoreRetriever(client, source="real").retrieve(queries, k=2)

    assert [r[0].example.observation for r in results] == ["q0", "q1", "q2"]
    assert sorted((c["environment"], c["n"]) for c in client.calls) == [("env-a", 2), ("env-b", 1)]
    assert all(c["k"] == 2 and c["source"] == "real" for c in client.calls)


async def test_retriever_splits_large_groups_into_request_sized_chunks():
    client = FakeReplayStoreClient()
    n = MAX_RETRIEVAL_QUERIES + 5
    queries = [query(f"q{i}", None) for i in range(n)]

    results = await ReplayStoreRetriever(client, source=None).retrieve(queries, k=1)

    assert [c["n"] for c in client.calls] == [MAX_RETRIEVAL_QUERIES, 5]
    assert [r[0].example.observation for r in results] == [f"q{i}" for i in range(n)]
    assert client.calls[0]["source"] is None


class RecordingTransport:
    """Answers ``/v1/retrieve`` with one hit per query; records (Authorization, queries)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str | None, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        queries = json.loads(request.content)["queries"]
        self.requests.append((request.headers.get("authorization"), len(queries)))
        hits = [[hit("traj-1", 0, q["observation"]).model_dump(mode="json")] for q in queries]
        return httpx.Response(200, json={"results": hits})


def as_caller(team: str, key: str | None, observation: str = "q") -> CallerStepQuery:
    return CallerStepQuery(
        caller=Caller(team=team, api_key=key),
        task="t",
        environment="env-a",
        observation=observation,
        admissible_actions=["a"],
        action="a",
    )


def recording_retriever(**kwargs) -> tuple[ReplayStoreRetriever, RecordingTransport]:
    transport = RecordingTransport()
    client = AsyncReplayStoreClient(
        "http://replay-store",
        api_key="service-key",
        transport=httpx.MockTransport(transport),
        max_retries=0,
    )
    return ReplayStoreRetriever(client, source="real", **kwargs), transport


async def test_each_callers_key_is_sent_and_plain_queries_use_the_clients_own():
    retriever, transport = recording_retriever(cache_ttl_s=0)
    queries = [as_caller("lab-a", "key-a", "q0"), query("q1", "env-a"), as_caller("lab-b", "key-b")]

    results = await retriever.retrieve(queries, k=1)

    assert sorted(transport.requests) == [
        ("Bearer key-a", 1),
        ("Bearer key-b", 1),
        ("Bearer service-key", 1),
    ]
    assert [r[0].example.observation for r in results] == ["q0", "q1", "q"]
    assert "key-a" not in repr(queries[0])  # the key stays out of reprs (and so of logs)


async def test_cache_is_per_team_not_per_key():
    retriever, transport = recording_retriever(cache_ttl_s=300)

    await retriever.retrieve([as_caller("lab-a", "key-a1")], k=1)
    await retriever.retrieve([as_caller("lab-a", "key-a2")], k=1)  # same team: cached
    await retriever.retrieve([as_caller("lab-b", "key-b")], k=1)  # another team: asks again

    assert transport.requests == [("Bearer key-a1", 1), ("Bearer key-b", 1)]
    assert (retriever.hits, retriever.misses) == (1, 2)


class SourcedReplayStoreClient:
    """Answers with ``k`` hits per query from the requested source, scores decreasing."""

    def __init__(self, scores: dict[str, list[float]]) -> None:
        self.scores = scores
        self.sources: list[str | None] = []

    async def retrieve(self, queries, k=5, *, environment=None, source=None, **_):
        self.sources.append(source)
        out = []
        for q in queries:
            row = []
            for j, score in enumerate(self.scores[source][:k]):
                h = hit(f"{source}-{j}", 0, q.observation).model_copy(
                    update={"score": score, "source": source}
                )
                row.append(h)
            out.append(row)
        return out


async def test_retriever_mix_keeps_the_synthetic_share_of_k():
    client = SourcedReplayStoreClient({"real": [0.9, 0.8, 0.7], "synthetic": [0.95, 0.1]})
    retriever = ReplayStoreRetriever(client, synthetic_fraction=0.34, cache_ttl_s=0)

    (row,) = await retriever.retrieve([query("hall", "twx-coin")], k=3)

    assert sorted(client.sources) == ["real", "synthetic"]
    assert [e.ref for e in row] == ["synthetic-0#0", "real-0#0", "real-1#0"]


def test_retriever_mix_fraction_out_of_range_raises():
    import pytest

    with pytest.raises(ValueError, match="synthetic_fraction"):
        ReplayStoreRetriever(SourcedReplayStoreClient({}), synthetic_fraction=1.2)
