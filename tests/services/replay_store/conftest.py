"""Fixtures of the replay store tests: a trajectory factory and a started app on a real database.

API tests share one app and one new database per module (the app's lifespan migrates it from
empty); every test starts from empty tables, which keeps the suite fast on 2 CPU cores.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from dreamgym.types import Trajectory


def build_trajectory(
    *,
    task: str = "pick up the coin",
    actions: tuple[str, ...] = ("go north", "take coin"),
    observations: tuple[str, ...] | None = None,
    environment: str = "twx-coin",
    source: str = "real",
    policy: str = "expert",
    split: str | None = "train",
    game_seed: int | None = 0,
    won: bool = True,
    trajectory_id: str | None = None,
) -> Trajectory:
    """A valid chained trajectory with one transition per action (reward 1 on a won last step)."""
    if observations is None:
        observations = tuple(f"{task}: you are in room {i}." for i in range(len(actions) + 1))
    last = len(actions) - 1
    transitions = [
        {
            "step": i,
            "observation": observations[i],
            "admissible_actions": [action, "look"],
            "action": action,
            "next_observation": observations[i + 1],
            "next_admissible_actions": ["look"],
            "reward": 1.0 if (i == last and won) else 0.0,
            "terminated": i == last,
            "won": won if i == last else None,
        }
        for i, action in enumerate(actions)
    ]
    return Trajectory.model_validate(
        {
            "trajectory_id": trajectory_id,
            "task": task,
            "transitions": transitions,
            "provenance": {
                "environment": environment,
                "game_seed": game_seed,
                "split": split,
                "policy": policy,
                "source": source,
            },
        }
    )


def as_json(trajectory: Trajectory) -> dict[str, Any]:
    """Wire form of a trajectory (``None`` trajectory_id omitted)."""
    return trajectory.model_dump(mode="json", exclude_none=True)


@pytest.fixture()
def make_trajectory() -> Callable[..., Trajectory]:
    """The :func:`build_trajectory` factory."""
    return build_trajectory


@pytest.fixture(scope="module")
def replay_settings(postgres: Any) -> Iterator[Any]:
    """Settings for an app on a new database (one per test module) with the hash embedder.

    The database is created *without* pgvector, so starting the app also proves the migration
    installs the extension itself.
    """
    from replay_store.settings import Settings

    name = f"rs_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    yield Settings(
        database_url=postgres.url(name),
        embedding_model="hash",
        embedding_dim=384,
        json_logs=False,
        log_level="WARNING",
        max_k=20,
        max_batch_trajectories=50,
    )
    postgres.drop_database(name)


@pytest.fixture(scope="module")
def started_client(replay_settings: Any) -> Iterator[TestClient]:
    """The app started once per module (lifespan ran: migrations applied, embedder built)."""
    from replay_store.main import create_app

    with TestClient(create_app(replay_settings)) as test_client:
        yield test_client


@pytest.fixture()
def client(started_client: TestClient) -> TestClient:
    """The started app with empty tables (truncated before each test, ids restart at 1)."""
    engine = started_client.app.state.repository.engine
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE trajectories, transitions RESTART IDENTITY CASCADE"))
    return started_client


@pytest.fixture()
def ingest(client: TestClient) -> Callable[..., list[str]]:
    """POST trajectories and return their stored ids (asserts 200)."""

    def post(*trajectories: Trajectory) -> list[str]:
        response = client.post(
            "/v1/trajectories", json={"trajectories": [as_json(t) for t in trajectories]}
        )
        assert response.status_code == 200, response.text
        return list(response.json()["trajectory_ids"])

    return post
