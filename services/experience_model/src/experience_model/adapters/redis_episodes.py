"""Episodes in Redis: any replica serves any episode, and episodes survive a service restart.

Implements :class:`~experience_model.domain.episodes.EpisodeStore`. Episodes are addressed by
``(team, id)``; team names never contain ``:`` (``dreamgym.auth.keys.TEAM_NAME_PATTERN``), so
``{team}:{id}`` is unambiguous. Layout under ``prefix``:

- ``{prefix}:episode:{team}:{id}`` — hash ``doc`` (the episode as JSON, see
  :class:`EpisodeDocument`), ``rev`` (committed saves) and ``done`` (``0``/``1``). Its Redis
  expiry *is* the idle TTL: ``ttl_s`` while running, ``finished_ttl_s`` once finished, pushed back
  on every read and write.
- ``{prefix}:live`` — sorted set of ``{team}:{id}`` scored by the episode's expiry time (server
  clock, ms). It counts live episodes for the capacity bound and the live-episode metric; entries
  whose score has passed are episodes Redis already expired, and are dropped by :meth:`reap` (and
  by a reset that finds the store full).
- ``{prefix}:live:{team}`` — the same for one team (members: episode ids), for the per-team
  quota ``max_episodes_per_team``. Every script that writes ``{prefix}:live`` writes it too, with
  the same score, so the quota holds across replicas.
- ``{prefix}:lease:{team}:{id}`` — the step lease (a random token, ``SET NX PX``).

Every operation that writes is one Lua script (atomic in Redis), timed by the server clock, so
replicas with skewed clocks agree. :meth:`RedisEpisodeStore.save` is a compare-and-set on the
revision: a step computed from a stale read is refused with 409 and nothing is written. The whole
episode is one JSON document, so a step is committed all-or-nothing (for the step limits served
here, at most a few hundred transitions, rewriting it is cheaper than a round trip more).

Episodes are serialized through the pydantic wire models of :mod:`dreamgym.types`, never pickle.
A Redis error surfaces as :class:`~dreamgym.errors.BackendUnavailableError` (503), not a 500.
The keys of one store share no hash tag, and the reaping script derives team index keys from
the members it drops, so the store needs a single Redis (or a primary with replicas), not Redis
Cluster. Upgrading from the layout without teams (``{prefix}:episode:{id}``) forgets the
episodes live at that moment (they are at most ``ttl_s`` old); their index entries are reaped.
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

from dreamgym.auth.keys import DEFAULT_TEAM
from dreamgym.errors import BackendUnavailableError, EpisodeNotFoundError
from dreamgym.experience_types import EpisodeOptions
from dreamgym.types import AbstractState, Task, Transition, WireModel
from experience_model.domain.episodes import (
    Episode,
    capacity_error,
    changed_error,
    exists_error,
    in_progress_error,
    quota_error,
)

__all__ = ["EpisodeDocument", "RedisEpisodeStore", "from_document", "to_document"]

logger = logging.getLogger(__name__)


class EpisodeDocument(WireModel):
    """Stored form of an :class:`Episode` (JSON; ``revision`` is kept beside it in the hash).

    ``team`` is absent from documents written before episodes had teams (read as ``default``).
    """

    format: Literal[1] = 1
    episode_id: str = Field(min_length=1)
    team: str = Field(default=DEFAULT_TEAM, min_length=1)
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
        team=episode.team,
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
        team=doc.team,
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

# Drops index entries of expired episodes from ``live`` and from their team's index; returns
# how many. Needs ``live`` (the global index key) and ``team_prefix`` (``{prefix}:live:``).
_DROP_EXPIRED = """
local function drop_expired(live, team_prefix)
  local dead = redis.call('ZRANGEBYSCORE', live, '-inf', now)
  for _, member in ipairs(dead) do
    local sep = string.find(member, ':', 1, true)
    if sep then
      redis.call('ZREM', team_prefix .. string.sub(member, 1, sep - 1), string.sub(member, sep + 1))
    end
  end
  redis.call('ZREMRANGEBYSCORE', live, '-inf', now)
  return #dead
