"""The key registry: teams and hashed API keys in PostgreSQL (SQLAlchemy 2).

Tables (created by :meth:`KeyRegistry.create_schema`, idempotent):

- ``teams``: ``name`` (primary key), ``created_at``;
- ``api_keys``: ``key_id`` (primary key, the public part of a key), ``team`` (→ ``teams``),
  ``key_hash`` (SHA-256 hex of the whole key; the plaintext is never stored), ``label``,
  ``created_at``, ``revoked_at`` (``NULL`` while the key is valid).

Every service reads the same registry (``DREAMGYM_AUTH_DATABASE_URL``); the ``dreamgym admin``
commands write it. Rotating a key is :meth:`KeyRegistry.create_key` then
:meth:`KeyRegistry.revoke_key` of the old one; a revoked key is refused (401) as soon as the
services' lookup caches expire (``<SERVICE>_AUTH_CACHE_TTL_S``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import ParamSpec, TypeVar

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    Engine,
    ForeignKey,
    Index,
    MetaData,
    Table,
    Text,
    create_engine,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError, OperationalError

from dreamgym.auth.keys import generate_key, parse_key, validate_team_name, verify_key
from dreamgym.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
)

__all__ = [
    "ApiKeyInfo",
    "AuthenticatedKey",
    "IssuedKey",
    "KeyRegistry",
    "TeamInfo",
    "metadata",
]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Constant key for pg_advisory_xact_lock: services starting together create the schema in turn.
_SCHEMA_LOCK_KEY = 0xA07_4E61_0001

metadata = MetaData()

teams_table = Table(
    "teams",
    metadata,
    Column("name", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

api_keys_table = Table(
    "api_keys",
    metadata,
    Column("key_id", Text, primary_key=True),
    Column("team", Text, ForeignKey("teams.name", ondelete="CASCADE"), nullable=False),
    Column("key_hash", Text, nullable=False),
    Column("label", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    CheckConstraint("length(key_hash) = 64", name="ck_api_keys_key_hash_sha256"),
    Index("ix_api_keys_team", "team"),
)


@dataclass(frozen=True)
class TeamInfo:
    """A team: its name and when it was created (UTC)."""

    name: str
    created_at: datetime


@dataclass(frozen=True)
class ApiKeyInfo:
    """What the registry knows about a key (never the key itself).

    Attributes:
        key_id: public id (the 16 hex characters after ``dg_`` in the key).
        team: the team the key belongs to.
        label: free text given at creation (who or what uses the key).
        created_at: creation time (UTC).
        revoked_at: revocation time, ``None`` while the key is valid.
    """

    key_id: str
    team: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        """True until the key is revoked."""
        return self.revoked_at is None


@dataclass(frozen=True)
class IssuedKey:
    """A key just created: its record and the plaintext, which is shown once and never stored."""

    info: ApiKeyInfo
    key: str


@dataclass(frozen=True)
class AuthenticatedKey:
    """The owner of a valid key: its team and key id."""

    team: str
    key_id: str


def _translate_db_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A lost or refused database connection becomes a 503 (never a 401 or a 500)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except OperationalError as exc:
            logger.warning("key registry unavailable: %s", exc.orig)
            raise BackendUnavailableError("key registry unavailable", retry_after_s=1.0) from None

    return wrapper


def _key_info(row: RowMapping) -> ApiKeyInfo:
    return ApiKeyInfo(
        key_id=row["key_id"],
        team=row["team"],
        label=row["label"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


class KeyRegistry:
    """Teams and API keys in a PostgreSQL database.

    Args:
        engine: engine of the registry database (see :meth:`from_url`).

    >>> registry = KeyRegistry.from_url("postgresql+psycopg://postgres@127.0.0.1/auth")
    >>> registry.create_schema(); registry.create_team("lab-a")  # doctest: +SKIP
    >>> issued = registry.create_key("lab-a")  # doctest: +SKIP
    >>> registry.authenticate(issued.key).team  # doctest: +SKIP
    'lab-a'
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, database_url: str, *, pool_size: int = 5) -> KeyRegistry:
        """A registry on a new pooled engine (``pool_pre_ping``, 5 s connect timeout)."""
        engine = create_engine(
            database_url,
            pool_size=pool_size,
            pool_pre_ping=True,
            connect_args={"connect_timeout": 5},
        )
        return cls(engine)

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.engine.dispose()

    @_translate_db_errors
    def ping(self) -> None:
        """Run ``SELECT 1``; raises :class:`BackendUnavailableError` when unreachable."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    @_translate_db_errors
    def create_schema(self) -> None:
        """Create the ``teams`` and ``api_keys`` tables when missing (serialised by a lock)."""
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
            metadata.create_all(conn, checkfirst=True)

    # -- teams ----------------------------------------------------------------------------------
    @_translate_db_errors
    def create_team(self, name: str, *, exist_ok: bool = False) -> TeamInfo:
        """Create a team.

        Raises:
            InvalidRequestError: the name is not a valid team name (param ``name``).
            ConflictError: the team exists and ``exist_ok`` is false.
        """
        try:
            validate_team_name(name)
        except ValueError as exc:
            raise InvalidRequestError(str(exc), param="name") from None
        stmt = (
            insert(teams_table)
            .values(name=name)
            .returning(teams_table.c.name, teams_table.c.created_at)
        )
        try:
            with self.engine.begin() as conn:
                row = conn.execute(stmt).mappings().one()
        except IntegrityError:
            if not exist_ok:
                raise ConflictError(f"team '{name}' already exists", param="name") from None
            return self.get_team(name)
        return TeamInfo(name=row["name"], created_at=row["created_at"])

    @_translate_db_errors
    def get_team(self, name: str) -> TeamInfo:
        """The team called ``name``.

        Raises:
            NotFoundError: no such team (param ``team``).
        """
        stmt = select(teams_table).where(teams_table.c.name == name)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().one_or_none()
        if row is None:
            raise NotFoundError(f"team '{name}' does not exist", param="team")
        return TeamInfo(name=row["name"], created_at=row["created_at"])

    @_translate_db_errors
    def list_teams(self) -> list[TeamInfo]:
        """All teams, by name."""
        stmt = select(teams_table).order_by(teams_table.c.name)
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [TeamInfo(name=r["name"], created_at=r["created_at"]) for r in rows]

    # -- keys -----------------------------------------------------------------------------------
    @_translate_db_errors
    def create_key(self, team: str, *, label: str | None = None) -> IssuedKey:
        """Create a key for ``team``; the returned plaintext is the only copy there will be.

        Raises:
            NotFoundError: ``team`` does not exist (param ``team``).
        """
        self.get_team(team)
        generated = generate_key()
        stmt = (
            insert(api_keys_table)
            .values(key_id=generated.key_id, team=team, key_hash=generated.key_hash, label=label)
            .returning(*api_keys_table.c)
        )
        try:
            with self.engine.begin() as conn:
                row = conn.execute(stmt).mappings().one()
        except IntegrityError:  # the team was deleted meanwhile
            raise NotFoundError(f"team '{team}' does not exist", param="team") from None
        return IssuedKey(info=_key_info(row), key=generated.key)

    @_translate_db_errors
    def list_keys(self, team: str, *, include_revoked: bool = True) -> list[ApiKeyInfo]:
        """The keys of ``team`` (never their secrets), oldest first.

        Raises:
            NotFoundError: ``team`` does not exist.
        """
        self.get_team(team)
        stmt = select(api_keys_table).where(api_keys_table.c.team == team)
        if not include_revoked:
            stmt = stmt.where(api_keys_table.c.revoked_at.is_(None))
        stmt = stmt.order_by(api_keys_table.c.created_at, api_keys_table.c.key_id)
        with self.engine.connect() as conn:
            return [_key_info(r) for r in conn.execute(stmt).mappings().all()]

    @_translate_db_errors
    def get_key(self, key_id: str) -> ApiKeyInfo:
        """The record of key ``key_id``.

        Raises:
            NotFoundError: no key has this id (param ``key_id``).
        """
        stmt = select(api_keys_table).where(api_keys_table.c.key_id == key_id)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().one_or_none()
        if row is None:
            raise NotFoundError(f"API key '{key_id}' does not exist", param="key_id")
        return _key_info(row)

    @_translate_db_errors
    def revoke_key(self, key_id: str) -> ApiKeyInfo:
        """Revoke a key (idempotent: revoking a revoked key keeps its first revocation time).

        Raises:
            NotFoundError: no key has this id (param ``key_id``).
        """
        stmt = (
            update(api_keys_table)
            .where(api_keys_table.c.key_id == key_id, api_keys_table.c.revoked_at.is_(None))
            .values(revoked_at=func.now())
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)
        return self.get_key(key_id)

    @_translate_db_errors
    def authenticate(self, key: str) -> AuthenticatedKey | None:
        """The team of a valid key; ``None`` for a malformed, unknown or revoked key.

        One indexed lookup by ``key_id``, then a constant-time compare of SHA-256 digests.
        """
        key_id = parse_key(key)
        if key_id is None:
            return None
        stmt = select(
            api_keys_table.c.team, api_keys_table.c.key_hash, api_keys_table.c.revoked_at
        ).where(api_keys_table.c.key_id == key_id)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().one_or_none()
        if row is None or not verify_key(key, row["key_hash"]) or row["revoked_at"] is not None:
            return None
        return AuthenticatedKey(team=row["team"], key_id=key_id)
