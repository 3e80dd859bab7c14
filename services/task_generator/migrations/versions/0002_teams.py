"""Teams: every task and outcome group belongs to a team; task ids are unique per team.

- adds ``team`` (``TEXT NOT NULL``) to ``tasks`` and ``task_outcomes``; rows stored before this
  migration belong to team ``default`` (the team of a service without authentication);
- the task key becomes ``(team, task_id)``; a parent must be a task of the same team
  (``(team, parent_task_id)`` references ``tasks``, still DEFERRED so a parent and its child may
  be registered together), and so must the task of an outcome group;
- the pool, creation-order, lineage, variation and outcome indexes lead with ``team``.

Downgrading refuses to run while rows of a team other than ``default`` exist.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_TEAM = "default"


def upgrade() -> None:
    for table in ("tasks", "task_outcomes"):
        op.add_column(
            table, sa.Column("team", sa.String(63), nullable=False, server_default=DEFAULT_TEAM)
        )
        # existing rows are backfilled; new rows must name their team explicitly
        op.alter_column(table, "team", server_default=None)
    op.drop_constraint("fk_task_outcomes_task_id", "task_outcomes", type_="foreignkey")
    op.drop_constraint("fk_tasks_parent_task_id", "tasks", type_="foreignkey")
    op.drop_constraint("tasks_pkey", "tasks", type_="primary")
    op.create_primary_key("tasks_pkey", "tasks", ["team", "task_id"])
    op.create_foreign_key(
        "fk_tasks_team_parent_task_id",
        "tasks",
        "tasks",
        ["team", "parent_task_id"],
        ["team", "task_id"],
        deferrable=True,
        initially="DEFERRED",
    )
    op.create_foreign_key(
        "fk_task_outcomes_team_task_id",
        "task_outcomes",
        "tasks",
        ["team", "task_id"],
        ["team", "task_id"],
    )
    for name in ("ix_tasks_pool", "ix_tasks_parent_task_id", "ix_tasks_created_at"):
        op.drop_index(name, table_name="tasks")
    op.execute("DROP INDEX ix_tasks_variation")
    op.drop_index("ix_task_outcomes_task_id_id", table_name="task_outcomes")
    op.create_index(
        "ix_tasks_team_pool", "tasks", ["team", "split", "origin", "environment", "task_id"]
    )
    op.create_index("ix_tasks_team_parent_task_id", "tasks", ["team", "parent_task_id"])
    op.create_index("ix_tasks_team_created_at", "tasks", ["team", "created_at", "task_id"])
    op.execute(
        "CREATE INDEX ix_tasks_team_variation ON tasks "
        "(team, environment, md5(instruction), md5(initial_observation))"
    )
    op.create_index("ix_task_outcomes_team_task_id_id", "task_outcomes", ["team", "task_id", "id"])


def downgrade() -> None:
    count = sa.text("SELECT count(*) FROM tasks WHERE team <> :team")
    others = op.get_bind().execute(count, {"team": DEFAULT_TEAM}).scalar_one()
    if others:
        raise RuntimeError(
            f"cannot downgrade below 0002: {others} tasks belong to teams other than "
            f"'{DEFAULT_TEAM}'; delete or export them first"
        )
    op.drop_index("ix_task_outcomes_team_task_id_id", table_name="task_outcomes")
    op.execute("DROP INDEX ix_tasks_team_variation")
    for name in ("ix_tasks_team_created_at", "ix_tasks_team_parent_task_id", "ix_tasks_team_pool"):
        op.drop_index(name, table_name="tasks")
    op.create_index("ix_task_outcomes_task_id_id", "task_outcomes", ["task_id", "id"])
    op.execute(
        "CREATE INDEX ix_tasks_variation ON tasks "
        "(environment, md5(instruction), md5(initial_observation))"
    )
    op.create_index("ix_tasks_created_at", "tasks", ["created_at", "task_id"])
    op.create_index("ix_tasks_parent_task_id", "tasks", ["parent_task_id"])
    op.create_index("ix_tasks_pool", "tasks", ["split", "origin", "environment", "task_id"])
    op.drop_constraint("fk_task_outcomes_team_task_id", "task_outcomes", type_="foreignkey")
    op.drop_constraint("fk_tasks_team_parent_task_id", "tasks", type_="foreignkey")
    op.drop_constraint("tasks_pkey", "tasks", type_="primary")
    op.create_primary_key("tasks_pkey", "tasks", ["task_id"])
    op.create_foreign_key(
        "fk_tasks_parent_task_id",
        "tasks",
        "tasks",
        ["parent_task_id"],
        ["task_id"],
        deferrable=True,
        initially="DEFERRED",
    )
    op.create_foreign_key(
        "fk_task_outcomes_task_id", "task_outcomes", "tasks", ["task_id"], ["task_id"]
    )
    op.drop_column("task_outcomes", "team")
    op.drop_column("tasks", "team")