end
"""

# KEYS: episode, live, team live. ARGV: member, id, doc, done, ttl_ms, max_episodes,
# max_per_team (0: no limit), team index prefix.
# Returns {0} created, {1} id in use, {2, live} full, {3, team_live} team quota used up.
_CREATE = (
    _NOW
    + _DROP_EXPIRED
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {1} end
local quota = tonumber(ARGV[7])
if quota > 0 then
  local mine = redis.call('ZCARD', KEYS[3])
  if mine >= quota then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    mine = redis.call('ZCARD', KEYS[3])
    if mine >= quota then return {3, mine} end
  end
end
local live = redis.call('ZCARD', KEYS[2])
if live >= tonumber(ARGV[6]) then
  drop_expired(KEYS[2], ARGV[8])
  live = redis.call('ZCARD', KEYS[2])
  if live >= tonumber(ARGV[6]) then return {2, live} end
end
local deadline = now + tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'doc', ARGV[3], 'rev', 0, 'done', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], deadline)
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
redis.call('ZADD', KEYS[3], deadline, ARGV[2])
return {0}
"""
)

# KEYS: episode, live, team live. ARGV: member, id, ttl_ms, finished_ttl_ms.
# Returns {doc, rev} or nil.
_GET = (
    _NOW
    + """
local v = redis.call('HMGET', KEYS[1], 'doc', 'rev', 'done')
if not v[1] then return false end
local ttl = tonumber(ARGV[3])
if v[3] == '1' then ttl = tonumber(ARGV[4]) end
redis.call('PEXPIREAT', KEYS[1], now + ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[2])
return {v[1], v[2]}
"""
)

# KEYS: episode, live, team live. ARGV: member, id, doc, expected_rev, done, ttl_ms.
# Returns the new revision, -1 when the episode is gone, -2 when the revision moved on.
_SAVE = (
    _NOW
    + """
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return -1 end
if tonumber(rev) ~= tonumber(ARGV[4]) then return -2 end
local deadline = now + tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'doc', ARGV[3], 'rev', tonumber(rev) + 1, 'done', ARGV[5])
redis.call('PEXPIREAT', KEYS[1], deadline)
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
redis.call('ZADD', KEYS[3], deadline, ARGV[2])
return tonumber(rev) + 1
"""
)

# KEYS: lease. ARGV: token. Deletes the lease only if the token still holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: live. ARGV: team index prefix. Drops index entries of expired episodes; how many.
_REAP = _NOW + _DROP_EXPIRED + "return drop_expired(KEYS[1], ARGV[1])"

