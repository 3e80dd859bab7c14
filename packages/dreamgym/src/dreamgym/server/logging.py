"""Structured JSON logging for services (one JSON object per line on stderr).

Fields bound to the current request context with :func:`bind_log_context` (the request id set by
:class:`~dreamgym.server.middleware.RequestIdMiddleware`, the episode id set by a step route) are
added to every record logged while that request is handled, by the :class:`ContextFilter` that
:func:`configure_logging` installs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token

__all__ = [
    "ContextFilter",
    "JsonFormatter",
    "bind_log_context",
    "configure_logging",
    "log_context",
    "reset_log_context",
]

_CONTEXT: ContextVar[Mapping[str, str] | None] = ContextVar("dreamgym_log_context", default=None)


def bind_log_context(**fields: str) -> Token[Mapping[str, str] | None]:
    """Add ``fields`` to every record logged from the current context (task/request).

    Returns:
        A token for :func:`reset_log_context`; contexts end with their task anyway.
    """
    return _CONTEXT.set({**log_context(), **fields})


def reset_log_context(token: Token[Mapping[str, str] | None]) -> None:
    """Undo a :func:`bind_log_context`."""
    _CONTEXT.reset(token)


def log_context() -> Mapping[str, str]:
    """The fields bound to the current context (``request_id``, ``episode_id``...)."""
    return _CONTEXT.get() or {}


class ContextFilter(logging.Filter):
    """Copy the bound context fields onto each record (explicit ``extra=`` values win)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in log_context().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Format records as JSON; extra attributes (``episode_id``, ``request_id``...) are kept."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(payload)


def configure_logging(service: str, level: str = "INFO", json_logs: bool = True) -> None:
    """Route root logging to stderr, as JSON lines unless ``json_logs`` is False."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    if json_logs:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
