"""Deployment settings of the replay store (environment variables prefixed ``REPLAY_STORE_``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from dreamgym.server.auth import AuthSettings

__all__ = ["MINILM_DIM", "Settings", "get_settings"]

MINILM_DIM = 384


class Settings(AuthSettings):
    """Replay store settings (plus ``auth_enabled``, ``auth_database_url`` and
    ``auth_cache_ttl_s`` from :class:`~dreamgym.server.auth.AuthSettings`).

    Attributes:
        database_url: SQLAlchemy URL of the PostgreSQL database (pgvector must be installable).
        host: address uvicorn binds to.
        port: port uvicorn listens on.
        embedding_model: ``"minilm"`` (all-MiniLM-L6-v2, offline, 384-d) or ``"hash"``
            (deterministic feature hashing; for tests and smoke runs).
        embedding_dim: embedding width; fixed by the migration that creates the table, so it must
            match the database. Must be 384 for ``"minilm"``.
        log_level: root log level.
        json_logs: JSON-lines logs (else human-readable).
        max_k: largest ``k`` accepted by ``/v1/retrieve``.
        max_batch_trajectories: most trajectories per ingest request.
        hnsw_ef_search: HNSW candidate list size for unfiltered retrieval (pgvector
            ``hnsw.ef_search``, 1..1000); raised to ``k`` when smaller.
        db_pool_size: SQLAlchemy connection pool size.
        max_trajectories_per_team: most trajectories one team may store; an ingest that would
            exceed it is a 429 (unset: unlimited).
        quota_retry_after_s: ``Retry-After`` (seconds) of that 429.
        max_trajectories: retention: most trajectories one team's table keeps; an ingest evicts
            stored ones (with their transitions) beyond it, atomically (unset: keep everything).
        eviction_policy: ``fifo`` (oldest first) or ``priority`` (lowest trajectory priority
            first, ties oldest first).
        idempotency_ttl_s: how long (seconds) a write's ``Idempotency-Key`` and response are kept.
    """

    model_config = SettingsConfigDict(env_prefix="REPLAY_STORE_", env_file=".env", extra="ignore")

    # -- storage ------------------------------------------------------------------------------
    database_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/replay_store"
    db_pool_size: int = Field(default=10, ge=1, le=200)

    # -- server -------------------------------------------------------------------------------
    host: str = "0.0.0.0"
    port: int = Field(default=8002, ge=1, le=65535)
    log_level: str = "INFO"
    json_logs: bool = True

    # -- embeddings and retrieval -------------------------------------------------------------
    embedding_model: Literal["minilm", "hash"] = "minilm"
    embedding_dim: int = Field(default=MINILM_DIM, ge=8, le=16000)
    hnsw_ef_search: int = Field(default=200, ge=1, le=1000)

    # -- request limits -----------------------------------------------------------------------
    max_k: int = Field(default=50, ge=1, le=1000)
    max_batch_trajectories: int = Field(default=1000, ge=1, le=100_000)

    # -- per-team quotas ----------------------------------------------------------------------
    max_trajectories_per_team: int | None = Field(default=None, ge=1)
    quota_retry_after_s: float = Field(default=60.0, gt=0.0, le=86_400.0)

    # -- retention and idempotency ------------------------------------------------------------
    max_trajectories: int | None = Field(default=None, ge=1)
    eviction_policy: Literal["fifo", "priority"] = "fifo"
    idempotency_ttl_s: float = Field(default=86_400.0, gt=0.0, le=30 * 86_400.0)

    @model_validator(mode="after")
    def _check_embedding_dim(self) -> Settings:
        if self.embedding_model == "minilm" and self.embedding_dim != MINILM_DIM:
            raise ValueError(
                f"embedding_dim must be {MINILM_DIM} for embedding_model='minilm', "
                f"got {self.embedding_dim}"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read from the environment once per process (never at import time)."""
    return Settings()
