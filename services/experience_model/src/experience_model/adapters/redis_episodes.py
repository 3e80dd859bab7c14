"""Episodes in Redis: any replica serves any episode, and episodes survive a service restart.

Implements :class:`~experience_model.domain.episodes.EpisodeStore`. Layout under ``prefix``:

- ``{prefix}:episode:{id}`` — hash ``doc`` (the episode as JSON, see :class:`EpisodeDocument`),
  ``rev`` (committed saves) and ``done`` (``0``/``1``). Its Redis expiry *is* the idle TTL:
  ``ttl_s`` while running, ``finished_ttl_s`` once finished, pushed back on every read and write.
- ``{prefix}:live`` — sorted set of episode ids scored by their expiry time (server clock, ms).
  It counts live episodes for the capacity bound and the live-episode metric; entries whose score
  has passed are episodes Redis already expired, and are dropped by :meth:`reap` (and by a reset
  that finds the store full).
- ``{prefix}:lease:{id}`` — the step lease (a random token, ``SET NX PX``).

Every operation that writes is one Lua script (atomic in Redis), timed by the server clock, so
replicas with skewed clocks agree. :meth:`RedisEpisodeStore.save` is a compare-and-set on the
revision: a step computed from a stale read is refused with 409 and nothing is written. The whole
episode is one JSON document, so a step is committed all-or-nothing (for the step limits served
here, at most a few hundred transitions, rewriting it is cheaper than a round trip more).

Episodes are serialized through the pydantic wire models of :mod:`dreamgym.types`, never pickle.
A Redis error surfaces as :class:`~dreamgym.errors.BackendUnavailableError` (503), not a 500.
The keys of one store share no hash tag, so the store needs a single Redis (or a primary with
replicas), not Redis Cluster.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Literal

import redis
from pydantic import Field

from dreamgym.errors import BackendUnavailableError, EpisodeNotFoundError
from dreamgym.experience_types import EpisodeOptions
from dreamgym.types import AbstractState, Task, Transition, WireModel
from experience_model.domain.episodes import (
    Episode,
    capacity_error,
    changed_error,
    exists_error,
    in_progress_error,
)

__all__ = ["EpisodeDocument", "RedisEpisodeStore", "from_document", "to_document"]

logger = logging.getLogger(__name__)


class EpisodeDocument(WireModel):
    """Stored form of an :class:`Episode` (JSON; ``revision`` is kept beside it in the hash)."""

    format: Literal[1] = 1
    episode_id: str = Field(min_length=1)
    task: Task
    state: AbstractState
    max_steps: int = Field(ge=1)
    seed: int | None = None
    transitions: list[Transition] = Field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    created_at: float
    options: EpisodeOptions | None = None


def to_document(episode: Episode) -> str:
    """The episode as a JSON document (its ``revision`` and ``last_access`` excluded)."""
    return EpisodeDocument(
        episode_id=episode.episode_id,
        task=episode.task,
        state=episode.state,
        max_steps=episode.max_steps,
        seed=episode.seed,
        transitions=episode.transitions,
        terminated=episode.terminated,
        truncated=episode.truncated,
        created_at=episode.created_at,
        options=episode.options,
    ).model_dump_json()


def from_document(raw: str | bytes, revision: int) -> Episode:
    """Rebuild an :class:`Episode` at ``revision`` from :func:`to_document` output.

    Raises:
        pydantic.ValidationError: ``raw`` is not a valid episode document.
    """
    doc = EpisodeDocument.model_validate_json(raw)
    return Episode(
        episode_id=doc.episode_id,
        task=doc.task,
        state=doc.state,
        max_steps=doc.max_steps,
        seed=doc.seed,
        transitions=list(doc.transitions),
        terminated=doc.terminated,
        truncated=doc.truncated,
        created_at=doc.created_at,
        revision=revision,
        options=doc.options,
    )


# Each script reads the server clock once; its writes use that instant for the key expiry
# (PEXPIREAT) and the index score, so both agree to the millisecond.
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: episode, live. ARGV: id, doc, done, ttl_ms, max_episodes.
# Returns {0} created, {1} id in use, {2, live} full.
_CREATE = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {1} end
local live = redis.call('ZCARD', KEYS[2])
if live >= tonumber(ARGV[5]) then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  live = redis.call('ZCARD', KEYS[2])
  if live >= tonumber(ARGV[5]) then return {2, live} end
end
local deadline = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'rev', 0, 'done', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], deadline)
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
return {0}
"""
)

# KEYS: episode, live. ARGV: id, ttl_ms, finished_ttl_ms. Returns {doc, rev} or nil.
_GET = (
    _NOW
    + """
local v = redis.call('HMGET', KEYS[1], 'doc', 'rev', 'done')
if not v[1] then return false end
local ttl = tonumber(ARGV[2])
if v[3] == '1' then ttl = tonumber(ARGV[3]) end
redis.call('PEXPIREAT', KEYS[1], now + ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
return {v[1], v[2]}
"""
)

# KEYS: episode, live. ARGV: id, doc, expected_rev, done, ttl_ms.
# Returns the new revision, -1 when the episode is gone, -2 when the revision moved on.
_SAVE = (
    _NOW
    + """
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return -1 end
if tonumber(rev) ~= tonumber(ARGV[3]) then return -2 end
local deadline = now + tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'rev', tonumber(rev) + 1, 'done', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], deadline)
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
return tonumber(rev) + 1
"""
)

