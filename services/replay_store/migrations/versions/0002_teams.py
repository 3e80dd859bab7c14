"""Teams: every trajectory and transition belongs to a team; ids and idempotency keys per team.

- adds ``team`` (``TEXT NOT NULL``) to ``trajectories`` and ``transitions``; rows stored before
  this migration belong to team ``default`` (the team of a service without authentication);
- the trajectory key becomes ``(team, trajectory_id)`` and content hashes are unique per team, so
  two teams may store the same trajectory (same content-derived id) independently;
- transitions reference their trajectory by ``(team, trajectory_id)`` and are unique on
  ``(team, trajectory_id, step)``;
- the filter indexes lead with ``team``; ``(team, id)`` serves sampling and export.

Downgrading refuses to run while rows of a team other than ``default`` exist (their ids could
collide once the team is gone).

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
    for table in ("trajectories", "transitions"):
        op.add_column(
            table, sa.Column("team", sa.Text(), nullable=False, server_default=DEFAULT_TEAM)
        )
        # existing rows are backfilled; new rows must name their team explicitly
        op.alter_column(table, "team", server_default=None)
    op.drop_constraint("transitions_trajectory_id_fkey", "transitions", type_="foreignkey")
    op.drop_constraint("uq_transitions_trajectory_id_step", "transitions", type_="unique")
    op.drop_constraint("trajectories_content_hash_key", "trajectories", type_="unique")
    op.drop_constraint("trajectories_pkey", "trajectories", type_="primary")
    op.create_primary_key("trajectories_pkey", "trajectories", ["team", "trajectory_id"])
    op.create_unique_constraint(
        "uq_trajectories_team_content_hash", "trajectories", ["team", "content_hash"]
    )
    op.create_unique_constraint(
        "uq_transitions_team_trajectory_id_step", "transitions", ["team", "trajectory_id", "step"]
    )
    op.create_foreign_key(
        "fk_transitions_team_trajectory_id",
        "transitions",
        "trajectories",
        ["team", "trajectory_id"],
        ["team", "trajectory_id"],
        ondelete="CASCADE",
    )
    op.drop_index("ix_trajectories_environment_source", table_name="trajectories")
    op.drop_index("ix_trajectories_policy", table_name="trajectories")
    op.drop_index("ix_transitions_environment_source", table_name="transitions")
    op.create_index(
        "ix_trajectories_team_environment_source", "trajectories", ["team", "environment", "source"]
    )
    op.create_index("ix_trajectories_team_policy", "trajectories", ["team", "policy"])
    op.create_index(
        "ix_trajectories_team_created_at", "trajectories", ["team", "created_at", "trajectory_id"]
    )
    op.create_index(
        "ix_transitions_team_environment_source", "transitions", ["team", "environment", "source"]
    )
    op.create_index("ix_transitions_team_id", "transitions", ["team", "id"])


def downgrade() -> None:
    count = sa.text("SELECT count(*) FROM trajectories WHERE team <> :team")
    others = op.get_bind().execute(count, {"team": DEFAULT_TEAM}).scalar_one()
    if others:
        raise RuntimeError(
            f"cannot downgrade below 0002: {others} trajectories belong to teams other than "
            f"'{DEFAULT_TEAM}'; delete or export them first"
        )
    op.drop_index("ix_transitions_team_id", table_name="transitions")
    op.drop_index("ix_transitions_team_environment_source", table_name="transitions")
    op.drop_index("ix_trajectories_team_created_at", table_name="trajectories")
    op.drop_index("ix_trajectories_team_policy", table_name="trajectories")
    op.drop_index("ix_trajectories_team_environment_source", table_name="trajectories")
    op.create_index("ix_transitions_environment_source", "transitions", ["environment", "source"])
    op.create_index("ix_trajectories_policy", "trajectories", ["policy"])
    op.create_index("ix_trajectories_environment_source", "trajectories", ["environment", "source"])
    op.drop_constraint("fk_transitions_team_trajectory_id", "transitions", type_="foreignkey")
    op.drop_constraint("uq_transitions_team_trajectory_id_step", "transitions", type_="unique")
    op.drop_constraint("uq_trajectories_team_content_hash", "trajectories", type_="unique")
    op.drop_constraint("trajectories_pkey", "trajectories", type_="primary")
    op.create_primary_key("trajectories_pkey", "trajectories", ["trajectory_id"])
    op.create_unique_constraint("trajectories_content_hash_key", "trajectories", ["content_hash"])
    op.create_unique_constraint(
        "uq_transitions_trajectory_id_step", "transitions", ["trajectory_id", "step"]
    )
    op.create_foreign_key(
        "transitions_trajectory_id_fkey",
        "transitions",
        "trajectories",
        ["trajectory_id"],
        ["trajectory_id"],
        ondelete="CASCADE",
    )
    op.drop_column("transitions", "team")
    op.drop_column("trajectories", "team")
