"""Unit tests of ReplayService with in-memory fakes (no database)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dreamgym.replay_types import RetrievalFilters
from replay_store.adapters.embeddings import HashEmbedder
from replay_store.domain.errors import (
    LimitExceededError,
    TrajectoryNotFoundError,
    TrajectoryQuotaExceededError,
)
from replay_store.domain.keys import PreparedTrajectory
from replay_store.domain.ports import QuotaReachedError, StoreRaceError
from replay_store.domain.service import ReplayService, check_trajectory_quota

TEAM = "lab-a"


class CountingEmbedder(HashEmbedder):
    """Hash embedder that records each batch it embeds."""

    def __init__(self) -> None:
        super().__init__(32)
        self.batches: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().embed(texts)


class FakeRepository:
    """Dict-backed store keyed by (team, id); ``race_with`` is stored by a 'concurrent writer'
    of ``TEAM`` on the first insert; ``concurrent_rows`` more rows appear at insert time."""

    def __init__(
        self, race_with: PreparedTrajectory | None = None, concurrent_rows: int = 0
    ) -> None:
        self.rows: dict[tuple[str, str], str] = {}
        self.embeddings: dict[tuple[str, str], np.ndarray] = {}
        self.race_with = race_with
        self.concurrent_rows = concurrent_rows
        self.inserts = 0

    def find_existing(
        self, team: str, trajectory_ids: Sequence[str], content_hashes: Sequence[str]
    ):
        return {
            tid: digest
            for (owner, tid), digest in self.rows.items()
            if owner == team and (tid in trajectory_ids or digest in content_hashes)
        }

    def count_trajectories(self, team: str) -> int:
        return sum(owner == team for owner, _ in self.rows)

    def insert(
        self,
        team: str,
        trajectories: Sequence[PreparedTrajectory],
        embeddings: np.ndarray,
        *,
        max_trajectories: int | None = None,
        retention: object = None,
    ) -> tuple[int, int]:
        self.inserts += 1
        if self.race_with is not None:
            self.rows[(TEAM, self.race_with.trajectory_id)] = self.race_with.content_hash
            self.race_with = None
            raise StoreRaceError("duplicate key")
        for i in range(self.concurrent_rows):
            self.rows[(team, f"concurrent-{i}")] = f"hash-{i}"
        stored = self.count_trajectories(team)
        if max_trajectories is not None and stored + len(trajectories) > max_trajectories:
            raise QuotaReachedError(stored)
        offset = 0
        for p in trajectories:
            steps = len(p.trajectory.transitions)
            self.rows[(team, p.trajectory_id)] = p.content_hash
            self.embeddings[(team, p.trajectory_id)] = embeddings[offset : offset + steps]
            offset += steps
        assert offset == embeddings.shape[0]
        return 0, 0

    def get_trajectory(self, team: str, trajectory_id: str):
        return None


def test_ingest_embeds_all_new_transitions_in_one_batch(make_trajectory):
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder)
    batch = [make_trajectory(), make_trajectory(actions=("look", "wait", "take coin"))]

    result = service.ingest(batch, team=TEAM)

    assert (result.inserted, result.duplicates) == (2, 0)
    assert len(embedder.batches) == 1
    assert len(embedder.batches[0]) == 5


def test_ingest_known_trajectories_are_not_embedded_again(make_trajectory):
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder)
    service.ingest([make_trajectory()], team=TEAM)

    result = service.ingest([make_trajectory(), make_trajectory(actions=("look",))], team=TEAM)

    assert (result.inserted, result.duplicates) == (1, 1)
    assert len(embedder.batches) == 2
    assert len(embedder.batches[-1]) == 1
    assert embedder.batches[-1][0].startswith("Action: look\n")


def test_ingest_lost_race_replans_and_reports_duplicate(make_trajectory):
    from replay_store.domain.keys import prepare_trajectory

    winner = prepare_trajectory(make_trajectory())
    repository = FakeRepository(race_with=winner)
    service = ReplayService(repository, CountingEmbedder())

    result = service.ingest([make_trajectory(), make_trajectory(actions=("look",))], team=TEAM)

    assert (result.inserted, result.duplicates) == (1, 1)
    assert result.trajectory_ids[0] == winner.trajectory_id
    assert len(repository.rows) == 2


def test_ingest_over_batch_limit_raises_limit_exceeded(make_trajectory):
    service = ReplayService(FakeRepository(), CountingEmbedder(), max_batch_trajectories=1)

    with pytest.raises(LimitExceededError) as info:
        service.ingest([make_trajectory(), make_trajectory(actions=("look",))], team=TEAM)

    assert info.value.param == "body.trajectories"


def test_retrieve_k_above_max_raises_before_embedding():
    embedder = CountingEmbedder()
    service = ReplayService(FakeRepository(), embedder, max_k=3)

    with pytest.raises(LimitExceededError, match="body.k must be <= 3"):
        service.retrieve([], 4, RetrievalFilters(), team=TEAM)

    assert embedder.batches == []


def test_get_trajectory_unknown_raises_not_found_naming_id():
    service = ReplayService(FakeRepository(), CountingEmbedder())

    with pytest.raises(TrajectoryNotFoundError, match="'nope'"):
        service.get_trajectory("nope", team=TEAM)


class RecordingRepository(FakeRepository):
    """Records the arguments of each nearest-neighbour call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, np.ndarray, int, RetrievalFilters]] = []

    def nearest(self, team, queries, k, filters):
        self.calls.append((team, queries, k, filters))
        return [[] for _ in queries]


