"""TextWorld adapter (dreamgym.envs.textworld_env) on games compiled offline by TextWorld."""

from __future__ import annotations

import random

import pytest

from dreamgym.envs import TextWorldEnv
from dreamgym.testing.checkers import check_real_env

from .helpers import play_expert, play_random

pytestmark = pytest.mark.envs

CHALLENGES = ("coin_collector", "cooking")


@pytest.mark.parametrize("challenge", CHALLENGES)
def test_check_real_env_textworld_challenge_passes(tw_env, challenge):
    env = tw_env(challenge)

    check_real_env(env, seed=0)


@pytest.mark.parametrize("challenge", CHALLENGES)
@pytest.mark.parametrize(("seed", "split"), [(0, "train"), (1, "train"), (1_000_000, "eval")])
def test_textworld_expert_wins_with_outcome_reward_on_last_step(tw_env, challenge, seed, split):
    env = tw_env(challenge)

    results = play_expert(env, seed, split)

    assert results[-1].won and results[-1].terminated and not results[-1].truncated
    assert [r.reward for r in results] == [0.0] * (len(results) - 1) + [1.0]
    assert len(results) <= 5


def test_textworld_random_policy_success_is_below_expert(tw_env):
    env = tw_env("coin_collector")
    rng = random.Random(0)
    episodes = [(seed, k) for seed in (0, 1) for k in range(5)]

    random_wins = sum(play_random(env, seed, rng) for seed, _ in episodes)
    expert_wins = sum(play_expert(env, seed)[-1].won for seed, _ in episodes)

    assert expert_wins == len(episodes)
    assert random_wins < expert_wins


@pytest.mark.parametrize("challenge", CHALLENGES)
def test_textworld_observation_has_no_interface_chrome(tw_env, challenge):
    env = tw_env(challenge)
    state, info = env.reset(seed=0)
    results = play_expert(env, seed=0)

    observations = [state.observation] + [r.state.observation for r in results]

    assert "$$" not in "".join(observations)
    for obs in observations:
        assert "-=" not in obs and ">" not in obs and "RESTART" not in obs
        assert "You are now playing" not in obs
    assert state.observation.startswith("You are in the ")
    assert "-=" in info["raw_observation"]


def test_textworld_coin_observation_mentions_coin_in_its_room(tw_env):
    env = tw_env("coin_collector")

    results = play_expert(env, seed=0)

    coin_room = results[-2].state
    assert "take coin" in coin_room.admissible_actions
    assert "coin" in coin_room.observation


def test_textworld_expert_actions_are_recomputed_after_a_deviation(tw_env):
    env = tw_env("coin_collector")
    env.reset(seed=0)
    first = env.expert_actions()[0]
    state = env.step(first).state
    plan = env.expert_actions()
    detour = next(a for a in state.admissible_actions if a.startswith("go ") and a != plan[0])

    env.step(detour)

    assert len(env.expert_actions()) == len(plan) + 1
    while True:
        result = env.step(env.expert_actions()[0])
        if result.terminated or result.truncated:
            break
    assert result.won and result.reward == 1.0


def test_textworld_game_is_built_once_into_the_documented_cache_layout(tw_cache_dir):
    env = TextWorldEnv("coin_collector", cache_dir=tw_cache_dir)
    path = env.game_path(0, "train")
    mtime = path.stat().st_mtime_ns

    again = TextWorldEnv("coin_collector", cache_dir=tw_cache_dir).game_path(0, "train")

    assert again == path and path.stat().st_mtime_ns == mtime
    assert path.relative_to(tw_cache_dir).parts == (
        "coin_collector",
        env.params_hash,
        "train-0.z8",
    )
    assert path.with_suffix(".json").is_file()


def test_textworld_params_hash_depends_on_params(tw_cache_dir):
    small = TextWorldEnv("coin_collector", cache_dir=tw_cache_dir)
    large = TextWorldEnv("coin_collector", cache_dir=tw_cache_dir, level=10)

    assert small.params_hash != large.params_hash
    assert large.params["level"] == 10


def test_textworld_same_seed_in_eval_split_builds_a_different_game(tw_env):
    env = tw_env("coin_collector")

    train_state, _ = env.reset(1, "train")
    train_plan = env.expert_actions()
    eval_state, _ = env.reset(1, "eval")
    eval_plan = env.expert_actions()

    assert (train_state.task, train_plan) != (eval_state.task, eval_plan)


@pytest.mark.parametrize("challenge", CHALLENGES)
def test_textworld_eval_games_differ_from_train_games(tw_env, challenge):
    env = tw_env(challenge)

    def signature(seed, split):
        state, _ = env.reset(seed, split)
        return state.observation, tuple(env.expert_actions())

    train = {signature(0, "train"), signature(1, "train")}

    assert signature(1_000_000, "eval") not in train


def test_textworld_step_before_reset_raises_runtime_error(tmp_path):
    env = TextWorldEnv("cooking", cache_dir=tmp_path)

    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")


def test_textworld_invalid_arguments_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="cooking"):
        TextWorldEnv("zork", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="recipe"):
        TextWorldEnv("cooking", cache_dir=tmp_path, recipes=2)
    with pytest.raises(ValueError, match="max_steps"):
        TextWorldEnv("cooking", cache_dir=tmp_path, max_steps=0)
    with pytest.raises(ValueError, match="split"):
        TextWorldEnv("cooking", cache_dir=tmp_path).game_path(0, "test")
    with pytest.raises(ValueError, match="seed"):
        TextWorldEnv("cooking", cache_dir=tmp_path).game_path(-1, "train")
