"""Migration 0002 (teams) of the task generator between versions on a real PostgreSQL."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import text

from task_generator.adapters.migrate import MIGRATIONS_DIR
from task_generator.adapters.postgres import PostgresTaskRepository, make_engine

pytestmark = pytest.mark.integration


def _migrate(engine, revision: str, *, down: bool = False) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)


def test_upgrade_keeps_old_tasks_and_outcomes_as_team_default(fresh_database):
    engine = make_engine(fresh_database(extensions=()), pool_size=1)
    _migrate(engine, "0001")
    with engine.begin() as conn:
        for task_id, parent in (("root", None), ("child", "root")):
            conn.execute(
                text(
                    "INSERT INTO tasks (task_id, environment, instruction, initial_observation, "
                    "split, origin, parent_task_id, content_hash) "
                    "VALUES (:id, 'e', :instruction, 'o', 'train', 'seed', :parent, 'h')"
                ),
                {"id": task_id, "instruction": f"do {task_id}", "parent": parent},
            )
        conn.execute(text("INSERT INTO task_outcomes (task_id, rewards) VALUES ('root', '[1, 0]')"))

    _migrate(engine, "head")
    repository = PostgresTaskRepository(engine)
    (outcomes,) = repository.task_outcomes("default", window=1)

    assert repository.lineage("default", "child") == ["root"]
    assert outcomes.recent_groups == [[1.0, 0.0]]
    assert repository.get_tasks("lab-a", ["root"]) == []
    engine.dispose()


def test_downgrade_refuses_while_other_teams_have_tasks(fresh_database):
    engine = make_engine(fresh_database(extensions=()), pool_size=1)
    _migrate(engine, "head")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO tasks (team, task_id, environment, instruction, initial_observation, "
                "split, origin, content_hash) "
                "VALUES ('lab-a', 't', 'e', 'i', 'o', 'train', 'seed', 'h')"
            )
        )

    with pytest.raises(RuntimeError, match="1 tasks belong to teams other than"):
        _migrate(engine, "0001", down=True)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM tasks"))
    _migrate(engine, "0001", down=True)
    with engine.connect() as conn:
        columns = (
            conn.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'tasks'"
                )
            )
            .scalars()
            .all()
        )
    engine.dispose()

    assert "team" not in columns
