"""Migration 0002 (teams) between versions on a real PostgreSQL: rows stored before it belong to
team ``default``; downgrading refuses while other teams' rows exist."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from replay_store.adapters.migrate import MIGRATIONS_DIR

pytestmark = pytest.mark.integration

_VECTOR = "[" + ",".join(["0.25"] * 16) + "]"


def _migrate(engine, revision: str, *, down: bool = False) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["embedding_dim"] = 16
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)


def _insert_trajectory(conn, trajectory_id: str, team: str | None = None) -> None:
    team_column, team_value = ("team, ", ":team, ") if team else ("", "")
    conn.execute(
        text(
            f"INSERT INTO trajectories ({team_column}trajectory_id, content_hash, task, "
            "environment, policy, source, num_transitions, episode_return, success) "
            f"VALUES ({team_value}:id, :id, 'task', 'env', 'expert', 'real', 1, 1.0, true)"
        ),
        {"id": trajectory_id, "team": team},
    )
    conn.execute(
        text(
            f"INSERT INTO transitions ({team_column}trajectory_id, step, observation, "
            "admissible_actions, action, next_observation, next_admissible_actions, reward, "
            "terminated, truncated, environment, source, policy, embedding) "
            f"VALUES ({team_value}:id, 0, 'o', '[]', 'a', 'o2', '[]', 1.0, true, false, 'env', "
            "'real', 'expert', :vector)"
        ),
        {"id": trajectory_id, "team": team, "vector": _VECTOR},
    )


def test_upgrade_keeps_old_rows_as_team_default_and_allows_same_id_per_team(fresh_database):
    engine = create_engine(fresh_database())
    _migrate(engine, "0001")
    with engine.begin() as conn:
        _insert_trajectory(conn, "ep-1")

    _migrate(engine, "head")
    with engine.begin() as conn:
        _insert_trajectory(conn, "ep-1", team="lab-a")  # same id, other team: allowed
        teams = conn.execute(
            text("SELECT team, count(*) FROM transitions GROUP BY team ORDER BY team")
        ).all()
        default = conn.execute(
            text(
                "SELECT column_default FROM information_schema.columns "
                "WHERE table_name = 'trajectories' AND column_name = 'team'"
            )
        )
        column_default = default.scalar_one()
    engine.dispose()

    assert teams == [("default", 1), ("lab-a", 1)]
    assert column_default is None  # new rows must name their team


def test_downgrade_refuses_while_other_teams_have_rows_then_succeeds(fresh_database):
    engine = create_engine(fresh_database())
    _migrate(engine, "head")
    with engine.begin() as conn:
        _insert_trajectory(conn, "ep-1", team="default")
        _insert_trajectory(conn, "ep-2", team="lab-a")

    with pytest.raises(RuntimeError, match="1 trajectories belong to teams other than"):
        _migrate(engine, "0001", down=True)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM trajectories WHERE team = 'lab-a'"))
    _migrate(engine, "0001", down=True)
    with engine.connect() as conn:
        columns = (
            conn.execute(
                text(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'transitions'"
                )
            )
            .scalars()
            .all()
        )
        kept = conn.execute(text("SELECT trajectory_id FROM transitions")).scalars().all()
    engine.dispose()

    assert "team" not in columns and kept == ["ep-1"]
