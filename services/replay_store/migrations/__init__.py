"""Alembic migrations of the replay store (shipped as ``replay_store.migrations``)."""
