"""Episode lifecycle on top of the experience model: reset, step, read, close.

``reset`` starts an imagined episode from a task's initial abstract state. ``step`` sends the
episode's (task, history, state, action) through the micro-batcher to the experience model and
applies the prediction: ``terminated`` comes from the model, ``truncated`` from the episode's step
limit, ``won`` is ``terminated and reward > 0`` (outcome reward, paper §4.1.1).

A step that fails (malformed output after retries, deadline exceeded, capacity) leaves the episode
exactly as it was, so the client can retry the step or mask the rollout. Two concurrent steps on
the same episode are refused with 409 rather than interleaved, across replicas too: a step holds
the episode's lease in the store (409 "in progress" for the second), and its result is committed
with a compare-and-set on the episode's revision (409 "changed by a concurrent step" if the lease
lapsed and another step committed first). The episode is never half-written.

Every episode belongs to the team that reset it; every method addresses episodes by
``(team, episode_id)``, so another team's episode answers exactly like an unknown one (404). A
step carries its :class:`~experience_model.domain.caller.Caller` into the model batch
(:class:`~experience_model.domain.caller.CallerStepQuery`), so retrieval acts as the caller.

Every step ends with one call to the optional :class:`StepObserver` (outcome and latency) and one
log record carrying ``episode_id`` and ``team`` (never the key); every model batch is reported to
it too (metrics).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from dreamgym.auth.keys import DEFAULT_TEAM
from dreamgym.errors import (
    CapacityError,
    DreamGymError,
    MalformedTransitionError,
    StepTimeoutError,
)
from dreamgym.experience_types import EpisodeOptions
from dreamgym.types import AbstractState, Task, Transition
from experience_model.domain.batching import Arrival, MicroBatcher
from experience_model.domain.caller import DEFAULT_CALLER, Caller, CallerStepQuery
from experience_model.domain.episodes import Episode, EpisodeStore, new_episode_id
from experience_model.domain.prompts import HistoryStep, PromptOptions
from experience_model.domain.simulator import ExperienceModel, StepPrediction, StepQuery

_R = TypeVar("_R")

__all__ = [
    "LEASE_MARGIN_S",
    "EpisodeService",
    "StepObserver",
    "StepOutcome",
    "episode_prompt_options",
]

LEASE_MARGIN_S = 5.0
"""Seconds a step lease outlives the step deadline (a crashed replica frees it after that)."""

logger = logging.getLogger(__name__)

# Step outcomes worth an INFO line; ok and client errors (404, 409, 429) are DEBUG, since a busy
# trainer produces them by the thousand.
_NOTABLE = frozenset({"malformed_transition", "step_timeout", "internal_error", "cancelled"})


class StepObserver(Protocol):
    """Receives what happened to each step and batch (implemented by the metrics adapter)."""

    def step_finished(self, outcome: str, latency_s: float) -> None:
        """A step ended: ``outcome`` is ``"ok"``, an error type (``"malformed_transition"``,
        ``"step_timeout"``, ``"capacity_reached"``, ``"episode_not_found"``...), ``"cancelled"``
        (client gone) or ``"internal_error"``; ``latency_s`` is wall time in seconds."""
        ...

    def batch_formed(self, size: int) -> None:
        """A batch of ``size`` steps was handed to the model."""
        ...


@dataclass(frozen=True)
class StepOutcome:
    """What a step returns: the stored transition and the updated episode."""

    episode: Episode
    transition: Transition
    prediction: StepPrediction


def episode_prompt_options(
    base: PromptOptions, override: EpisodeOptions | None
) -> PromptOptions | None:
    """``base`` with the episode's non-``None`` switches applied (``None`` when nothing is set)."""
    if override is None:
        return None
    changes = override.model_dump(exclude_none=True)
    return dataclasses.replace(base, **changes) if changes else None


def _history(ep: Episode) -> list[HistoryStep]:
    return [HistoryStep(observation=t.observation, action=t.action) for t in ep.transitions]


