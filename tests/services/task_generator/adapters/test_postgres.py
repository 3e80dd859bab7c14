"""Integration tests of the PostgreSQL adapter and the migrations (real PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from task_generator.adapters.migrate import upgrade_database
from task_generator.adapters.postgres import PostgresTaskRepository, make_engine

from ..factories import make_task

pytestmark = pytest.mark.integration

TEAM = "lab-a"


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
    assert version == [(_head_revision(),)]


def _head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from task_generator.adapters.migrate import MIGRATIONS_DIR

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return str(ScriptDirectory.from_config(config).get_current_head())


def test_register_tasks_more_than_one_chunk(repository):
    tasks = [make_task(i) for i in range(1200)]

    assert repository.register_tasks(TEAM, tasks) == (1200, 0)
    assert repository.register_tasks(TEAM, tasks) == (0, 1200)
    assert repository.register_tasks("lab-b", tasks[:3]) == (3, 0)  # ids are per team


def test_task_outcomes_window_returns_newest_groups_first(repository):
    repository.register_tasks(TEAM, [make_task(0), make_task(1)])
    for group in ([1.0], [2.0], [3.0]):
        repository.add_outcome(TEAM, "twx-coin/train/0", group, None)

    (outcomes,) = repository.task_outcomes(TEAM, window=2)

    assert outcomes.task_id == "twx-coin/train/0"
    assert outcomes.recent_groups == [[3.0], [2.0]]
    assert outcomes.num_groups == 3


def test_add_outcome_unknown_task_writes_nothing(repository):
    assert repository.add_outcome(TEAM, "missing", [1.0], None) is False
    assert repository.task_outcomes(TEAM, window=1) == []


def test_find_variations_matches_exact_instruction_and_observation(repository):
    task = make_task(0)
    repository.register_tasks(TEAM, [task])
    key = (task.environment, task.instruction, task.initial_observation)

    found = repository.find_variations(TEAM, [key, (task.environment, task.instruction, "other")])

    assert found == {key: task.task_id}
    assert repository.find_variations("lab-b", [key]) == {}


def test_generated_eval_task_is_refused_by_the_schema(repository):
    with (
        repository.engine.begin() as conn,
        pytest.raises(Exception, match="ck_tasks_generated_is_train"),
    ):
        conn.execute(
            text(
                "INSERT INTO tasks (team, task_id, environment, instruction, initial_observation, "
                "split, origin, content_hash) "
                "VALUES ('a', 'x', 'e', 'i', 'o', 'eval', 'generated', 'h')"
            )
        )


def test_parent_must_be_a_task_of_the_same_team(repository):
    from dreamgym.errors import InvalidRequestError

    repository.register_tasks("lab-b", [make_task(0)])
    child = make_task(1, parent_task_id="twx-coin/train/0")

    with pytest.raises(InvalidRequestError, match="names no registered task"):
        repository.register_tasks(TEAM, [child])
    repository.register_tasks(TEAM, [make_task(0), child])

    assert repository.lineage(TEAM, child.task_id) == ["twx-coin/train/0"]
    assert repository.lineage("lab-b", "twx-coin/train/0") == []


def test_register_tasks_quota_counts_only_new_tasks_and_rolls_back(repository):
    from task_generator.domain.ports import QuotaReachedError

    repository.register_tasks(TEAM, [make_task(0), make_task(1)])

    with pytest.raises(QuotaReachedError) as info:
        repository.register_tasks(TEAM, [make_task(1), make_task(2), make_task(3)], max_tasks=3)
    fits = repository.register_tasks(TEAM, [make_task(1), make_task(2)], max_tasks=3)

    assert info.value.stored == 2
    assert fits == (1, 1)
    assert repository.count_tasks(TEAM) == 3 and repository.count_tasks("lab-b") == 0


def test_concurrent_registrations_of_one_team_never_exceed_the_quota(repository):
    from concurrent.futures import ThreadPoolExecutor

    from task_generator.domain.ports import QuotaReachedError

    def register(i: int) -> bool:
        try:
            repository.register_tasks(TEAM, [make_task(10 * i), make_task(10 * i + 1)], max_tasks=5)
            return True
        except QuotaReachedError:
            return False

    with ThreadPoolExecutor(max_workers=4) as pool:
        accepted = sum(pool.map(register, range(8)))

    assert accepted == 2
    assert repository.count_tasks(TEAM) == 4
