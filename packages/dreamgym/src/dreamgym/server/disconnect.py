"""Stop work for clients that went away.

Uvicorn does not cancel a request handler when its client disconnects; a long ``/step`` would
keep its slot in the model's batch queue for a caller nobody is waiting for.
:func:`cancel_on_disconnect` runs the handler's work next to a watcher of the ASGI ``receive``
channel and cancels the work as soon as ``http.disconnect`` arrives, so a queued item is dropped
before generation (see :class:`experience_model.domain.batching.MicroBatcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

__all__ = ["ClientDisconnectedError", "cancel_on_disconnect"]

T = TypeVar("T")
logger = logging.getLogger(__name__)


class ClientDisconnectedError(Exception):
    """The client disconnected before its response was ready (answered with a bodiless 499)."""


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def cancel_on_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await ``work``; cancel it if the client disconnects first.

    Call it after the request body has been read (FastAPI does this before the endpoint runs):
    the watcher then only ever sees ``http.disconnect``, which servers send when the client goes
    away or, harmlessly, after the response is complete.

    Raises:
        ClientDisconnectedError: the client went away; ``work`` was cancelled.
        Exception: whatever ``work`` raised.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        logger.info("client disconnected; request work cancelled")
        raise ClientDisconnectedError("client disconnected")
    return task.result()
