"""Imagined episodes and their store.

An :class:`Episode` is the server-side state of one imagined rollout: the task, the current
abstract state, the transitions so far, the step limit and the flags. Episodes are isolated per
``episode_id`` (a random UUID4, unguessable) and expire after an idle TTL, so a client that
vanishes cannot leak them (see ``shared/design/anchors.md``: OpenEnv PR #1000, ms-swift #9745).

Every episode belongs to a **team** (:attr:`Episode.team`) and ids are per team: a store addresses
an episode by ``(team, episode_id)``, so another team's episode is simply not there (404, exactly
like an unknown id) and two teams may use the same client-chosen id. A store may bound the live
episodes of each team (``max_episodes_per_team``: 429 ``quota_exceeded`` with ``Retry-After``).

:class:`InMemoryEpisodeStore` serves one process; the Redis store
(:mod:`experience_model.adapters.redis_episodes`: multi-replica, survives restarts) implements the
same :class:`EpisodeStore` protocol.

Concurrency contract (both stores): a step holds a short **lease** on its episode
(:meth:`EpisodeStore.claim`), so a second concurrent step is refused with 409 "in progress"; and
:meth:`EpisodeStore.save` is a compare-and-set on :attr:`Episode.revision`, so even when a lease
has lapsed two steps computed from the same revision never both commit (the later one gets 409).
A save writes the whole episode at once: readers see the episode before or after a step, never
half of it.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from dreamgym.auth.keys import DEFAULT_TEAM
from dreamgym.errors import (
    CapacityError,
    ConflictError,
    EpisodeFinishedError,
    EpisodeNotFoundError,
    QuotaExceededError,
)
from dreamgym.experience_types import EpisodeOptions
from dreamgym.types import AbstractState, Task, Transition

__all__ = [
    "Episode",
    "EpisodeStore",
    "InMemoryEpisodeStore",
    "capacity_error",
    "changed_error",
    "exists_error",
    "in_progress_error",
    "new_episode_id",
    "quota_error",
]


def new_episode_id() -> str:
    """A fresh unguessable episode id."""
    return f"ep-{uuid.uuid4().hex}"


def capacity_error(live: int, max_episodes: int) -> CapacityError:
    """429 for a reset beyond ``max_live_episodes`` (retry after 1 s)."""
    return CapacityError(
        f"{live} live episodes (max {max_episodes}); close finished episodes or retry later",
        retry_after_s=1.0,
    )


def quota_error(team: str, live: int, limit: int, retry_after_s: float) -> QuotaExceededError:
    """429 ``quota_exceeded`` for a reset beyond the team's ``max_episodes_per_team``."""
    return QuotaExceededError(
        f"team '{team}' has {live} live episodes (limit {limit}); close finished episodes "
        "or retry later",
        retry_after_s=retry_after_s,
    )


def exists_error(episode_id: str) -> ConflictError:
    """409 for a reset with an ``episode_id`` already in use."""
    return ConflictError(f"episode '{episode_id}' already exists", param="episode_id")


def in_progress_error(episode_id: str) -> ConflictError:
    """409 for a step while another step of the same episode holds its lease."""
    return ConflictError(
        f"a step of episode '{episode_id}' is already in progress", param="episode_id"
    )


def changed_error(episode_id: str) -> ConflictError:
    """409 for a commit whose episode was changed by a concurrent step since it was read."""
    return ConflictError(
        f"episode '{episode_id}' was changed by a concurrent step; read it again and retry",
        param="episode_id",
    )


