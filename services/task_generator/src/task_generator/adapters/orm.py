"""SQLAlchemy ORM mapping of the task generator's tables (mirrors Alembic migrations ``0001-2``).

- ``tasks``: one row per task, keyed by ``(team, task_id)``. ``(team, parent_task_id)``
  references ``tasks`` with a DEFERRED foreign key, so a parent and its child may be registered
  in one request (and a parent is always a task of the same team); ``content_hash`` is the
  SHA-256 of the task's canonical JSON, used for idempotent registration.
- ``task_outcomes``: one row per reported rollout group (``rewards``: JSONB list of G floats) of
  a task of the same team.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKeyConstraint, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "TaskOutcomeRow", "TaskRow"]


class Base(DeclarativeBase):
    """Declarative base of the task generator's tables."""


class TaskRow(Base):
    """A row of ``tasks``."""

    __tablename__ = "tasks"
    __table_args__ = (
        ForeignKeyConstraint(
            ["team", "parent_task_id"],
            ["tasks.team", "tasks.task_id"],
            deferrable=True,
            initially="DEFERRED",
        ),
    )

    team: Mapped[str] = mapped_column(String(63), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    environment: Mapped[str] = mapped_column(Text)
    instruction: Mapped[str] = mapped_column(Text)
    initial_observation: Mapped[str] = mapped_column(Text)
    initial_admissible_actions: Mapped[list[str]] = mapped_column(JSONB)
    game_seed: Mapped[int | None] = mapped_column(BigInteger)
    split: Mapped[str] = mapped_column(String(16))
    origin: Mapped[str] = mapped_column(String(16))
    parent_task_id: Mapped[str | None] = mapped_column(String(200))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    content_hash: Mapped[str] = mapped_column(String(64))


class TaskOutcomeRow(Base):
    """A row of ``task_outcomes``: the rewards of one rollout group."""

    __tablename__ = "task_outcomes"
    __table_args__ = (ForeignKeyConstraint(["team", "task_id"], ["tasks.team", "tasks.task_id"]),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    team: Mapped[str] = mapped_column(String(63))
    task_id: Mapped[str] = mapped_column(String(200))
    rewards: Mapped[list[float]] = mapped_column(JSONB)
    policy_version: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