# KEYS: live or team live. Live episodes: index entries whose expiry is still ahead.
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
        max_episodes_per_team: live episodes one team may have, all replicas together (``None``:
            no limit); one more is a 429 ``quota_exceeded``.
        quota_retry_after_s: the ``Retry-After`` of that 429, seconds.
    """

    #: every call is a network round trip: the service makes them from worker threads
    blocking_io = True

    def __init__(
        self,
        url: str | None = None,
        *,
        ttl_s: float = 600.0,
        max_episodes: int = 10_000,
        finished_ttl_s: float = 60.0,
        prefix: str = "dreamgym:experience_model",
        client: redis.Redis | None = None,
        max_episodes_per_team: int | None = None,
        quota_retry_after_s: float = 30.0,
    ) -> None:
        if client is None and not url:
            raise ValueError("RedisEpisodeStore needs a url or a client")
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.finished_ttl_s = finished_ttl_s
        self.max_episodes_per_team = max_episodes_per_team
        self.quota_retry_after_s = quota_retry_after_s
        self.prefix = prefix
        self._owns_client = client is None
        self._redis = client or redis.Redis.from_url(
            url,  # type: ignore[arg-type]
            socket_connect_timeout=5.0,
            socket_timeout=10.0,
            health_check_interval=30,
        )
        self._live_key = f"{prefix}:live"
        self._team_live_prefix = f"{prefix}:live:"
        self._create = self._redis.register_script(_CREATE)
        self._get = self._redis.register_script(_GET)
        self._save = self._redis.register_script(_SAVE)
        self._release = self._redis.register_script(_RELEASE)
        self._reap = self._redis.register_script(_REAP)
        self._count = self._redis.register_script(_COUNT)

    def _key(self, team: str, episode_id: str) -> str:
        return f"{self.prefix}:episode:{team}:{episode_id}"

    def _lease_key(self, team: str, episode_id: str) -> str:
        return f"{self.prefix}:lease:{team}:{episode_id}"

    def _index_keys(self, team: str, episode_id: str) -> list[str]:
        """Episode key, global index, team index (the KEYS of the scripts)."""
        return [self._key(team, episode_id), self._live_key, self._team_live_prefix + team]

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
        team, episode_id = episode.team, episode.episode_id
        with self._redis_errors():
            result = self._create(
                keys=self._index_keys(team, episode_id),
                args=[
                    f"{team}:{episode_id}",
                    episode_id,
                    to_document(episode),
                    int(episode.done),
                    self._ttl_ms(episode),
                    self.max_episodes,
                    self.max_episodes_per_team or 0,
                    self._team_live_prefix,
                ],
            )
        if result[0] == 1:
            raise exists_error(episode_id)
        if result[0] == 2:
            raise capacity_error(int(result[1]), self.max_episodes)
        if result[0] == 3:
            limit = self.max_episodes_per_team or 0
            raise quota_error(team, int(result[1]), limit, self.quota_retry_after_s)
        episode.revision = 0
        episode.last_access = time.monotonic()

    def get(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> Episode:
        with self._redis_errors():
            found = self._get(
                keys=self._index_keys(team, episode_id),
                args=[
                    f"{team}:{episode_id}",
                    episode_id,
                    _ms(self.ttl_s),
                    _ms(self.finished_ttl_s),
                ],
            )
        if not found:
            raise EpisodeNotFoundError(episode_id)
        doc, revision = found
        return from_document(doc, int(revision))

    def save(self, episode: Episode) -> None:
        team, episode_id = episode.team, episode.episode_id
        with self._redis_errors():
            revision = int(
                self._save(
                    keys=self._index_keys(team, episode_id),
                    args=[
                        f"{team}:{episode_id}",
                        episode_id,
                        to_document(episode),
                        episode.revision,
                        int(episode.done),
                        self._ttl_ms(episode),
                    ],
                )
            )
        if revision == -1:
            raise EpisodeNotFoundError(episode_id)
        if revision == -2:
            raise changed_error(episode_id)
        episode.revision = revision
        episode.last_access = time.monotonic()

    def delete(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> bool:
        with self._redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._key(team, episode_id))
            pipe.zrem(self._live_key, f"{team}:{episode_id}")
            pipe.zrem(self._team_live_prefix + team, episode_id)
            deleted, _, _ = pipe.execute()
        return bool(deleted)

    def claim(self, episode_id: str, ttl_s: float, *, team: str = DEFAULT_TEAM) -> str:
        token = uuid.uuid4().hex
        with self._redis_errors():
            taken = self._redis.set(
                self._lease_key(team, episode_id), token, nx=True, px=_ms(ttl_s)
            )
        if not taken:
            raise in_progress_error(episode_id)
        return token

    def release(self, episode_id: str, token: str, *, team: str = DEFAULT_TEAM) -> None:
        """Best effort: when Redis is away the lease simply expires after its TTL."""
        try:
            self._release(keys=[self._lease_key(team, episode_id)], args=[token])
        except redis.RedisError as exc:
            logger.warning(
                "could not release step lease",
                extra={"episode_id": episode_id, "team": team, "error": str(exc)},
            )

    def reap(self) -> int:
        with self._redis_errors():
            return int(self._reap(keys=[self._live_key], args=[self._team_live_prefix]))

    def live_count(self, team: str | None = None) -> int:
        key = self._live_key if team is None else self._team_live_prefix + team
        with self._redis_errors():
            return int(self._count(keys=[key]))

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
