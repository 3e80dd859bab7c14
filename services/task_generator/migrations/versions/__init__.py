"""Alembic revisions of the task generator."""
