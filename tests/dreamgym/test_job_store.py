"""RedisJobStore on a real Redis: records, state compare-and-set, metric curves, flags, locks."""

from __future__ import annotations

import time

import pytest

from dreamgym.job_store import RedisJobStore
from dreamgym.jobs import JobRecord

pytestmark = pytest.mark.integration


@pytest.fixture()
def store(redis_url):
    s = RedisJobStore.from_url(redis_url, "svc")
    yield s
    s.close()


def record(job_id: str, created_at: str, state: str = "queued") -> JobRecord:
    return JobRecord(job_id=job_id, kind="k", state=state, created_at=created_at)


def test_records_are_listed_newest_first_and_filtered_by_state(store):
    store.create(record("job-a", "2026-01-01T00:00:00+00:00"))
    store.create(record("job-b", "2026-01-02T00:00:00+00:00", state="running"))
    store.create(record("job-c", "2026-01-03T00:00:00+00:00"))

    assert [r.job_id for r in store.list()] == ["job-c", "job-b", "job-a"]
    assert [r.job_id for r in store.list("queued")] == ["job-c", "job-a"]
    assert store.get("job-b").state == "running"
    assert store.get("job-missing") is None


def test_namespaces_do_not_see_each_other(store, redis_url):
    other = RedisJobStore.from_url(redis_url, "other")
    store.create(record("job-a", "2026-01-01T00:00:00+00:00"))

    assert other.list() == []
    assert other.get("job-a") is None
    other.close()


def test_transition_applies_only_from_the_given_states(store):
    store.create(record("job-a", "2026-01-01T00:00:00+00:00"))

    started = store.transition("job-a", {"queued"}, state="running", progress=0.5)
    refused = store.transition("job-a", {"queued"}, state="cancelled")

    assert started is not None and (started.state, started.progress) == ("running", 0.5)
    assert refused is None
    assert store.get("job-a").state == "running"
    assert store.transition("job-missing", None, state="failed") is None


def test_metrics_of_a_resumed_job_keep_each_step_once(store):
    for step in (1, 2, 3, 4):
        store.append_metrics("job-a", {"step": step, "loss": 10 - step, "attempt": 1})
    store.mark_attempt("job-a", 2)  # resumed from the checkpoint after step 2
    for step in (3, 4, 5):
        store.append_metrics("job-a", {"step": step, "loss": 10 - step, "attempt": 2})

    curve = store.metrics("job-a")

    assert [(r["step"], r["attempt"]) for r in curve] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]


def test_metrics_of_a_first_attempt_keep_every_row(store):
    store.mark_attempt("job-a", 2)  # nothing logged before: nothing to drop
    for step in (0, 0, 1):
        store.append_metrics("job-a", {"step": step})

    assert [r["step"] for r in store.metrics("job-a")] == [0, 0, 1]


def test_cancel_flag_is_set_once(store):
    assert not store.cancel_requested("job-a")

    store.request_cancel("job-a")
    store.request_cancel("job-a")

    assert store.cancel_requested("job-a")


def test_run_lock_is_exclusive_until_it_expires(store):
    first = store.lock("job-a", ttl_s=0.5)
    second = store.lock("job-a", ttl_s=0.5)

    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)
    time.sleep(0.7)  # the holder died without releasing: the lock frees itself
    assert second.acquire(blocking=False)
    second.release()


def test_non_redis_url_is_refused():
    with pytest.raises(ValueError, match="redis://"):
        RedisJobStore.from_url("amqp://guest@localhost//", "svc")


def test_finished_jobs_expire_after_the_retention_and_leave_the_index(redis_url):
    store = RedisJobStore.from_url(redis_url, "retention", finished_ttl_s=0.5)
    try:
        store.create(record("job-done", "2026-01-01T00:00:00+00:00"))
        store.create(record("job-live", "2026-01-02T00:00:00+00:00"))
        store.append_metrics("job-done", {"step": 0, "loss": 1.0})
        store.request_cancel("job-done")
        store.transition("job-done", None, state="running")
        running_ttl = store.redis.pttl(store._key("job-done"))
        store.transition("job-done", None, state="cancelled")
        store.transition("job-live", None, state="running")

        assert running_ttl == -1  # an active job never expires
        assert 0 < store.redis.pttl(store._key("job-done", ":metrics")) <= 500
        time.sleep(0.8)

        assert store.get("job-done") is None and store.metrics("job-done") == []
        assert not store.cancel_requested("job-done")
        assert [r.job_id for r in store.list()] == ["job-live"]
        assert store.redis.zrange(f"{store.prefix}:index", 0, -1) == [b"job-live"]
    finally:
        store.close()


def test_without_retention_finished_jobs_are_kept(store):
    store.create(record("job-a", "2026-01-01T00:00:00+00:00"))
    store.transition("job-a", None, state="succeeded")

    assert store.redis.pttl(store._key("job-a")) == -1
