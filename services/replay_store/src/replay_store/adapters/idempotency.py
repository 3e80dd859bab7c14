"""PostgreSQL store of idempotency keys (table ``idempotency_keys``, migration 0003)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from replay_store.adapters.orm import IdempotencyKeyRow
from replay_store.domain.errors import IdempotencyKeyInUseError, IdempotencyKeyReusedError

__all__ = ["PostgresIdempotencyStore", "StoredResponse"]

_PENDING_S = 60.0  # a reservation whose write never completed frees the key after this long


@dataclass(frozen=True)
class StoredResponse:
    """The response of the first request with a key."""

    status_code: int
    body: Any


def _after(seconds: float) -> Any:
    return func.now() + text(f"interval '{float(seconds):.3f} seconds'")


class PostgresIdempotencyStore:
    """Reserve, complete and replay idempotency keys per team.

    Args:
        engine: engine on a database migrated to 0003 or later.
        ttl_s: how long a completed key and its response are kept (seconds).
    """

    def __init__(self, engine: Engine, *, ttl_s: float = 86_400.0) -> None:
        self.engine = engine
        self.ttl_s = ttl_s

    def begin(self, team: str, key: str, fingerprint: str) -> StoredResponse | None:
        """Reserve ``(team, key)`` for a new write, or return the response stored for it.

        Expired keys of the team are purged first.

        Returns:
            ``None`` when the caller must perform the write (then :meth:`complete` or
            :meth:`abandon`), else the stored response of the first request.

        Raises:
            IdempotencyKeyReusedError: the key was used with another fingerprint (422).
            IdempotencyKeyInUseError: the first request with the key is still running (409).
        """
        row = IdempotencyKeyRow
        with self.engine.begin() as conn:
            conn.execute(delete(row).where(row.team == team, row.expires_at < func.now()))
            reserved = conn.execute(
                pg_insert(row)
                .values(team=team, key=key, fingerprint=fingerprint, expires_at=_after(_PENDING_S))
                .on_conflict_do_nothing(index_elements=[row.team, row.key])
                .returning(row.key)
            ).first()
            if reserved is not None:
                return None
            stored = conn.execute(
                select(row.fingerprint, row.status_code, row.response).where(
                    row.team == team, row.key == key
                )
            ).one()
        if stored.fingerprint != fingerprint:
            raise IdempotencyKeyReusedError(key)
        if stored.status_code is None:
            raise IdempotencyKeyInUseError(key)
        return StoredResponse(stored.status_code, stored.response)

    def complete(self, team: str, key: str, status_code: int, body: Any) -> None:
        """Store the response of the write reserved under ``(team, key)`` for ``ttl_s``."""
        row = IdempotencyKeyRow
        with self.engine.begin() as conn:
            conn.execute(
                update(row)
                .where(row.team == team, row.key == key)
                .values(status_code=status_code, response=body, expires_at=_after(self.ttl_s))
            )

    def abandon(self, team: str, key: str) -> None:
        """Free ``(team, key)`` after its write failed (a retry with the key runs again)."""
        row = IdempotencyKeyRow
        with self.engine.begin() as conn:
            conn.execute(
                delete(row).where(row.team == team, row.key == key, row.status_code.is_(None))
            )
