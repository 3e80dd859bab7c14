"""Imagined episodes and their store.

An :class:`Episode` is the server-side state of one imagined rollout: the task, the current
abstract state, the transitions so far, the step limit and the flags. Episodes are isolated per
``episode_id`` (a random UUID4, unguessable) and expire after an idle TTL, so a client that
vanishes cannot leak them (see ``shared/design/anchors.md``: OpenEnv PR #1000, ms-swift #9745).

:class:`InMemoryEpisodeStore` serves one process; the Redis store (multi-replica, survives
restarts) implements the same :class:`EpisodeStore` protocol.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from dreamgym.errors import CapacityError, EpisodeFinishedError, EpisodeNotFoundError
from dreamgym.types import AbstractState, Task, Transition

__all__ = ["Episode", "EpisodeStore", "InMemoryEpisodeStore", "new_episode_id"]


def new_episode_id() -> str:
    """A fresh unguessable episode id."""
    return f"ep-{uuid.uuid4().hex}"


@dataclass
class Episode:
    """Server-side state of one imagined episode.

    Attributes:
        episode_id: the id clients address the episode by.
        task: the task being played.
        state: the current abstract state s_t.
        transitions: the transitions so far (history for the prompt).
        max_steps: the episode is truncated after this many steps.
        seed: base sampling seed (step t samples with ``seed + t`` unless the step gives one).
        terminated: the experience model declared a terminal state.
        truncated: ``max_steps`` was reached.
        last_access: monotonic time of the last read or write (for the idle TTL).
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
    """Where live episodes are kept."""

    def create(self, episode: Episode) -> None:
        """Store a new episode (raises :class:`CapacityError` when full)."""
        ...

    def get(self, episode_id: str) -> Episode:
        """Return the episode (raises :class:`EpisodeNotFoundError`); refreshes its TTL."""
        ...

    def save(self, episode: Episode) -> None:
        """Persist the episode's new state."""
        ...

    def delete(self, episode_id: str) -> bool:
        """Remove the episode; True if it existed."""
        ...

    def reap(self) -> int:
        """Drop expired episodes; return how many were dropped."""
        ...

    def __len__(self) -> int: ...


class InMemoryEpisodeStore:
    """Thread-safe in-process store with an idle TTL and a capacity bound.

    Args:
        ttl_s: an episode idle for longer than this (seconds) is expired.
        max_episodes: live episodes allowed before :meth:`create` raises 429.
        finished_ttl_s: finished episodes are kept this long for ``GET`` then reaped.
    """

    def __init__(
        self, ttl_s: float = 600.0, max_episodes: int = 10_000, finished_ttl_s: float = 60.0
    ) -> None:
        self.ttl_s = ttl_s
        self.max_episodes = max_episodes
        self.finished_ttl_s = finished_ttl_s
        self._episodes: dict[str, Episode] = {}
        self._lock = threading.Lock()

    def _expired(self, ep: Episode, now: float) -> bool:
        ttl = self.finished_ttl_s if ep.done else self.ttl_s
        return now - ep.last_access > ttl

    def create(self, episode: Episode) -> None:
        with self._lock:
            if len(self._episodes) >= self.max_episodes:
                self._reap_locked(time.monotonic())
            if len(self._episodes) >= self.max_episodes:
                raise CapacityError(
                    f"{len(self._episodes)} live episodes (max {self.max_episodes}); close "
                    "finished episodes or retry later",
                    retry_after_s=1.0,
                )
            self._episodes[episode.episode_id] = episode

    def get(self, episode_id: str) -> Episode:
        now = time.monotonic()
        with self._lock:
            ep = self._episodes.get(episode_id)
            if ep is None or self._expired(ep, now):
                self._episodes.pop(episode_id, None)
                raise EpisodeNotFoundError(episode_id)
            ep.last_access = now
            return ep

    def save(self, episode: Episode) -> None:
        with self._lock:
            episode.last_access = time.monotonic()
            self._episodes[episode.episode_id] = episode

    def delete(self, episode_id: str) -> bool:
        with self._lock:
            return self._episodes.pop(episode_id, None) is not None

    def _reap_locked(self, now: float) -> int:
        dead = [k for k, ep in self._episodes.items() if self._expired(ep, now)]
        for k in dead:
            del self._episodes[k]
        return len(dead)

    def reap(self) -> int:
        with self._lock:
            return self._reap_locked(time.monotonic())

    def __len__(self) -> int:
        with self._lock:
            return len(self._episodes)