@dataclass
class Episode:
    """Server-side state of one imagined episode.

    Attributes:
        episode_id: the id clients address the episode by (unique within its team).
        task: the task being played.
        state: the current abstract state s_t.
        transitions: the transitions so far (history for the prompt).
        max_steps: the episode is truncated after this many steps.
        seed: base sampling seed (step t samples with ``seed + t`` unless the step gives one).
        terminated: the experience model declared a terminal state.
        truncated: ``max_steps`` was reached.
        created_at: wall-clock creation time (Unix seconds).
        last_access: monotonic time of the last read or write (for the in-memory idle TTL).
        revision: number of saves committed so far; :meth:`EpisodeStore.save` only commits when
            the stored revision still equals this one (compare-and-set), then increments it.
        team: the team that reset the episode; only that team can read, step or close it.
        options: the reset's prompt switches (``None``: the service's).
    """

    episode_id: str
    task: Task
    state: AbstractState
    max_steps: int
    seed: int | None = None
    transitions: list[Transition] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    created_at: float = field(default_factory=time.time)
    last_access: float = field(default_factory=time.monotonic)
    revision: int = 0
    team: str = DEFAULT_TEAM
    options: EpisodeOptions | None = None

    @property
    def done(self) -> bool:
        """True once terminated or truncated."""
        return self.terminated or self.truncated

    def ensure_running(self) -> None:
        """Raise :class:`EpisodeFinishedError` (409) when the episode has ended."""
        if self.done:
            reason = "terminated" if self.terminated else "truncated"
            raise EpisodeFinishedError(self.episode_id, reason)


