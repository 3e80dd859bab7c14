"""Adapters: PostgreSQL + pgvector storage and the embedding models."""
