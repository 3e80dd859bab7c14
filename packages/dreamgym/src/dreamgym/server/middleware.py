"""ASGI middleware shared by the services: request ids.

:class:`RequestIdMiddleware` gives every HTTP request an id — the client's ``X-Request-ID`` header
when it sends a usable one, else a fresh UUID4 hex — binds it to the log context (so every log
line written while the request is handled carries ``request_id``) and echoes it in the response's
``X-Request-ID`` header. It is a plain ASGI middleware (not ``BaseHTTPMiddleware``): it does not
buffer responses and does not touch ``receive``, so disconnect detection keeps working.
"""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dreamgym.server.logging import bind_log_context, log_context, reset_log_context

__all__ = ["REQUEST_ID_HEADER", "RequestIdMiddleware", "current_request_id"]

REQUEST_ID_HEADER = "X-Request-ID"
_USABLE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def current_request_id() -> str | None:
    """The id of the request being handled in this context (``None`` outside requests)."""
    return log_context().get("request_id")


class RequestIdMiddleware:
    """Assign, log-bind and echo ``X-Request-ID``.

    A client-sent id is kept when it is 1-128 characters of ``[A-Za-z0-9._:-]``; anything else
    (missing, too long, odd characters that could forge log lines) is replaced by a new id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = Headers(scope=scope).get(REQUEST_ID_HEADER)
        request_id = sent if sent and _USABLE.match(sent) else uuid.uuid4().hex
        token = bind_log_context(request_id=request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            reset_log_context(token)