def test_retrieve_embeds_all_queries_in_one_batch_and_passes_filters():
    from dreamgym.replay_types import RetrievalQuery

    repository, embedder = RecordingRepository(), CountingEmbedder()
    service = ReplayService(repository, embedder)
    queries = [RetrievalQuery(task="t", observation=f"o{i}", action="a") for i in range(3)]
    filters = RetrievalFilters(source="real", exclude_trajectory_ids=["x"])

    results = service.retrieve(queries, 4, filters, team=TEAM)

    assert results == [[], [], []]
    assert len(embedder.batches) == 1 and len(embedder.batches[0]) == 3
    ((team, vectors, k, passed),) = repository.calls
    assert team == TEAM and vectors.shape == (3, 32) and k == 4 and passed == filters


def test_ingest_idempotency_keys_are_per_team(make_trajectory):
    repository = FakeRepository()
    service = ReplayService(repository, CountingEmbedder())
    first = service.ingest([make_trajectory()], team=TEAM)

    other = service.ingest([make_trajectory()], team="lab-b")

    assert (other.inserted, other.duplicates) == (1, 0)
    assert other.trajectory_ids == first.trajectory_ids
    assert sorted(repository.rows) == [
        ("lab-a", first.trajectory_ids[0]),
        ("lab-b", first.trajectory_ids[0]),
    ]


@pytest.mark.parametrize(
    ("stored", "adding", "quota", "refused"),
    [(0, 3, 3, False), (2, 2, 3, True), (5, 0, 3, False), (9, 1, None, False), (3, 1, 3, True)],
)
def test_check_trajectory_quota(stored, adding, quota, refused):
    if refused:
        with pytest.raises(TrajectoryQuotaExceededError) as info:
            check_trajectory_quota("lab-a", stored, adding, quota, retry_after_s=30)
        assert info.value.status_code == 429 and info.value.retry_after_s == 30
        assert f"quota of {quota}" in info.value.message
    else:
        check_trajectory_quota("lab-a", stored, adding, quota, retry_after_s=30)


def test_ingest_over_team_quota_raises_before_embedding_and_counts_only_new(make_trajectory):
    repository, embedder = FakeRepository(), CountingEmbedder()
    service = ReplayService(repository, embedder, max_trajectories_per_team=2)
    service.ingest([make_trajectory(), make_trajectory(actions=("look",))], team=TEAM)
    batches = len(embedder.batches)

    with pytest.raises(TrajectoryQuotaExceededError):
        service.ingest([make_trajectory(actions=("wait",))], team=TEAM)
    again = service.ingest([make_trajectory()], team=TEAM)  # a duplicate is not a new row
    other_team = service.ingest([make_trajectory(actions=("wait",))], team="lab-b")

    assert len(embedder.batches) == batches + 1  # only lab-b's new trajectory was embedded
    assert (again.inserted, again.duplicates) == (0, 1)
    assert other_team.inserted == 1


def test_ingest_quota_reached_by_a_concurrent_writer_is_a_429(make_trajectory):
    repository = FakeRepository(concurrent_rows=2)
    service = ReplayService(
        repository, CountingEmbedder(), max_trajectories_per_team=2, quota_retry_after_s=7
    )

    with pytest.raises(TrajectoryQuotaExceededError) as info:
        service.ingest([make_trajectory()], team=TEAM)

    assert info.value.stored == 2 and info.value.retry_after_s == 7
    assert repository.count_trajectories(TEAM) == 2  # the concurrent rows only
