"""ExperienceModelVectorEnv against a live experience model: batching and autoreset semantics."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode

from dreamgym.clients import ExperienceModelClient
from dreamgym.errors import NotFoundError
from dreamgym.gym import ExperienceModelVectorEnv

from .conftest import GARBAGE, WIN, RecordingTransport, make_task

TASKS = [make_task(i) for i in range(4)]
BATCH = ("POST", "/v1/episodes:step")
RESET = ("POST", "/v1/episodes")


def test_each_vector_step_is_one_batch_request(
    client: ExperienceModelClient, transport: RecordingTransport
) -> None:
    envs = ExperienceModelVectorEnv(client, 4, tasks=TASKS)
    envs.reset(seed=0)
    transport.calls.clear()

    observations, rewards, terminated, truncated, _ = envs.step(["move north"] * 4)
    envs.step(["look"] * 4)

    assert transport.calls == [BATCH, BATCH]
    assert observations == ("You did move north.",) * 4
    assert rewards.dtype == np.float64 and not rewards.any()
    assert not terminated.any() and not truncated.any()


def test_next_step_autoreset_resets_finished_env_on_the_following_step(
    client: ExperienceModelClient, transport: RecordingTransport
) -> None:
    envs = ExperienceModelVectorEnv(client, 2)
    envs.reset(seed=0, options={"task": make_task(3)})
    first_episode = envs.episode_ids[0]

    _, rewards, terminated, _, _ = envs.step([WIN, "move north"])
    transport.calls.clear()
    observations, rewards2, terminated2, truncated2, infos2 = envs.step(["ignored", "look"])

    assert list(rewards) == [1.0, 0.0] and list(terminated) == [True, False]
    assert observations == ("You are in the kitchen of game 3.", "You did look.")
    assert list(rewards2) == [0.0, 0.0]
    assert not terminated2.any() and not truncated2.any()
    assert infos2["_episode_id"].tolist() == [True, False]
    assert envs.episode_ids[0] != first_episode
    assert transport.calls.count(RESET) == 1 and transport.calls.count(BATCH) == 1


def test_same_step_autoreset_reports_final_observation(client: ExperienceModelClient) -> None:
    envs = ExperienceModelVectorEnv(client, 2, tasks=TASKS, autoreset_mode=AutoresetMode.SAME_STEP)
    envs.reset(seed=0, options={"task": make_task(2)})

    observations, rewards, terminated, _, infos = envs.step([WIN, "move north"])

    assert observations[0] in {t.initial_observation for t in TASKS}
    assert observations[1] == "You did move north."
    assert list(terminated) == [True, False] and list(rewards) == [1.0, 0.0]
    assert infos["final_obs"][0] == "You won." and infos["_final_obs"].tolist() == [True, False]
    assert infos["final_info"]["won"][0]
    next_observations = envs.step(["move north", "look"])[0]
    assert next_observations == ("You did move north.", "You did look.")


def test_disabled_autoreset_requires_a_masked_reset(client: ExperienceModelClient) -> None:
    envs = ExperienceModelVectorEnv(client, 2, tasks=TASKS, autoreset_mode="Disabled")
    envs.reset(seed=0)
    envs.step([WIN, "move north"])
    kept = envs.episode_ids[1]

    with pytest.raises(ResetNeeded):
        envs.step(["look", "look"])
    envs.reset(options={"reset_mask": np.array([True, False])})

    assert envs.episode_ids[1] == kept
    assert envs.step(["look", "look"])[0] == ("You did look.", "You did look.")


def test_failed_item_is_truncated_with_error_and_others_advance(
    client: ExperienceModelClient,
) -> None:
    envs = ExperienceModelVectorEnv(client, 3, tasks=TASKS)
    initial, _ = envs.reset(seed=0)
    failed_episode = envs.episode_ids[1]

    observations, _, terminated, truncated, infos = envs.step(["look", GARBAGE, "look"])
    _, _, _, _, next_infos = envs.step(["look"] * 3)

    assert observations == ("You did look.", initial[1], "You did look.")
    assert truncated.tolist() == [False, True, False] and not terminated.any()
    assert infos["error"]["type"][1] == "malformed_transition"
    assert infos["_error"].tolist() == [False, True, False]
    assert next_infos["_episode_id"].tolist() == [False, True, False]  # autoreset
    assert envs.episode_ids[1] != failed_episode


def test_group_option_starts_every_env_in_the_same_state(client: ExperienceModelClient) -> None:
    envs = ExperienceModelVectorEnv(client, 4, tasks=TASKS)

    observations, infos = envs.reset(seed=5, options={"task": make_task(9)})
    per_env, _ = envs.reset(seed=5, options={"tasks": [make_task(i) for i in range(4)]})

    assert set(observations) == {"You are in the kitchen of game 9."}
    assert len(set(infos["episode_id"])) == 4
    assert per_env == tuple(f"You are in the kitchen of game {i}." for i in range(4))


def test_int_seed_reproduces_task_draws(client: ExperienceModelClient) -> None:
    envs = ExperienceModelVectorEnv(client, 4, tasks=TASKS)

    first = envs.reset(seed=11)[1]["task_id"].tolist()
    again = envs.reset(seed=11)[1]["task_id"].tolist()

    assert first == again


def test_close_frees_all_episodes(client: ExperienceModelClient) -> None:
    envs = ExperienceModelVectorEnv(client, 3, tasks=TASKS)
    envs.reset(seed=0)
    episode_ids = envs.episode_ids

    envs.close()

    for episode_id in episode_ids:
        with pytest.raises(NotFoundError):
            client.get(episode_id)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"seed": [1, 2]}, "expected 3 seeds"), ({"options": {"tasks": TASKS[:2]}}, "tasks")],
)
def test_reset_rejects_mismatched_lengths(
    client: ExperienceModelClient, kwargs: dict, message: str
) -> None:
    envs = ExperienceModelVectorEnv(client, 3, tasks=TASKS)

    with pytest.raises(ValueError, match=message):
        envs.reset(**kwargs)
