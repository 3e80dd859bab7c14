"""Run the Alembic migrations programmatically (``upgrade head``) on service start."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

import task_generator.migrations

__all__ = ["MIGRATIONS_DIR", "upgrade_database"]

MIGRATIONS_DIR = Path(task_generator.migrations.__file__).resolve().parent

# Arbitrary constant key for pg_advisory_xact_lock: replicas starting together migrate in turn.
_MIGRATION_LOCK_KEY = 0x7A5C_6E4E_0001


def upgrade_database(engine: Engine) -> None:
    """Migrate the database behind ``engine`` to ``head`` in one transaction.

    A transaction-scoped advisory lock serialises concurrent starts; a database already at head
    is left unchanged.

    Args:
        engine: engine of the target database.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database is unreachable or a migration failed (the
            transaction is rolled back).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
