"""Alembic environment of the replay store.

Two ways in:

- programmatic (the service's lifespan): the caller puts an open SQLAlchemy ``connection`` and the
  ``embedding_dim`` in ``config.attributes`` and runs ``command.upgrade(config, "head")``;
- command line: ``alembic -c services/replay_store/alembic.ini upgrade head`` with the URL in
  ``REPLAY_STORE_DATABASE_URL`` (and optionally ``-x embedding_dim=N``).
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine

from replay_store.adapters.orm import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and "connection" not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run migrations on the caller's connection or on a fresh one from the environment."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = os.environ.get("REPLAY_STORE_DATABASE_URL")
    if not url:
        raise RuntimeError("set REPLAY_STORE_DATABASE_URL to the database to migrate")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
