"""Serve an ASGI app on a free loopback port in a background thread (for integration tests).

>>> with serve_app(create_app(settings)) as url:  # doctest: +SKIP
...     ExperienceModelClient(url).model_info()

The server runs the app's lifespan, speaks HTTP/1.1 and WebSocket (uvicorn), and is stopped
when the block exits. Needs the ``server`` extra (uvicorn).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dreamgym.stack.ports import free_port

__all__ = ["free_port", "serve_app"]


@contextmanager
def serve_app(
    app: Any, *, host: str = "127.0.0.1", startup_timeout_s: float = 60.0
) -> Iterator[str]:
    """Run ``app`` under uvicorn in a daemon thread; yield its base URL (``http://host:port``).

    Raises:
        RuntimeError: the server did not start within ``startup_timeout_s``.
    """
    import uvicorn  # noqa: PLC0415

    port = free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
