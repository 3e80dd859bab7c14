"""FastAPI helpers shared by every DreamGym service (optional extra ``dreamgym[server]``).

One error envelope, one exception-to-status mapping, request validation errors that name the
field, ``/healthz`` + ``/readyz`` routes, JSON logging with request ids (``X-Request-ID``) and
cancellation of work whose client disconnected. Services import these; they never import each
other.
"""

from dreamgym.server.disconnect import ClientDisconnectedError, cancel_on_disconnect
from dreamgym.server.errors import install_error_handlers
from dreamgym.server.health import ReadinessCheck, health_router
from dreamgym.server.logging import bind_log_context, configure_logging
from dreamgym.server.middleware import REQUEST_ID_HEADER, RequestIdMiddleware, current_request_id

__all__ = [
    "REQUEST_ID_HEADER",
    "ClientDisconnectedError",
    "ReadinessCheck",
    "RequestIdMiddleware",
    "bind_log_context",
    "cancel_on_disconnect",
    "configure_logging",
    "current_request_id",
    "health_router",
    "install_error_handlers",
]
