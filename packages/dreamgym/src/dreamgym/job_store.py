"""Job records in Redis, readable by every service replica and written by workers anywhere.

Keys (``<p>`` = ``dreamgym:jobs:<namespace>``, the namespace being the owning service):

- ``<p>:index`` — sorted set of job ids scored by creation time (listing, newest first);
- ``<p>:job:<id>`` — the :class:`~dreamgym.jobs.JobRecord` as JSON;
- ``<p>:job:<id>:metrics`` — list of metric rows (JSON), oldest first;
- ``<p>:job:<id>:cancel`` — set once cancellation was requested (value: unix time);
- ``<p>:job:<id>:lock`` — the run lock (a token with a TTL the running worker keeps extending).

Every change of a record is a compare-and-set (``WATCH``/``MULTI``) on its state, so a worker
finishing a job and a service cancelling it cannot overwrite each other. A job's keys expire
``finished_ttl_s`` after it reached a final state (retention; the index forgets expired ids the
next time it is listed), so a long-lived deployment does not grow its Redis without bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import redis
from redis.lock import Lock

from dreamgym.jobs import JobRecord, JobState

__all__ = ["ACTIVE_STATES", "RedisJobStore"]

ACTIVE_STATES: frozenset[JobState] = frozenset({"queued", "running"})
_ATTEMPT = "__attempt__"  # marker row: a new attempt of the job starts here


class RedisJobStore:
    """Records, metrics, cancellation flags and run locks of one service's jobs.

    Args:
        client: a Redis client (``decode_responses`` off or on; both work).
        namespace: the owning service (``"agent_trainer"``); separates records in one Redis.
        finished_ttl_s: seconds a finished job's record, metrics and flags are kept after it
            reached a final state (``None``: forever).
    """

    def __init__(
        self, client: redis.Redis, namespace: str, *, finished_ttl_s: float | None = None
    ) -> None:
        self.redis = client
        self.prefix = f"dreamgym:jobs:{namespace}"
        self.finished_ttl_s = finished_ttl_s

    @classmethod
    def from_url(
        cls,
        url: str,
        namespace: str,
        *,
        timeout_s: float = 10.0,
        finished_ttl_s: float | None = None,
    ) -> RedisJobStore:
        """A store on ``redis://`` / ``rediss://`` ``url``.

        Raises:
            ValueError: not a Redis URL (the job state needs Redis, whatever the broker).
        """
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"job state needs a redis:// URL, got {url.split('://')[0]}://…")
        client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        return cls(client, namespace, finished_ttl_s=finished_ttl_s)

    def close(self) -> None:
        """Close the connection pool."""
        self.redis.close()

    # -- keys ---------------------------------------------------------------------------------
    def _key(self, job_id: str, suffix: str = "") -> str:
        return f"{self.prefix}:job:{job_id}{suffix}"

    # -- records --------------------------------------------------------------------------------
    def create(self, record: JobRecord) -> None:
        """Store a new record and index it."""
        created = _timestamp(record.created_at)
        pipe = self.redis.pipeline()
        pipe.set(self._key(record.job_id), record.model_dump_json())
        pipe.zadd(f"{self.prefix}:index", {record.job_id: created})
        pipe.execute()

    def get(self, job_id: str) -> JobRecord | None:
        """The record, or ``None`` for an unknown id."""
        raw = self.redis.get(self._key(job_id))
        return None if raw is None else JobRecord.model_validate_json(raw)

    def list(self, state: JobState | None = None, *, chunk: int = 500) -> list[JobRecord]:
        """All records (optionally in one state), newest first."""
        ids = [_text(i) for i in self.redis.zrevrange(f"{self.prefix}:index", 0, -1)]
        records: list[JobRecord] = []
        expired: list[str] = []
        for start in range(0, len(ids), chunk):
            batch = ids[start : start + chunk]
            raws = self.redis.mget([self._key(i) for i in batch])
            for job_id, raw in zip(batch, raws, strict=True):
                if raw is None:
                    expired.append(job_id)
                else:
                    records.append(JobRecord.model_validate_json(raw))
        if expired:  # retention removed them: the index forgets them too
            self.redis.zrem(f"{self.prefix}:index", *expired)
        return [r for r in records if state is None or r.state == state]

    def transition(
        self, job_id: str, from_states: Collection[str] | None, **fields: Any
    ) -> JobRecord | None:
        """Atomically update the record if its state is in ``from_states`` (``None``: any).

        Returns:
            The updated record, or ``None`` when the job is unknown or in another state.
        """
        key = self._key(job_id)
        with self.redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    if raw is None:
                        return None
                    record = JobRecord.model_validate_json(raw)
                    if from_states is not None and record.state not in from_states:
                        return None
                    record = record.model_copy(update=fields)
                    pipe.multi()
                    pipe.set(key, record.model_dump_json())
                    if self.finished_ttl_s is not None and record.state not in ACTIVE_STATES:
                        ttl_ms = max(1, int(self.finished_ttl_s * 1000))
                        for suffix in ("", ":metrics", ":cancel"):
                            pipe.pexpire(self._key(job_id, suffix), ttl_ms)
                    pipe.execute()
                    return record
                except redis.WatchError:  # someone else changed it first: read again
                    continue

    # -- metrics --------------------------------------------------------------------------------
    def append_metrics(self, job_id: str, row: Mapping[str, Any]) -> None:
        """Append one metric row."""
        self.redis.rpush(self._key(job_id, ":metrics"), json.dumps(dict(row)))

    def mark_attempt(self, job_id: str, attempt: int) -> None:
        """Note in the metrics that attempt ``attempt`` starts (see :meth:`metrics`)."""
        self.redis.rpush(self._key(job_id, ":metrics"), json.dumps({_ATTEMPT: attempt}))

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """The job's metric curve, oldest first.

        A job that resumed from a checkpoint logs some steps again: rows of earlier attempts at
        or after the first step the resumed attempt logged are dropped, so each step appears once.
        """
        curve: list[dict[str, Any]] = []
        resumed = False
        for raw in self.redis.lrange(self._key(job_id, ":metrics"), 0, -1):
            row = json.loads(raw)
            if _ATTEMPT in row:
                resumed = len(curve) > 0
                continue
            if resumed and isinstance(row.get("step"), int | float):
                curve = [r for r in curve if not r.get("step", -1) >= row["step"]]
            resumed = False
            curve.append(row)
        return curve

    # -- cancellation -----------------------------------------------------------------------------
    def request_cancel(self, job_id: str) -> None:
        """Set the job's cancellation flag (idempotent; keeps the first request's time)."""
        self.redis.set(self._key(job_id, ":cancel"), str(time.time()), nx=True)

    def cancel_requested(self, job_id: str) -> bool:
        """Whether cancellation was requested."""
        return bool(self.redis.exists(self._key(job_id, ":cancel")))

    # -- run lock ---------------------------------------------------------------------------------
    def lock(self, job_id: str, ttl_s: float) -> Lock:
        """The job's run lock: held by the one process running the body, expires after ``ttl_s``
        unless extended (``reacquire``), so a dead worker's lock frees itself.

        The token is not thread-local: a heartbeat thread extends the lock its job thread took.
        """
        return self.redis.lock(self._key(job_id, ":lock"), timeout=ttl_s, thread_local=False)

    def ping(self) -> bool:
        """Whether Redis answers."""
        return bool(self.redis.ping())


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _timestamp(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()
