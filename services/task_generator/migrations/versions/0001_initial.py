"""Initial schema: tasks (with lineage) and task_outcomes (one row per rollout group).

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("environment", sa.Text(), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=False),
        sa.Column("initial_observation", sa.Text(), nullable=False),
        sa.Column(
            "initial_admissible_actions",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'[]'::jsonb"),
        ),
        sa.Column("game_seed", sa.BigInteger(), nullable=True),
        sa.Column("split", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("parent_task_id", sa.String(200), nullable=True),
        sa.Column(
            "metadata", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.CheckConstraint("split IN ('train', 'eval')", name="ck_tasks_split"),
        sa.CheckConstraint("origin IN ('seed', 'generated')", name="ck_tasks_origin"),
        sa.CheckConstraint(
            "origin = 'seed' OR split = 'train'", name="ck_tasks_generated_is_train"
        ),
        sa.ForeignKeyConstraint(
            ["parent_task_id"],
            ["tasks.task_id"],
            name="fk_tasks_parent_task_id",
            deferrable=True,
            initially="DEFERRED",
        ),
    )
    op.create_index("ix_tasks_pool", "tasks", ["split", "origin", "environment", "task_id"])
    op.create_index("ix_tasks_parent_task_id", "tasks", ["parent_task_id"])
    op.create_index("ix_tasks_created_at", "tasks", ["created_at", "task_id"])
    # duplicate-variation lookups: (environment, instruction, initial_observation) equality
    op.execute(
        "CREATE INDEX ix_tasks_variation ON tasks "
        "(environment, md5(instruction), md5(initial_observation))"
    )
    op.create_table(
        "task_outcomes",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column(
            "task_id",
            sa.String(200),
            sa.ForeignKey("tasks.task_id", name="fk_task_outcomes_task_id"),
            nullable=False,
        ),
        sa.Column("rewards", postgresql.JSONB(), nullable=False),
        sa.Column("policy_version", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "jsonb_typeof(rewards) = 'array' AND jsonb_array_length(rewards) > 0",
            name="ck_task_outcomes_rewards_nonempty_array",
        ),
    )
    op.create_index("ix_task_outcomes_task_id_id", "task_outcomes", ["task_id", "id"])


def downgrade() -> None:
    op.drop_table("task_outcomes")
    op.drop_table("tasks")