class EpisodeStore(Protocol):
    """Where live episodes are kept (in memory, or in Redis shared by replicas).

    An episode is *live* from :meth:`create` until it is deleted or expires: after ``ttl_s``
    without a read or write while running, after ``finished_ttl_s`` once terminated/truncated.
    Episodes are addressed by ``(team, episode_id)``; ``team`` defaults to ``"default"`` (the
    single-user service).
    """

    def create(self, episode: Episode) -> None:
        """Store a new episode of ``episode.team`` at revision 0.

        Raises:
            QuotaExceededError: the team has ``max_episodes_per_team`` live episodes (429,
                ``Retry-After``).
            CapacityError: ``max_episodes`` live episodes already (429, ``Retry-After``).
            ConflictError: the team has a live episode with this id (409, param ``episode_id``).
        """
        ...

    def get(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> Episode:
        """Return the team's episode and refresh its TTL.

        Raises:
            EpisodeNotFoundError: unknown, deleted, expired or another team's (404).
        """
        ...

    def save(self, episode: Episode) -> None:
        """Commit the episode's new state all-or-nothing; bumps ``episode.revision``.

        Raises:
            EpisodeNotFoundError: it was deleted or expired meanwhile (never resurrected; 404).
            ConflictError: another save committed since ``episode`` was read (409).
        """
        ...

    def delete(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> bool:
        """Remove the team's episode; True if it existed."""
        ...

    def claim(self, episode_id: str, ttl_s: float, *, team: str = DEFAULT_TEAM) -> str:
        """Take the step lease of the team's episode for at most ``ttl_s`` seconds; its token.

        Raises:
            ConflictError: another step holds the lease (409 "in progress").
        """
        ...

    def release(self, episode_id: str, token: str, *, team: str = DEFAULT_TEAM) -> None:
        """Give the lease back (no-op when ``token`` no longer holds it)."""
        ...

    def reap(self) -> int:
        """Drop expired episodes; return how many were dropped."""
        ...

    def live_count(self, team: str | None = None) -> int:
        """Live episodes (running and finished-but-readable), across replicas; of one team when
        ``team`` is given."""
        ...

    def ready(self) -> str | None:
        """``None`` when the store can serve requests, otherwise the reason (for ``/readyz``)."""
        ...

    def close(self) -> None:
        """Release connections (the episodes themselves are kept)."""
        ...

    def __len__(self) -> int: ...


_Key = tuple[str, str]  # (team, episode id)


class InMemoryEpisodeStore:
    """Thread-safe in-process store with an idle TTL, a capacity bound and per-team quotas.

    :meth:`get` returns the stored object itself (no copy); callers build a new :class:`Episode`
    for a step and :meth:`save` it, so readers never see a half-applied step.

    Args:
        ttl_s: an episode idle for longer than this (seconds) is expired.
        max_episodes: live episodes allowed before :meth:`create` raises 429.
        finished_ttl_s: finished episodes are kept this long for ``GET`` then reaped.
        max_episodes_per_team: live episodes one team may have (``None``: no limit); one more is
            a 429 ``quota_exceeded``.
        quota_retry_after_s: the ``Retry-After`` of that 429, seconds.
    """

    def __init__(
        self,
        ttl_s: float = 600.0,
        max_episodes: int = 10_000,
        finished_ttl_s: float = 60.0,
        *,
        max_episodes_per_team: int | None = None,
        quota_retry_after_s: float = 30.0,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.finished_ttl_s = finished_ttl_s
        self.max_episodes_per_team = max_episodes_per_team
        self.quota_retry_after_s = quota_retry_after_s
        self._episodes: dict[_Key, Episode] = {}
        self._per_team: dict[str, int] = {}  # team -> stored episodes (expired ones included)
        self._leases: dict[_Key, tuple[str, float]] = {}  # -> (token, deadline)
        self._lock = threading.Lock()

    def _expired(self, ep: Episode, now: float) -> bool:
        ttl = self.finished_ttl_s if ep.done else self.ttl_s
        return now - ep.last_access > ttl

    def _drop_locked(self, key: _Key) -> bool:
        if self._episodes.pop(key, None) is None:
            return False
        left = self._per_team[key[0]] - 1
        if left:
            self._per_team[key[0]] = left
        else:
            del self._per_team[key[0]]
        return True

    def _live_locked(self, key: _Key, now: float) -> Episode | None:
        ep = self._episodes.get(key)
        if ep is not None and self._expired(ep, now):
            self._drop_locked(key)
            return None
        return ep

    def _check_quota_locked(self, team: str, now: float) -> None:
        limit = self.max_episodes_per_team
        if limit is None or self._per_team.get(team, 0) < limit:
            return
        self._reap_locked(now)
        live = self._per_team.get(team, 0)
        if live >= limit:
            raise quota_error(team, live, limit, self.quota_retry_after_s)

    def create(self, episode: Episode) -> None:
        now = time.monotonic()
        key = (episode.team, episode.episode_id)
        with self._lock:
            if self._live_locked(key, now) is not None:
                raise exists_error(episode.episode_id)
            self._check_quota_locked(episode.team, now)
            if len(self._episodes) >= self.max_episodes:
                self._reap_locked(now)
            if len(self._episodes) >= self.max_episodes:
                raise capacity_error(len(self._episodes), self.max_episodes)
            episode.revision = 0
            episode.last_access = now
            self._episodes[key] = episode
            self._per_team[episode.team] = self._per_team.get(episode.team, 0) + 1

    def get(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> Episode:
        now = time.monotonic()
        with self._lock:
            ep = self._live_locked((team, episode_id), now)
            if ep is None:
                raise EpisodeNotFoundError(episode_id)
            ep.last_access = now
            return ep

    def save(self, episode: Episode) -> None:
        now = time.monotonic()
        key = (episode.team, episode.episode_id)
        with self._lock:
            stored = self._live_locked(key, now)
            if stored is None:
                raise EpisodeNotFoundError(episode.episode_id)
            if stored.revision != episode.revision:
                raise changed_error(episode.episode_id)
            episode.revision += 1
            episode.last_access = now
            self._episodes[key] = episode

    def delete(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> bool:
        with self._lock:
            return self._drop_locked((team, episode_id))

    def claim(self, episode_id: str, ttl_s: float, *, team: str = DEFAULT_TEAM) -> str:
        now = time.monotonic()
        key = (team, episode_id)
        with self._lock:
            held = self._leases.get(key)
            if held is not None and held[1] > now:
                raise in_progress_error(episode_id)
            token = uuid.uuid4().hex
            self._leases[key] = (token, now + ttl_s)
            return token

    def release(self, episode_id: str, token: str, *, team: str = DEFAULT_TEAM) -> None:
        key = (team, episode_id)
        with self._lock:
            held = self._leases.get(key)
            if held is not None and held[0] == token:
                del self._leases[key]

    def _reap_locked(self, now: float) -> int:
        dead = [k for k, ep in self._episodes.items() if self._expired(ep, now)]
        for k in dead:
            self._drop_locked(k)
        for k in [k for k, (_, deadline) in self._leases.items() if deadline <= now]:
            del self._leases[k]
        return len(dead)

    def reap(self) -> int:
        with self._lock:
            return self._reap_locked(time.monotonic())

    def live_count(self, team: str | None = None) -> int:
        now = time.monotonic()
        with self._lock:
            return sum(
                not self._expired(ep, now)
                for (owner, _), ep in self._episodes.items()
                if team is None or owner == team
            )

    def ready(self) -> str | None:
        return None

    def close(self) -> None:
        return None

    def __len__(self) -> int:
        return self.live_count()
