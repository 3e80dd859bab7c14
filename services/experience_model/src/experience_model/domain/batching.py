"""Dynamic micro-batching of concurrent requests into one backend call.

Concurrent ``/step`` calls from different episodes are queued; a single worker task takes up to
``max_batch_size`` items — after the first one arrives it keeps collecting while items keep coming
(no gap longer than ``idle_s``), for at most ``max_wait_s`` — and processes them together (one
retrieval call, one ``generate`` over the batch).

Returning callers: an item may carry a ``key`` (the episode id). A key whose result was delivered
less than the *return window* ago is expected back (a rollout worker steps its episode again as
soon as it has the observation), so while such keys are missing from the batch being gathered the
worker waits for them — up to the return window, not just ``idle_s``. The return window is
``max_wait_s`` or ``return_wait_fraction`` × the duration of the last batch, whichever is longer:
when one model call takes 200 ms, waiting 100 ms for the other half of the clients (whose HTTP
round trips through one event loop take tens of milliseconds) beats running two half batches.
Without this, clients whose answers went out while the next batch was already being gathered
come back a few milliseconds late and the batches settle into alternating halves.
:meth:`MicroBatcher.forget` drops a key whose episode ended.

Announced callers: a caller that will submit soon (a ``/step`` that is still reading its episode)
holds :meth:`MicroBatcher.arrival`; while any announced caller has not submitted yet the worker
waits for it (up to the return window). When every caller in the batch is a returning one, no other
answered key is expected back and no announced caller is on its way, the batch goes at once,
without the ``idle_s`` wait: a lone client stepping its episode pays no batching delay, while
the first steps of a burst (new keys) still wait ``idle_s`` for each other. The queue is bounded:
:meth:`MicroBatcher.submit` raises :class:`~dreamgym.errors.CapacityError` (429) when it is full,
so overload is answered honestly instead of growing latency without bound. A caller that goes
away (client disconnect, timeout) cancels its future and its item is skipped if not yet started.
The worker runs in a fresh ``contextvars`` context, so its log lines never carry the request id
of whichever request happened to start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from dreamgym.errors import CapacityError

__all__ = ["Arrival", "BatchStats", "MicroBatcher"]

In = TypeVar("In")
Out = TypeVar("Out")

logger = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """Counters of the batcher (exported as metrics)."""

    batches: int = 0
    items: int = 0
    skipped_cancelled: int = 0
    rejected_full: int = 0
    last_batch_size: int = 0
    batch_sizes: list[int] = field(default_factory=list)


# A queued item: (item, the caller's future, the caller's key or None).
_Entry = tuple[In, "asyncio.Future[Out]", Hashable | None]


class Arrival:
    """A caller's promise to submit soon (see :meth:`MicroBatcher.arrival`)."""

    __slots__ = ("_batcher", "pending")

    def __init__(self, batcher: MicroBatcher) -> None:  # type: ignore[type-arg]
        self._batcher = batcher
        self.pending = True
        batcher._arriving += 1

    def done(self) -> None:
        """The caller submitted, or gave up before it could (idempotent)."""
        if self.pending:
            self.pending = False
            self._batcher._arriving -= 1


