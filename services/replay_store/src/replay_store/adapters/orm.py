"""SQLAlchemy 2 typed ORM of the replay store tables (schema owned by ``migrations/``).

- ``trajectories``: one row per episode, keyed by ``(team, trajectory_id)``; ``content_hash`` is
  unique per team.
- ``transitions``: one row per step with its φ(s_t, a_t) embedding (pgvector), unique on
  ``(team, trajectory_id, step)``; team/environment/source/split/policy are copied from the
  trajectory so retrieval filters need no join. The embedding width is fixed by the migration;
  the ORM type is left unsized.

Every row belongs to a team (migration ``0002``); every query of the repository filters by it.

ORM rows never leave :mod:`replay_store.adapters`; they are converted to :mod:`dreamgym.types`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Double,
    ForeignKeyConstraint,
    Integer,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = ["Base", "EvictionCountRow", "IdempotencyKeyRow", "TrajectoryRow", "TransitionRow"]


class Base(DeclarativeBase):
    """Declarative base of the replay store tables."""


class TrajectoryRow(Base):
    """A stored trajectory (episode) and its provenance."""

    __tablename__ = "trajectories"
    __table_args__ = (UniqueConstraint("team", "content_hash"),)

    team: Mapped[str] = mapped_column(Text, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(Text, primary_key=True)
    content_hash: Mapped[str] = mapped_column(Text)
    task: Mapped[str] = mapped_column(Text)
    task_id: Mapped[str | None] = mapped_column(Text)
    environment: Mapped[str] = mapped_column(Text)
    game_seed: Mapped[int | None] = mapped_column(BigInteger)
    split: Mapped[str | None] = mapped_column(Text)
    policy: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)
    policy_version: Mapped[str | None] = mapped_column(Text)
    num_transitions: Mapped[int] = mapped_column(Integer)
    episode_return: Mapped[float] = mapped_column(Double)
    success: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    priority: Mapped[float] = mapped_column(Double, server_default="1.0")  # eviction (0003)

    transitions: Mapped[list[TransitionRow]] = relationship(
        back_populates="trajectory", order_by="TransitionRow.step", passive_deletes=True
    )


class TransitionRow(Base):
    """A stored transition with its retrieval embedding."""

    __tablename__ = "transitions"
    __table_args__ = (
        UniqueConstraint("team", "trajectory_id", "step"),
        ForeignKeyConstraint(
            ["team", "trajectory_id"],
            ["trajectories.team", "trajectories.trajectory_id"],
            ondelete="CASCADE",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    team: Mapped[str] = mapped_column(Text)
    trajectory_id: Mapped[str] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer)
    observation: Mapped[str] = mapped_column(Text)
    admissible_actions: Mapped[list[str]] = mapped_column(JSONB)
    action: Mapped[str] = mapped_column(Text)
    next_observation: Mapped[str] = mapped_column(Text)
    next_admissible_actions: Mapped[list[str]] = mapped_column(JSONB)
    reward: Mapped[float] = mapped_column(Double)
    terminated: Mapped[bool] = mapped_column(Boolean)
    truncated: Mapped[bool] = mapped_column(Boolean)
    won: Mapped[bool | None] = mapped_column(Boolean)
    reasoning: Mapped[str | None] = mapped_column(Text)
    environment: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)
    split: Mapped[str | None] = mapped_column(Text)
    policy: Mapped[str] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector(), deferred=True)  # never loaded by reads
    priority: Mapped[float] = mapped_column(Double, server_default="1.0")  # sampling (0003)

    trajectory: Mapped[TrajectoryRow] = relationship(back_populates="transitions")


class EvictionCountRow(Base):
    """Trajectories and transitions evicted so far by the retention policy, per team (0003)."""

    __tablename__ = "replay_evictions"

    team: Mapped[str] = mapped_column(Text, primary_key=True)
    trajectories: Mapped[int] = mapped_column(BigInteger, server_default="0")
    transitions: Mapped[int] = mapped_column(BigInteger, server_default="0")


class IdempotencyKeyRow(Base):
    """A write sent with an ``Idempotency-Key``: its fingerprint and stored response (0003)."""

    __tablename__ = "idempotency_keys"

    team: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(Text)
    status_code: Mapped[int | None] = mapped_column(Integer)
    response: Mapped[Any] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
