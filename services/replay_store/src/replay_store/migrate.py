"""``python -m replay_store.migrate``: migrate the replay store database to ``head``, then exit.

The one-shot migration step of a deployment: the ``migrate`` service of ``docker-compose.yml``
and the ``replay-store-migrate`` Kubernetes Job run it before the new replay store serves
traffic. The service itself also migrates on start; both go through
:func:`replay_store.adapters.migrate.upgrade_database`, which serialises concurrent runs with a
PostgreSQL advisory lock and leaves a database already at ``head`` unchanged, so running this
first is safe and makes a failing migration visible as a failed Job instead of a crash-looping
Deployment.

Reads ``REPLAY_STORE_DATABASE_URL`` and ``REPLAY_STORE_EMBEDDING_DIM`` (and the logging
settings) like the service (:class:`replay_store.settings.Settings`).

Exit status: 0 when the database is at ``head`` afterwards (the revision is logged); 1 when the
database is unreachable or a migration failed (the error is logged, nothing is half-applied: the
upgrade runs in one transaction); 2 when the settings are invalid.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from dreamgym.server import configure_logging
from replay_store.adapters.migrate import upgrade_database
from replay_store.settings import Settings

__all__ = ["current_revision", "main"]

logger = logging.getLogger("replay_store.migrate")

CONNECT_TIMEOUT_S = 10


def current_revision(engine: Engine) -> str | None:
    """The Alembic revision the database behind ``engine`` is at (None before any migration).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database is unreachable.
    """
    with engine.connect() as connection:
        exists = connection.execute(text("SELECT to_regclass('alembic_version')")).scalar()
        if exists is None:
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def main() -> int:
    """Migrate the configured database to ``head``; returns the process exit status."""
    try:
        settings = Settings()
    except ValidationError as exc:
        configure_logging("replay-store-migrate")
        logger.error("invalid REPLAY_STORE_* settings: %s", exc)
        return 2
    configure_logging("replay-store-migrate", settings.log_level, settings.json_logs)
    engine = create_engine(
        settings.database_url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )
    try:
        before = current_revision(engine)
        upgrade_database(engine, settings.embedding_dim)
        after = current_revision(engine)
    except SQLAlchemyError as exc:
        logger.error("replay store migration failed: %s: %s", type(exc).__name__, exc)
        return 1
    finally:
        engine.dispose()
    logger.info(
        "replay store database migrated",
        extra={"from_revision": before, "to_revision": after},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
