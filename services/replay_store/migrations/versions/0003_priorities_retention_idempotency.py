"""Priorities, eviction counters and idempotency keys.

- ``trajectories.priority`` and ``transitions.priority`` (``DOUBLE PRECISION NOT NULL DEFAULT
  1.0``, > 0): the eviction priority of a trajectory (``REPLAY_STORE_EVICTION_POLICY=priority``)
  and the sampling priority of a transition (``strategy="prioritized"``);
- ``ix_trajectories_team_priority`` on ``(team, priority, created_at, trajectory_id)`` serves the
  eviction order "lowest priority, oldest first";
- ``replay_evictions``: per team, the number of trajectories and transitions evicted so far;
- ``idempotency_keys``: per ``(team, key)`` the request fingerprint and the stored response of
  a write sent with an ``Idempotency-Key`` header, until ``expires_at``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("trajectories", "transitions"):
        op.add_column(
            table,
            sa.Column("priority", sa.Double(), nullable=False, server_default=sa.text("1.0")),
        )
        op.create_check_constraint(f"ck_{table}_priority_positive", table, "priority > 0")
    op.create_index(
        "ix_trajectories_team_priority",
        "trajectories",
        ["team", "priority", "created_at", "trajectory_id"],
    )
    op.create_table(
        "replay_evictions",
        sa.Column("team", sa.Text(), primary_key=True),
        sa.Column("trajectories", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("transitions", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("team", sa.Text(), primary_key=True),
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),  # NULL while the write runs
        sa.Column("response", postgresql.JSONB(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_expires_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    op.drop_table("replay_evictions")
    op.drop_index("ix_trajectories_team_priority", table_name="trajectories")
    for table in ("transitions", "trajectories"):
        op.drop_constraint(f"ck_{table}_priority_positive", table, type_="check")
        op.drop_column(table, "priority")
