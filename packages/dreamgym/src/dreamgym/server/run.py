"""Run a DreamGym service under uvicorn with the HTTP settings long-lived training clients need.

Keep-alive: uvicorn closes an idle connection after 5 s by default, the same time an ``httpx``
pool keeps one for reuse, so a trainer that pauses ~5 s between steps (a policy update) races
the server closing the connection and gets ``Server disconnected without sending a response`` on
a non-idempotent ``POST /step``. Services keep idle connections for ``DREAMGYM_HTTP_KEEP_ALIVE_S``
(default 75 s, longer than any client pool's expiry), so the client always closes first.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DEFAULT_KEEP_ALIVE_S", "keep_alive_s", "serve"]

DEFAULT_KEEP_ALIVE_S = 75


def keep_alive_s() -> int:
    """Seconds an idle HTTP connection is kept (``DREAMGYM_HTTP_KEEP_ALIVE_S``, default 75).

    Raises:
        ValueError: the variable is not a positive integer (the message names it).
    """
    raw = os.environ.get("DREAMGYM_HTTP_KEEP_ALIVE_S", str(DEFAULT_KEEP_ALIVE_S))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"DREAMGYM_HTTP_KEEP_ALIVE_S must be a positive integer, got {raw!r}")
    return value


def serve(app: Any, host: str, port: int) -> None:
    """``uvicorn.run`` the app (its own JSON logging, the keep-alive above)."""
    import uvicorn  # noqa: PLC0415

    uvicorn.run(app, host=host, port=port, log_config=None, timeout_keep_alive=keep_alive_s())