class EpisodeService:
    """Reset/step/close imagined episodes.

    Args:
        store: where episodes live.
        model: the experience model (used through a micro-batcher).
        default_max_steps: step limit when a reset does not give one.
        max_steps_limit: largest step limit a reset may ask for.
        step_timeout_s: deadline of one step (504 after it; the episode stays usable).
        max_batch_size / max_wait_s / max_queue / idle_s / return_wait_fraction: micro-batching
            bounds (see :class:`~experience_model.domain.batching.MicroBatcher`).
        observer: optional receiver of step outcomes and batch sizes (metrics).
    """

    def __init__(
        self,
        store: EpisodeStore,
        model: ExperienceModel,
        *,
        default_max_steps: int = 30,
        max_steps_limit: int = 200,
        step_timeout_s: float = 60.0,
        max_batch_size: int = 64,
        max_wait_s: float = 0.005,
        max_queue: int = 4096,
        idle_s: float | None = None,
        return_wait_fraction: float = 0.5,
        observer: StepObserver | None = None,
    ) -> None:
        self.store = store
        self.model = model
        self.default_max_steps = default_max_steps
        self.max_steps_limit = max_steps_limit
        self.step_timeout_s = step_timeout_s
        self.batcher: MicroBatcher[StepQuery, StepPrediction] = MicroBatcher(
            self._predict,
            max_batch_size=max_batch_size,
            max_wait_s=max_wait_s,
            max_queue=max_queue,
            idle_s=idle_s,
            on_batch=observer.batch_formed if observer is not None else None,
            return_wait_fraction=return_wait_fraction,
        )
        self.observer = observer
        # a store that talks to a server (Redis) is called from worker threads, never the loop
        self._store_blocks = bool(getattr(store, "blocking_io", False))
        self._background: set[asyncio.Future[Any]] = set()

    async def _store_call(
        self, fn: Callable[..., _R], *args: Any, shield: bool = False, **kwargs: Any
    ) -> _R:
        """``fn(*args, **kwargs)`` on the episode store, off the event loop when the store does
        network I/O (Redis), so one slow store call never stalls other requests.

        ``shield``: the call completes even if the awaiting request is cancelled meanwhile (a
        commit or a lease release must not be half-done).
        """
        if not self._store_blocks:
            return fn(*args, **kwargs)
        call = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        return await (asyncio.shield(call) if shield else call)

    async def _claim(self, episode_id: str, team: str) -> str:
        """Take the episode's lease; if the caller is cancelled while the claim is in flight, the
        lease it gets is released as soon as it arrives (never left held until it expires)."""
        ttl_s = self.step_timeout_s + LEASE_MARGIN_S
        if not self._store_blocks:
            return self.store.claim(episode_id, ttl_s, team=team)
        call = asyncio.ensure_future(
            asyncio.to_thread(self.store.claim, episode_id, ttl_s, team=team)
        )
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:

            def release_late(done: asyncio.Future[str]) -> None:
                if not done.cancelled() and done.exception() is None:
                    late = asyncio.ensure_future(
                        asyncio.to_thread(self.store.release, episode_id, done.result(), team=team)
                    )
                    self._background.add(late)
                    late.add_done_callback(self._background.discard)

            call.add_done_callback(release_late)
            raise

    async def _predict(self, queries: list[StepQuery]) -> list[StepPrediction | BaseException]:
        return list(await self.model.predict(queries))

    def reset(
        self,
        task: Task,
        *,
        seed: int | None = None,
        max_steps: int | None = None,
        episode_id: str | None = None,
        team: str = DEFAULT_TEAM,
        options: EpisodeOptions | None = None,
    ) -> Episode:
        """Start an episode of ``team`` in the task's initial state (``options``: its prompt
        switches).

        Raises:
            InvalidRequestError: ``max_steps`` above the service limit (422).
            QuotaExceededError: the team's live-episode quota is used up (429).
            CapacityError: too many live episodes (429).
            ConflictError: the team already has a live episode ``episode_id`` (409).
        """
        from dreamgym.errors import InvalidRequestError  # noqa: PLC0415

        limit = max_steps or self.default_max_steps
        if limit > self.max_steps_limit:
            raise InvalidRequestError(
                f"max_steps={limit} exceeds this service's limit {self.max_steps_limit}",
                param="max_steps",
            )
        episode = Episode(
            episode_id=episode_id or new_episode_id(),
            task=task,
            state=task.initial_state(),
            max_steps=limit,
            seed=seed,
            team=team,
            options=options,
        )
        self.store.create(episode)  # atomic: 409 if episode_id is live, 429 when full
        return episode

    def get(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> Episode:
        """The team's episode (404 if unknown, expired or another team's)."""
        return self.store.get(episode_id, team=team)

    def close(self, episode_id: str, *, team: str = DEFAULT_TEAM) -> bool:
        """Forget the team's episode; True if it existed (False for another team's)."""
        self.batcher.forget((team, episode_id))
        return self.store.delete(episode_id, team=team)

    async def step(
        self,
        episode_id: str,
        action: str,
        *,
        seed: int | None = None,
        caller: Caller = DEFAULT_CALLER,
    ) -> StepOutcome:
        """Advance the caller's team's episode by one imagined step.

        The step holds the episode's lease (``step_timeout_s + LEASE_MARGIN_S``) while the model
        runs, reads the episode under it, and commits the result with a compare-and-set. The
        model's retrieval queries the replay store as ``caller``.

        Raises:
            EpisodeNotFoundError (404, also when closed or expired mid-step: never resurrected),
            EpisodeFinishedError (409), ConflictError (409, concurrent step), CapacityError
            (429), StepTimeoutError (504), MalformedTransitionError (502).
        """
        start = time.perf_counter()
        outcome = "internal_error"
        team = caller.team
        try:
            with self.batcher.arrival() as arrival:  # the batcher keeps its batch open for us
                token = await self._claim(episode_id, team)
                try:
                    episode = await self._store_call(self.store.get, episode_id, team=team)
                    episode.ensure_running()
                    prediction = await self._predict_one(episode, action, seed, caller, arrival)
                    result = self._apply(episode, action, prediction)
                    # the compare-and-set commit finishes even if the caller goes away meanwhile
                    await self._store_call(self.store.save, result.episode, shield=True)
                    if result.episode.done:  # no next step will come: the batcher need not wait
                        self.batcher.forget((team, episode_id))
                finally:
                    await self._store_call(
                        self.store.release, episode_id, token, team=team, shield=True
                    )
            outcome = "ok"
            return result
        except DreamGymError as exc:
            outcome = exc.error_type
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self._report(episode_id, team, outcome, time.perf_counter() - start)

    def _report(self, episode_id: str, team: str, outcome: str, latency_s: float) -> None:
        if self.observer is not None:
            self.observer.step_finished(outcome, latency_s)
        level = logging.INFO if outcome in _NOTABLE else logging.DEBUG
        if logger.isEnabledFor(level):
            logger.log(
                level,
                "episode step %s",
                outcome,
                extra={
                    "episode_id": episode_id,
                    "team": team,
                    "outcome": outcome,
                    "latency_ms": round(latency_s * 1000.0, 2),
                },
            )

    async def step_many(
        self, items: list[tuple[str, str, int | None]], *, caller: Caller = DEFAULT_CALLER
    ) -> list[StepOutcome | BaseException]:
        """Advance many of the caller's team's episodes at once: ``(episode_id, action, seed)``
        per item.

        All items are submitted in the same event-loop tick, so they share one model batch (up
        to ``max_batch_size``). Errors are returned per item (404, 409, 502, 504 ...), never
        raised for the whole call. Two items for the same episode: the second gets 409.
        """
        return list(
            await asyncio.gather(
                *(
                    self.step(episode_id, action, seed=seed, caller=caller)
                    for episode_id, action, seed in items
                ),
                return_exceptions=True,
            )
        )

    async def predict_many(self, queries: list[StepQuery]) -> list[StepPrediction | BaseException]:
        """Stateless, teacher-forced predictions (``/v1/transitions:predict``) through the same
        micro-batcher as episode steps: they share model batches with live episodes, count
        against the bounded queue and get a deadline.

        Returns:
            One result per query, in order: a prediction, or the per-query error (e.g.
            :class:`MalformedTransitionError`).

        Raises:
            CapacityError: the queue has no room for all ``queries`` (429; nothing is queued).
            StepTimeoutError: not done within ``step_timeout_s`` per ``max_batch_size`` queries
                (504; the unfinished queries are dropped from the queue).
        """
        room = self.batcher.max_queue - self.batcher.queue_depth
        if len(queries) > room:
            raise CapacityError(
                f"experience model queue has room for {room} queries, got {len(queries)}; "
                "retry later or send fewer",
                retry_after_s=1.0,
            )
        batches = -(-len(queries) // self.batcher.max_batch_size)
        deadline_s = self.step_timeout_s * batches
        pending = [asyncio.ensure_future(self.batcher.submit(q)) for q in queries]
        try:
            return list(
                await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), deadline_s)
            )
        except TimeoutError:
            raise StepTimeoutError(
                f"{len(queries)} predictions exceeded their {deadline_s:.0f}s deadline"
            ) from None
        finally:
            for future in pending:  # cancelled callers are skipped by the batcher
                future.cancel()

    async def _predict_one(
        self,
        ep: Episode,
        action: str,
        seed: int | None,
        caller: Caller,
        arrival: Arrival | None = None,
    ) -> StepPrediction:
        step_seed = (
            seed
            if seed is not None
            else (None if ep.seed is None else ep.seed * 1009 + len(ep.transitions))
        )
        query = CallerStepQuery(
            caller=caller,
            task=ep.task.instruction,
            environment=ep.task.environment,
            observation=ep.state.observation,
            admissible_actions=ep.state.admissible_actions,
            action=action,
            history=_history(ep),
            seed=step_seed,
            options=episode_prompt_options(self.model.options, ep.options),
        )
        try:
            result = await asyncio.wait_for(
                self.batcher.submit(query, key=(ep.team, ep.episode_id), arrival=arrival),
                self.step_timeout_s,
            )
        except TimeoutError:
            raise StepTimeoutError(
                f"step exceeded its {self.step_timeout_s:.0f}s deadline; the episode is unchanged"
            ) from None
        if isinstance(result, MalformedTransitionError):
            raise result
        return result

    def _apply(self, ep: Episode, action: str, p: StepPrediction) -> StepOutcome:
        step = len(ep.transitions)
        truncated = not p.terminated and step + 1 >= ep.max_steps
        transition = Transition(
            step=step,
            observation=ep.state.observation,
            admissible_actions=list(ep.state.admissible_actions),
            action=action,
            next_observation=p.observation,
            next_admissible_actions=list(p.admissible_actions),
            reward=p.reward,
            terminated=p.terminated,
            truncated=truncated,
            won=p.terminated and p.reward > 0,
            reasoning=p.reasoning or None,
        )
        updated = dataclasses.replace(
            ep,
            transitions=[*ep.transitions, transition],
            state=AbstractState(
                task=ep.task.instruction,
                observation=p.observation,
                admissible_actions=list(p.admissible_actions),
                step=step + 1,
            ),
            terminated=p.terminated,
            truncated=truncated,
        )
        return StepOutcome(episode=updated, transition=transition, prediction=p)
