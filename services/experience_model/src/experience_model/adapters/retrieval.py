"""Top-k retrieval from the replay store over REST (paper Eq. 4, arXiv 2511.03773).

Queries of one batch are grouped by environment and sent as one ``POST /v1/retrieve`` per group,
restricted to that environment and to ``source`` (real, synthetic or any).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dreamgym.clients.replay_store import AsyncReplayStoreClient
from dreamgym.replay_types import MAX_RETRIEVAL_QUERIES, RetrievalQuery, RetrievedTransition
from dreamgym.types import DataSource
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
        source: ``"real"``, ``"synthetic"`` or ``None`` (any).
    """

    def __init__(self, client: AsyncReplayStoreClient, source: DataSource | None = "real") -> None:
        self.client = client
        self.source = source

    async def retrieve(self, queries: Sequence[StepQuery], k: int) -> list[list[RetrievedExample]]:
        """k nearest stored transitions per query (same environment), most similar first.

        Raises:
            BackendUnavailableError: the replay store cannot be reached (after retries).
        """
        groups: dict[str | None, list[int]] = defaultdict(list)
        for i, q in enumerate(queries):
            groups[q.environment].append(i)
        results: list[list[RetrievedExample]] = [[] for _ in queries]
        for environment, idx in groups.items():
            for start in range(0, len(idx), MAX_RETRIEVAL_QUERIES):
                chunk = idx[start : start + MAX_RETRIEVAL_QUERIES]
                hits = await self.client.retrieve(
                    [
                        RetrievalQuery(
                            task=queries[i].task,
                            observation=queries[i].observation,
                            action=queries[i].action,
                        )
                        for i in chunk
                    ],
                    k=k,
                    environment=environment,
                    source=self.source,
                )
                for i, row in zip(chunk, hits, strict=True):
                    results[i] = [to_example(t) for t in row]
        return results
