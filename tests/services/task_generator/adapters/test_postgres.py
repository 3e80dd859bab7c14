"""Integration tests of the PostgreSQL adapter and the migrations (real PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from task_generator.adapters.migrate import upgrade_database
from task_generator.adapters.postgres import PostgresTaskRepository, make_engine

from ..factories import make_task

pytestmark = pytest.mark.integration


@pytest.fixture()
def repository(empty_database):
    engine = make_engine(empty_database, pool_size=2)
    yield PostgresTaskRepository(engine)
    engine.dispose()


def test_upgrade_database_empty_database_creates_tables_and_is_idempotent(fresh_database):
    engine = make_engine(fresh_database(extensions=()), pool_size=1)

    upgrade_database(engine)
    upgrade_database(engine)

    tables = set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM task_generator_alembic_version")).all()
    engine.dispose()
    assert {"tasks", "task_outcomes"} <= tables
    assert version == [("0001",)]


def test_register_tasks_more_than_one_chunk(repository):
    tasks = [make_task(i) for i in range(1200)]

    assert repository.register_tasks(tasks) == (1200, 0)
    assert repository.register_tasks(tasks) == (0, 1200)


def test_task_outcomes_window_returns_newest_groups_first(repository):
    repository.register_tasks([make_task(0), make_task(1)])
    for group in ([1.0], [2.0], [3.0]):
        repository.add_outcome("twx-coin/train/0", group, None)

    (outcomes,) = repository.task_outcomes(window=2)

    assert outcomes.task_id == "twx-coin/train/0"
    assert outcomes.recent_groups == [[3.0], [2.0]]
    assert outcomes.num_groups == 3


def test_add_outcome_unknown_task_writes_nothing(repository):
    assert repository.add_outcome("missing", [1.0], None) is False
    assert repository.task_outcomes(window=1) == []


def test_find_variations_matches_exact_instruction_and_observation(repository):
    task = make_task(0)
    repository.register_tasks([task])
    key = (task.environment, task.instruction, task.initial_observation)

    found = repository.find_variations([key, (task.environment, task.instruction, "other")])

    assert found == {key: task.task_id}


def test_generated_eval_task_is_refused_by_the_schema(repository):
    with (
        repository.engine.begin() as conn,
        pytest.raises(Exception, match="ck_tasks_generated_is_train"),
    ):
        conn.execute(
            text(
                "INSERT INTO tasks (task_id, environment, instruction, initial_observation, split, "
                "origin, content_hash) VALUES ('x', 'e', 'i', 'o', 'eval', 'generated', 'h')"
            )
        )