class MicroBatcher(Generic[In, Out]):
    """Gather concurrent submissions into batches.

    Args:
        process: ``async (items) -> results`` with one result per item, in order; a result may be
            an ``Exception`` instance, which is raised to that item's caller only.
        max_batch_size: most items per batch (>= 1).
        max_wait_s: longest wait for more items after the first (seconds, >= 0).
        max_queue: most queued items before :meth:`submit` answers 429.
        idle_s: stop collecting early when no new item arrived for this long (seconds); bursts
            from a trainer (all of a group's steps at once) land in one batch, while a lone
            client waits at most ``idle_s``.
        on_batch: called with the size of every batch handed to ``process`` (metrics).
        return_wait_fraction: the return window is at least this fraction of the last batch's
            processing time (see the module docstring; 0 → always ``max_wait_s``).
    """

    def __init__(
        self,
        process: Callable[[list[In]], Awaitable[list[Out | BaseException]]],
        *,
        max_batch_size: int = 64,
        max_wait_s: float = 0.005,
        max_queue: int = 4096,
        idle_s: float | None = None,
        on_batch: Callable[[int], None] | None = None,
        return_wait_fraction: float = 0.5,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._process = process
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.idle_s = max_wait_s if idle_s is None else min(idle_s, max_wait_s)
        self._queue: asyncio.Queue[_Entry[In, Out]] | None = None
        self._returning: dict[Hashable, float] = {}  # key -> monotonic time its result went out
        self._arriving = 0  # announced callers that have not submitted yet
        self._worker: asyncio.Task[None] | None = None
        self._on_batch = on_batch
        self.return_wait_fraction = return_wait_fraction
        self._last_process_s = 0.0  # how long the last batch took (sets the return window)
        self.stats = BatchStats()

    @property
    def queue_depth(self) -> int:
        """Items waiting to be batched."""
        return self._queue.qsize() if self._queue is not None else 0

    def start(self) -> None:
        """Start the worker task on the running event loop (idempotent)."""
        if self._worker is None or self._worker.done():
            self._queue = asyncio.Queue(maxsize=self.max_queue)
            self._worker = asyncio.get_running_loop().create_task(
                self._run(), context=contextvars.Context()
            )

    async def stop(self) -> None:
        """Cancel the worker; queued items fail with ``CancelledError``."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        while self._queue is not None and not self._queue.empty():
            self._queue.get_nowait()[1].cancel()

    @contextlib.contextmanager
    def arrival(self) -> Iterator[Arrival]:
        """Announce a submission that is on its way; pass the yielded token to :meth:`submit`.

        While the token is pending the worker keeps a gathered batch open for it (up to
        ``max_wait_s``); leaving the block without submitting withdraws the announcement.
        """
        token = Arrival(self)
        try:
            yield token
        finally:
            token.done()

    def forget(self, key: Hashable) -> None:
        """Stop expecting ``key`` back (its episode ended or was closed)."""
        self._returning.pop(key, None)

    async def submit(
        self, item: In, key: Hashable | None = None, arrival: Arrival | None = None
    ) -> Out:
        """Queue ``item`` and wait for its result.

        Args:
            item: what ``process`` gets.
            key: the caller's identity (episode id), if it is likely to submit again right after
                its result (see the module docstring); ``None`` for one-off items.
            arrival: the token of :meth:`arrival` when this submission was announced.

        Raises:
            CapacityError: the queue is full (429, ``Retry-After`` 1 s).
            Exception: whatever the processing returned for this item.
        """
        self.start()
        assert self._queue is not None
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        if arrival is not None:
            arrival.done()
        try:
            self._queue.put_nowait((item, future, key))
        except asyncio.QueueFull:
            self.stats.rejected_full += 1
            raise CapacityError(
                f"experience model queue is full ({self.max_queue} pending steps); retry later",
                retry_after_s=1.0,
            ) from None
        return await future

    def _live(self, entry: _Entry[In, Out]) -> bool:
        """False for an item whose caller already went away (it is dropped, never generated)."""
        if entry[1].done():
            self.stats.skipped_cancelled += 1
            return False
        return True

    def _take(self, entry: _Entry[In, Out], batch: list[_Entry[In, Out]]) -> bool:
        """Add a live entry to ``batch``; True if its caller was a returning one."""
        if not self._live(entry):
            return True
        batch.append(entry)
        return entry[2] is not None and self._returning.pop(entry[2], None) is not None

    @property
    def return_window_s(self) -> float:
        """How long an answered key is expected back (seconds; see the module docstring)."""
        return max(self.max_wait_s, self.return_wait_fraction * self._last_process_s)

    def _expected_until(self, now: float) -> float:
        """Latest time a recently answered key is still expected back (``0`` if none is).

        ``_returning`` is kept in answer-time order, so expired keys are at its front and the
        latest answer is its last value.
        """
        window = self.return_window_s
        horizon = now - window
        while self._returning:
            oldest = next(iter(self._returning))
            if self._returning[oldest] >= horizon:
                break
            del self._returning[oldest]
        if not self._returning:
            return 0.0
        return next(reversed(self._returning.values())) + window

    async def _collect(self) -> list[_Entry[In, Out]]:
        assert self._queue is not None
        batch: list[_Entry[In, Out]] = []
        all_returning = True
        while not batch:  # abandoned items neither open a batch nor take a place in one
            all_returning = self._take(await self._queue.get(), batch)
        start = time.monotonic()
        deadline = start + self.max_wait_s  # for callers nobody is expecting
        return_deadline = start + self.return_window_s  # for callers we just answered
        while len(batch) < self.max_batch_size:
            now = time.monotonic()
            expected = self._expected_until(now)  # callers just answered are waited for
            if self._arriving > 0:  # announced callers are on their way
                expected = return_deadline
            elif expected <= now and self._queue.empty() and all_returning:
                break  # the callers we know of are all here and nobody is on the way
            if expected > now:
                until = min(return_deadline, expected)
            else:
                until = min(deadline, now + self.idle_s)
            remaining = until - now
            try:
                if remaining <= 0:
                    entry = self._queue.get_nowait()
                else:
                    entry = await asyncio.wait_for(self._queue.get(), remaining)
            except (asyncio.QueueEmpty, TimeoutError):
                break
            except asyncio.CancelledError:  # stopped while gathering: release the callers
                for entry in batch:
                    entry[1].cancel()
                raise
            all_returning = self._take(entry, batch) and all_returning
        return batch

    async def _run(self) -> None:
        while True:
            batch = await self._collect()
            live = [entry for entry in batch if self._live(entry)]
            if not live:
                continue
            self.stats.batches += 1
            self.stats.items += len(live)
            self.stats.last_batch_size = len(live)
            if self._on_batch is not None:
                self._on_batch(len(live))
            started = time.monotonic()
            try:
                results = await self._process([entry[0] for entry in live])
            except asyncio.CancelledError:  # stopped mid-batch: release the callers
                for entry in live:
                    entry[1].cancel()
                raise
            except Exception as exc:  # the whole batch failed: every caller gets the error
                logger.exception("batch of %d failed", len(live))
                results = [exc] * len(live)
            answered_at = time.monotonic()
            self._last_process_s = answered_at - started
            for (_, fut, key), result in zip(live, results, strict=True):
                if key is not None:
                    self._returning.pop(key, None)  # re-insert: keeps answer-time order
                    self._returning[key] = answered_at
                if fut.done():
                    continue
                if isinstance(result, BaseException):
                    fut.set_exception(result)
                else:
                    fut.set_result(result)
