"""FastAPI helpers shared by every DreamGym service (optional extra ``dreamgym[server]``).

One error envelope, one exception-to-status mapping, request validation errors that name the
field, ``/healthz`` + ``/readyz`` routes and JSON logging. Services import these; they never import
each other.
"""

from dreamgym.server.errors import install_error_handlers
from dreamgym.server.health import ReadinessCheck, health_router
from dreamgym.server.logging import configure_logging

__all__ = ["ReadinessCheck", "configure_logging", "health_router", "install_error_handlers"]
