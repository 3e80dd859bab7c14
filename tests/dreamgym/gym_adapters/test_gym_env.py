"""ExperienceModelEnv against a live experience model: Gymnasium's checker and the env contract."""

from __future__ import annotations

import warnings

import gymnasium
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

from dreamgym.clients import ExperienceModelClient
from dreamgym.errors import DreamGymError, NotFoundError
from dreamgym.gym import ExperienceModelEnv

from .conftest import GARBAGE, WIN, make_task

TASKS = [make_task(i) for i in range(4)]


def test_check_env_passes_without_warnings(em_url: str) -> None:
    env = gymnasium.make("dreamgym/ExperienceModel-v0", client=em_url, tasks=TASKS)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)

    env.close()


def test_reset_returns_task_observation_and_admissible_actions(
    client: ExperienceModelClient,
) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)

    observation, info = env.reset(seed=0, options={"task": make_task(7)})

    assert observation == "You are in the kitchen of game 7."
    assert info["task_id"] == "twx-coin/train/7"
    assert info["task"]["instruction"] == "Find the coin in game 7."
    assert info["admissible_actions"] == ["move north", WIN]
    assert info["episode_id"] == env.episode_id
    assert observation in env.observation_space


def test_seeded_reset_draws_the_same_task(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)

    first = [env.reset(seed=s)[1]["task_id"] for s in range(8)]
    again = [env.reset(seed=s)[1]["task_id"] for s in range(8)]

    assert first == again
    assert len(set(first)) > 1


def test_step_returns_gymnasium_tuple_with_reasoning(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)
    env.reset(seed=1)

    observation, reward, terminated, truncated, info = env.step("move north")
    final = env.step(WIN)

    assert (observation, reward, terminated, truncated) == (
        "You did move north.",
        0.0,
        False,
        False,
    )
    assert info == {
        "admissible_actions": ["move south", WIN],
        "reasoning": "",
        "won": False,
        "step": 1,
    }
    assert final[1:4] == (1.0, True, False)
    assert final[4]["reasoning"] == "the coin is taken"
    assert final[4]["won"] is True


def test_step_limit_truncates(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS, max_steps=2)
    env.reset(seed=0)

    flags = [env.step("wait")[2:4] for _ in range(2)]

    assert flags == [(False, False), (False, True)]


def test_step_after_end_or_before_reset_needs_reset(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)
    with pytest.raises(ResetNeeded):
        env.step("wait")
    env.reset(seed=0)
    env.step(WIN)

    with pytest.raises(ResetNeeded):
        env.step("wait")


def test_malformed_transition_raises_and_keeps_the_episode(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)
    env.reset(seed=0)

    with pytest.raises(DreamGymError) as info:
        env.step(GARBAGE)

    assert info.value.error_type == "malformed_transition"
    assert env.step("move north")[0] == "You did move north."


def test_reset_closes_the_previous_episode_and_close_frees_the_last(
    client: ExperienceModelClient,
) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS)
    first = env.reset(seed=0)[1]["episode_id"]
    second = env.reset(seed=1)[1]["episode_id"]

    env.close()
    env.close()

    for episode_id in (first, second):
        with pytest.raises(NotFoundError):
            client.get(episode_id)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"colour": "red"}, "unknown reset option"), (None, "no task")],
)
def test_reset_rejects_bad_options(
    client: ExperienceModelClient, options: dict | None, message: str
) -> None:
    env = ExperienceModelEnv(client)

    with pytest.raises(ValueError, match=message):
        env.reset(options=options)


def test_ansi_render_shows_observation_and_actions(client: ExperienceModelClient) -> None:
    env = ExperienceModelEnv(client, tasks=TASKS[:1], render_mode="ansi")
    env.reset(seed=0)

    assert env.render() == "You are in the kitchen of game 0.\nActions: move north | take coin\n"
