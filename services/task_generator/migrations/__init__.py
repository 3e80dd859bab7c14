"""Alembic migrations of the task generator (shipped as ``task_generator.migrations``)."""
