"""Run the Alembic migrations programmatically (``upgrade head``) on service start."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

import replay_store.migrations

__all__ = ["MIGRATIONS_DIR", "upgrade_database"]

MIGRATIONS_DIR = Path(replay_store.migrations.__file__).resolve().parent

# Constant key for pg_advisory_xact_lock: replicas starting together migrate one at a time.
_MIGRATION_LOCK_KEY = 0x5E_91A7_0001


def upgrade_database(engine: Engine, embedding_dim: int) -> None:
    """Migrate the database behind ``engine`` to ``head`` in one transaction.

    A transaction-scoped advisory lock serialises concurrent starts; a database already at head
    is left unchanged.

    Args:
        engine: engine of the target database.
        embedding_dim: width D of ``transitions.embedding`` when the table is created.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database is unreachable or a migration failed (the
            transaction is rolled back).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["embedding_dim"] = embedding_dim
    with engine.begin() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
