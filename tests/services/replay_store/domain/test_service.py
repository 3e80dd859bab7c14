"""Unit tests of ReplayService with in-memory fakes (no database)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dreamgym.replay_types import RetrievalFilters
from replay_store.adapters.embeddings import HashEmbedder
from replay_store.domain.errors import LimitExceededError, TrajectoryNotFoundError
from replay_store.domain.keys import PreparedTrajectory
from replay_store.domain.ports import StoreRaceError
from replay_store.domain.service import ReplayService


class CountingEmbedder(HashEmbedder):
    """Hash embedder that records each batch it embeds."""

    def __init__(self) -> None:
        super().__init__(32)
        self.batches: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().embed(texts)


class FakeRepository:
    """Dict-backed store; ``race_with`` is stored by a 'concurrent writer' on the first insert."""

    def __init__(self, race_with: PreparedTrajectory | None = None) -> None:
        self.rows: dict[str, str] = {}
        self.embeddings: dict[str, np.ndarray] = {}
        self.race_with = race_with

    def find_existing(self, trajectory_ids: Sequence[str], content_hashes: Sequence[str]):
        return {
            tid: digest
            for tid, digest in self.rows.items()
            if tid in trajectory_ids or digest in content_hashes
        }

    def insert(self, trajectories: Sequence[PreparedTrajectory], embeddings: np.ndarray) -> None:
        if self.race_with is not None:
            self.rows[self.race_with.trajectory_id] = self.race_with.content_hash
            self.race_with = None
            raise StoreRaceError("duplicate key")
        offset = 0
        for p in trajectories:
            steps = len(p.trajectory.transitions)
            self.rows[p.trajectory_id] = p.content_hash
            self.embeddings[p.trajectory_id] = embeddings[offset : offset + steps]
            offset += steps
        assert offset == embeddings.shape[0]

    def get_trajectory(self, trajectory_id: str):
        return None


def test_ingest_embeds_all_new_transitions_in_one_batch(make_trajectory):
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder)
    batch = [make_trajectory(), make_trajectory(actions=("look", "wait", "take coin"))]

    result = service.ingest(batch)

    assert (result.inserted, result.duplicates) == (2, 0)
    assert len(embedder.batches) == 1
    assert len(embedder.batches[0]) == 5


def test_ingest_known_trajectories_are_not_embedded_again(make_trajectory):
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder)
    service.ingest([make_trajectory()])

    result = service.ingest([make_trajectory(), make_trajectory(actions=("look",))])

    assert (result.inserted, result.duplicates) == (1, 1)
    assert len(embedder.batches) == 2
    assert len(embedder.batches[-1]) == 1
    assert embedder.batches[-1][0].startswith("Action: look\n")


def test_ingest_lost_race_replans_and_reports_duplicate(make_trajectory):
    from replay_store.domain.keys import prepare_trajectory

    winner = prepare_trajectory(make_trajectory())
    repository = FakeRepository(race_with=winner)
    service = ReplayService(repository, CountingEmbedder())

    result = service.ingest([make_trajectory(), make_trajectory(actions=("look",))])

    assert (result.inserted, result.duplicates) == (1, 1)
    assert result.trajectory_ids[0] == winner.trajectory_id
    assert len(repository.rows) == 2


def test_ingest_over_batch_limit_raises_limit_exceeded(make_trajectory):
    service = ReplayService(FakeRepository(), CountingEmbedder(), max_batch_trajectories=1)

    with pytest.raises(LimitExceededError) as info:
        service.ingest([make_trajectory(), make_trajectory(actions=("look",))])

    assert info.value.param == "body.trajectories"


def test_retrieve_k_above_max_raises_before_embedding():
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder, max_k=3)

    with pytest.raises(LimitExceededError, match="body.k must be <= 3"):
        service.retrieve([], 4, RetrievalFilters())

    assert embedder.batches == []


def test_get_trajectory_unknown_raises_not_found_naming_id():
    service = ReplayService(FakeRepository(), CountingEmbedder())

    with pytest.raises(TrajectoryNotFoundError, match="'nope'"):
        service.get_trajectory("nope")


class RecordingRepository(FakeRepository):
    """Records the arguments of each nearest-neighbour call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[np.ndarray, int, RetrievalFilters]] = []

    def nearest(self, queries, k, filters):
        self.calls.append((queries, k, filters))
        return [[] for _ in queries]


def test_retrieve_embeds_all_queries_in_one_batch_and_passes_filters():
    from dreamgym.replay_types import RetrievalQuery

    repository, embedder = RecordingRepository(), CountingEmbedder()
    service = ReplayService(repository, embedder)
    queries = [RetrievalQuery(task="t", observation=f"o{i}", action="a") for i in range(3)]
    filters = RetrievalFilters(source="real", exclude_trajectory_ids=["x"])

    results = service.retrieve(queries, 4, filters)

    assert results == [[], [], []]
    assert len(embedder.batches) == 1 and len(embedder.batches[0]) == 3
    ((vectors, k, passed),) = repository.calls
    assert vectors.shape == (3, 32) and k == 4 and passed == filters
