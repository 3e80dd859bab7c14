"""Tests of the in-memory episode store (experience_model.domain.episodes): TTL and capacity."""

from __future__ import annotations

import time

import pytest

from dreamgym.errors import CapacityError, EpisodeFinishedError, EpisodeNotFoundError
from experience_model.domain import episodes as episodes_module
from experience_model.domain.episodes import Episode, InMemoryEpisodeStore, new_episode_id

from ..factories import make_task


class FakeClock:
    """Stands in for the ``time`` module of the episodes module; ``advance`` moves it."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(episodes_module, "time", fake)
    return fake


def make_episode(clock: FakeClock, *, terminated: bool = False, truncated: bool = False) -> Episode:
    task = make_task()
    return Episode(
        episode_id=new_episode_id(),
        task=task,
        state=task.initial_state(),
        max_steps=5,
        terminated=terminated,
        truncated=truncated,
        last_access=clock.monotonic(),
    )


def test_new_episode_id_is_unique_and_prefixed():
    ids = {new_episode_id() for _ in range(100)}

    assert len(ids) == 100
    assert all(i.startswith("ep-") for i in ids)


def test_store_get_within_ttl_returns_episode(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0)
    ep = make_episode(clock)
    store.create(ep)
    clock.advance(9.0)

    assert store.get(ep.episode_id) is ep


def test_store_get_after_ttl_raises_not_found_and_forgets(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0)
    ep = make_episode(clock)
    store.create(ep)
    clock.advance(10.5)

    with pytest.raises(EpisodeNotFoundError) as info:
        store.get(ep.episode_id)

    assert info.value.param == "episode_id"
    assert ep.episode_id in info.value.message
    assert len(store) == 0


def test_store_get_refreshes_last_access(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0)
    ep = make_episode(clock)
    store.create(ep)

    for _ in range(3):  # 21 s in total, never more than 7 s idle
        clock.advance(7.0)
        store.get(ep.episode_id)

    assert ep.last_access == clock.now
    assert store.reap() == 0


def test_store_save_refreshes_last_access(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0)
    ep = make_episode(clock)
    store.create(ep)
    clock.advance(8.0)

    store.save(ep)
    clock.advance(8.0)

    assert store.get(ep.episode_id) is ep


def test_store_finished_episode_expires_after_shorter_ttl(clock):
    store = InMemoryEpisodeStore(ttl_s=100.0, finished_ttl_s=5.0)
    running, terminated, truncated = (
        make_episode(clock),
        make_episode(clock, terminated=True),
        make_episode(clock, truncated=True),
    )
    for ep in (running, terminated, truncated):
        store.create(ep)
    clock.advance(6.0)

    assert store.get(running.episode_id) is running
    for ep in (terminated, truncated):
        with pytest.raises(EpisodeNotFoundError):
            store.get(ep.episode_id)


def test_store_reap_drops_only_expired_and_counts_them(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0)
    old = [make_episode(clock) for _ in range(2)]
    for ep in old:
        store.create(ep)
    clock.advance(6.0)
    fresh = make_episode(clock)
    store.create(fresh)
    clock.advance(6.0)

    dropped = store.reap()

    assert dropped == 2
    assert len(store) == 1
    assert store.get(fresh.episode_id) is fresh
    assert store.reap() == 0


def test_store_create_beyond_capacity_raises_capacity_error(clock):
    store = InMemoryEpisodeStore(max_episodes=2)
    store.create(make_episode(clock))
    store.create(make_episode(clock))

    with pytest.raises(CapacityError) as info:
        store.create(make_episode(clock))

    assert info.value.status_code == 429
    assert info.value.retry_after_s is not None and info.value.retry_after_s > 0
    assert "2" in info.value.message
    assert len(store) == 2


def test_store_create_at_capacity_reaps_expired_first(clock):
    store = InMemoryEpisodeStore(ttl_s=10.0, max_episodes=2)
    stale = make_episode(clock)
    store.create(stale)
    clock.advance(5.0)
    store.create(make_episode(clock))
    clock.advance(6.0)  # only `stale` has been idle for more than 10 s
    newcomer = make_episode(clock)

    store.create(newcomer)

    assert len(store) == 2
    assert store.get(newcomer.episode_id) is newcomer
    with pytest.raises(EpisodeNotFoundError):
        store.get(stale.episode_id)


def test_store_delete_returns_whether_it_existed(clock):
    store = InMemoryEpisodeStore()
    ep = make_episode(clock)
    store.create(ep)

    assert store.delete(ep.episode_id) is True
    assert store.delete(ep.episode_id) is False
    with pytest.raises(EpisodeNotFoundError):
        store.get(ep.episode_id)


def test_store_real_clock_small_ttl_expires():
    store = InMemoryEpisodeStore(ttl_s=0.05)
    task = make_task()
    ep = Episode(episode_id=new_episode_id(), task=task, state=task.initial_state(), max_steps=3)
    store.create(ep)

    time.sleep(0.1)

    with pytest.raises(EpisodeNotFoundError):
        store.get(ep.episode_id)


@pytest.mark.parametrize(
    ("terminated", "truncated", "reason"), [(True, False, "terminated"), (False, True, "truncated")]
)
def test_episode_ensure_running_finished_raises_with_reason(clock, terminated, truncated, reason):
    ep = make_episode(clock, terminated=terminated, truncated=truncated)

    with pytest.raises(EpisodeFinishedError) as info:
        ep.ensure_running()

    assert info.value.status_code == 409
    assert reason in info.value.message


def test_episode_ensure_running_running_episode_passes(clock):
    ep = make_episode(clock)

    ep.ensure_running()

    assert not ep.done
