"""Adapters: PostgreSQL storage, Alembic migrations and LLM backend construction."""