# KEYS: lease. ARGV: token. Deletes the lease only if the token still holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: live. Drops index entries of expired episodes; returns how many.
_REAP = _NOW + "return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)"

# KEYS: live. Live episodes: index entries whose expiry is still ahead.
_COUNT = _NOW + "return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')"


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000.0))


class RedisEpisodeStore:
    """:class:`~experience_model.domain.episodes.EpisodeStore` in Redis, shared by replicas.

    Args:
        url: ``redis://host:port/db`` (``EXPERIENCE_MODEL_REDIS_URL``).
        ttl_s: a running episode idle for longer than this (seconds) expires.
        max_episodes: live episodes (all replicas together) before :meth:`create` raises 429.
        finished_ttl_s: finished episodes stay readable this long after their last access.
        prefix: key namespace; deployments sharing one Redis database need distinct prefixes.
        client: an existing client to use instead of ``url`` (not closed by :meth:`close`).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        ttl_s: float = 600.0,
        max_episodes: int = 10_000,
        finished_ttl_s: float = 60.0,
        prefix: str = "dreamgym:experience_model",
        client: redis.Redis | None = None,
    ) -> None:
        if client is None and not url:
            raise ValueError("RedisEpisodeStore needs a url or a client")
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.finished_ttl_s = finished_ttl_s
        self.prefix = prefix
        self._owns_client = client is None
        self._redis = client or redis.Redis.from_url(
            url,  # type: ignore[arg-type]
            socket_connect_timeout=5.0,
            socket_timeout=10.0,
            health_check_interval=30,
        )
        self._live_key = f"{prefix}:live"
        self._create = self._redis.register_script(_CREATE)
        self._get = self._redis.register_script(_GET)
        self._save = self._redis.register_script(_SAVE)
        self._release = self._redis.register_script(_RELEASE)
        self._reap = self._redis.register_script(_REAP)
        self._count = self._redis.register_script(_COUNT)

    def _key(self, episode_id: str) -> str:
        return f"{self.prefix}:episode:{episode_id}"

    def _lease_key(self, episode_id: str) -> str:
        return f"{self.prefix}:lease:{episode_id}"

    def _ttl_ms(self, episode: Episode) -> int:
        return _ms(self.finished_ttl_s if episode.done else self.ttl_s)

    @contextlib.contextmanager
    def _redis_errors(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise BackendUnavailableError(
                f"episode store (Redis) unavailable: {type(exc).__name__}: {exc}",
                retry_after_s=1.0,
            ) from exc

    def create(self, episode: Episode) -> None:
        with self._redis_errors():
            result = self._create(
                keys=[self._key(episode.episode_id), self._live_key],
                args=[
                    episode.episode_id,
                    to_document(episode),
                    int(episode.done),
                    self._ttl_ms(episode),
                    self.max_episodes,
                ],
            )
        if result[0] == 1:
            raise exists_error(episode.episode_id)
        if result[0] == 2:
            raise capacity_error(int(result[1]), self.max_episodes)
        episode.revision = 0
        episode.last_access = time.monotonic()

    def get(self, episode_id: str) -> Episode:
        with self._redis_errors():
            found = self._get(
                keys=[self._key(episode_id), self._live_key],
                args=[episode_id, _ms(self.ttl_s), _ms(self.finished_ttl_s)],
            )
        if not found:
            raise EpisodeNotFoundError(episode_id)
        doc, revision = found
        return from_document(doc, int(revision))

    def save(self, episode: Episode) -> None:
        with self._redis_errors():
            revision = int(
                self._save(
                    keys=[self._key(episode.episode_id), self._live_key],
                    args=[
                        episode.episode_id,
                        to_document(episode),
                        episode.revision,
                        int(episode.done),
                        self._ttl_ms(episode),
                    ],
                )
            )
        if revision == -1:
            raise EpisodeNotFoundError(episode.episode_id)
        if revision == -2:
            raise changed_error(episode.episode_id)
        episode.revision = revision
        episode.last_access = time.monotonic()

    def delete(self, episode_id: str) -> bool:
        with self._redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._key(episode_id))
            pipe.zrem(self._live_key, episode_id)
            deleted, _ = pipe.execute()
        return bool(deleted)

    def claim(self, episode_id: str, ttl_s: float) -> str:
        token = uuid.uuid4().hex
        with self._redis_errors():
            taken = self._redis.set(self._lease_key(episode_id), token, nx=True, px=_ms(ttl_s))
        if not taken:
            raise in_progress_error(episode_id)
        return token

    def release(self, episode_id: str, token: str) -> None:
        """Best effort: when Redis is away the lease simply expires after its TTL."""
        try:
            self._release(keys=[self._lease_key(episode_id)], args=[token])
        except redis.RedisError as exc:
            logger.warning(
                "could not release step lease", extra={"episode_id": episode_id, "error": str(exc)}
            )

    def reap(self) -> int:
        with self._redis_errors():
            return int(self._reap(keys=[self._live_key]))

    def live_count(self) -> int:
        with self._redis_errors():
            return int(self._count(keys=[self._live_key]))

    def ready(self) -> str | None:
        try:
            self._redis.ping()
        except redis.RedisError as exc:
            return f"episode store (Redis) unavailable: {type(exc).__name__}: {exc}"
        return None

    def close(self) -> None:
        if self._owns_client:
            self._redis.close()

    def __len__(self) -> int:
        return self.live_count()
