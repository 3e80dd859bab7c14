"""Initial schema: trajectories, transitions with pgvector embeddings, HNSW index.

The embedding width D comes from ``config.attributes["embedding_dim"]`` (set by the service from
``REPLAY_STORE_EMBEDDING_DIM``) or ``-x embedding_dim=N`` on the command line; default 384.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_EMBEDDING_DIM = 384


def _embedding_dim() -> int:
    config = context.config
    value = config.attributes.get("embedding_dim") or context.get_x_argument(
        as_dictionary=True
    ).get("embedding_dim", DEFAULT_EMBEDDING_DIM)
    return int(value)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "trajectories",
        sa.Column("trajectory_id", sa.Text(), primary_key=True),
        sa.Column("content_hash", sa.Text(), nullable=False, unique=True),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=True),
        sa.Column("environment", sa.Text(), nullable=False),
        sa.Column("game_seed", sa.BigInteger(), nullable=True),
        sa.Column("split", sa.Text(), nullable=True),
        sa.Column("policy", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("policy_version", sa.Text(), nullable=True),
        sa.Column("num_transitions", sa.Integer(), nullable=False),
        sa.Column("episode_return", sa.Double(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
        sa.CheckConstraint("source IN ('real', 'synthetic')", name="ck_trajectories_source"),
        sa.CheckConstraint("split IN ('train', 'eval')", name="ck_trajectories_split"),
    )
    op.create_index("ix_trajectories_environment_source", "trajectories", ["environment", "source"])
    op.create_index("ix_trajectories_policy", "trajectories", ["policy"])
    op.create_table(
        "transitions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column(
            "trajectory_id",
            sa.Text(),
            sa.ForeignKey("trajectories.trajectory_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("observation", sa.Text(), nullable=False),
        sa.Column("admissible_actions", postgresql.JSONB(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("next_observation", sa.Text(), nullable=False),
        sa.Column("next_admissible_actions", postgresql.JSONB(), nullable=False),
        sa.Column("reward", sa.Double(), nullable=False),
        sa.Column("terminated", sa.Boolean(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("won", sa.Boolean(), nullable=True),
        sa.Column("reasoning", sa.Text(), nullable=True),
        sa.Column("environment", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("split", sa.Text(), nullable=True),
        sa.Column("policy", sa.Text(), nullable=False),
        sa.Column("embedding", Vector(_embedding_dim()), nullable=False),
        sa.UniqueConstraint("trajectory_id", "step", name="uq_transitions_trajectory_id_step"),
    )
    op.create_index("ix_transitions_environment_source", "transitions", ["environment", "source"])
    op.create_index(
        "ix_transitions_embedding_hnsw",
        "transitions",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    op.drop_table("transitions")
    op.drop_table("trajectories")
