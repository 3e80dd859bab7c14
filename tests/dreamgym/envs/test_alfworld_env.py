"""ALFWorld adapters (dreamgym.envs.alfworld_env) on ALFWorld's real engine.

Generated games (PDDL problems written from seeds) and the official-data adapter on a small
directory in ALFWorld's official ``json_2.1.1`` layout, written here by the generator.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dreamgym.envs import AlfWorldDataEnv, AlfWorldEnv, make_env
from dreamgym.envs.accounting import real_steps_total
from dreamgym.envs.alfworld_env import (
    TASK_TYPES,
    generate_scene,
    list_official_games,
    scene_problem,
    scene_traj_data,
    split_of_scene,
    write_game,
)
from dreamgym.testing.checkers import check_real_env

from .helpers import play_expert, play_random

pytestmark = pytest.mark.envs

TASKS = tuple(TASK_TYPES)


# --------------------------------------------------------------------------- generator (pure)


@pytest.mark.parametrize("task", TASKS)
def test_generate_scene_is_deterministic_and_lands_in_its_split(task):
    for split, seed in (("train", 3), ("eval", 1_000_003)):
        scene = generate_scene(task, split, seed)

        assert scene == generate_scene(task, split, seed)
        assert split_of_scene(scene) == split


@pytest.mark.parametrize("task", TASKS)
def test_generated_train_and_eval_scenes_are_disjoint(task):
    train = {generate_scene(task, "train", s) for s in range(40)}
    held_out = {generate_scene(task, "eval", s) for s in range(1_000_000, 1_000_040)}

    assert train.isdisjoint(held_out)
    assert len(train) == 40 and len(held_out) == 40


@pytest.mark.parametrize("task", TASKS)
def test_generated_goal_is_not_satisfied_at_the_start(task):
    for seed in range(30):
        scene = generate_scene(task, "train", seed)
        starts = {scene.receptacles[where] for kind, where in scene.objects}
        target_starts = {
            scene.receptacles[where] for kind, where in scene.objects if kind == scene.target_object
        }

        assert scene.target_receptacle not in target_starts
        assert scene.target_receptacle in scene.receptacles and starts <= set(scene.receptacles)


def test_scene_problem_declares_alfred_facts_and_the_library_goal():
    scene = generate_scene("heat", "train", 0)

    problem = scene_problem(scene)

    assert problem.startswith("(define (problem") and "(:domain alfred)" in problem
    assert f"(objectType ?o {scene.target_object}Type)" in problem
    assert f"(receptacleType ?r {scene.target_receptacle}Type)" in problem
    assert "(isHot ?o)" in problem and "MicrowaveType - rtype" in problem
    assert f"(canContain {scene.target_receptacle}Type {scene.target_object}Type)" in problem
    assert problem.count("(") == problem.count(")")
    assert scene_traj_data(scene)["task_type"] == "pick_heat_then_place_in_recep"


# --------------------------------------------------------------------------- generated games


@pytest.mark.parametrize("task", TASKS)
def test_check_real_env_alfworld_task_passes(alfworld_env, task):
    check_real_env(alfworld_env(task), seed=0)


@pytest.mark.parametrize("task", ["pick", "cool"])
@pytest.mark.parametrize(("seed", "split"), [(1, "train"), (1_000_000, "eval")])
def test_alfworld_expert_wins_with_outcome_reward_on_last_step(alfworld_env, task, seed, split):
    results = play_expert(alfworld_env(task), seed, split)

    assert results[-1].won and results[-1].terminated and not results[-1].truncated
    assert [r.reward for r in results] == [0.0] * (len(results) - 1) + [1.0]
    assert len(results) <= 8


def test_alfworld_observation_and_task_are_split_at_reset(alfworld_env):
    state, info = alfworld_env("pick").reset(0)

    assert "Welcome to TextWorld" in info["raw_observation"]
    assert "Welcome" not in state.observation and "Your task is to" not in state.observation
    assert state.observation.startswith("You are in the middle of a room.")
    assert state.task.startswith("put ") and state.task.endswith(".")
    assert "help" not in state.admissible_actions and "look" in state.admissible_actions
    assert all(a.startswith(("go to", "inventory", "look")) for a in state.admissible_actions)


def test_alfworld_random_policy_success_is_below_expert(alfworld_env):
    env = alfworld_env("pick")
    rng = random.Random(0)
    seeds = range(3)

    random_wins = sum(play_random(env, seed, rng) for seed in seeds)
    expert_wins = sum(play_expert(env, seed)[-1].won for seed in seeds)

    assert expert_wins == len(seeds)
    assert random_wins < expert_wins


def test_alfworld_expert_replans_after_a_detour(alfworld_env):
    env = alfworld_env("pick")
    state, _ = env.reset(2)
    plan = env.expert_actions()
    detour = next(a for a in state.admissible_actions if a.startswith("go to") and a != plan[0])

    env.step(detour)

    assert env.expert_actions() and env.expert_actions()[0] != detour
    while True:
        result = env.step(env.expert_actions()[0])
        if result.terminated or result.truncated:
            break
    assert result.won


def test_alfworld_game_is_written_once_in_the_official_layout(alfworld_cache_dir):
    env = AlfWorldEnv("clean", cache_dir=alfworld_cache_dir)
    path = env.game_path(5, "train")
    mtime = path.stat().st_mtime_ns

    again = AlfWorldEnv("clean", cache_dir=alfworld_cache_dir).game_path(5, "train")

    assert again == path and path.stat().st_mtime_ns == mtime
    assert path.relative_to(alfworld_cache_dir).parts == (
        "clean",
        env.params_hash,
        "train-5",
        "game.tw-pddl",
    )
    assert {p.name for p in path.parent.iterdir()} == {
        "game.tw-pddl",
        "initial_state.pddl",
        "traj_data.json",
    }
    game = json.loads(path.read_text())
    assert game["solvable"] is True and "UNKNOWN GOAL" not in game["grammar"]


def test_alfworld_counts_real_steps_not_resets(alfworld_cache_dir):
    with AlfWorldEnv("pick", cache_dir=alfworld_cache_dir) as env:
        before = real_steps_total()
        env.reset(0)
        env.step("look")
        env.reset(1)
        env.step("inventory")
        env.step("look")

        assert env.num_steps_total == 3
        assert real_steps_total() - before == 3


def test_alfworld_truncates_at_max_steps_and_raises_after(alfworld_cache_dir):
    with AlfWorldEnv("pick", cache_dir=alfworld_cache_dir, max_steps=2) as env:
        env.reset(0)

        results = [env.step("look") for _ in range(2)]

        assert [r.truncated for r in results] == [False, True]
        with pytest.raises(RuntimeError, match="ended"):
            env.step("look")


def test_alfworld_invalid_arguments_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="pick"):
        AlfWorldEnv("slice", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="max_steps"):
        AlfWorldEnv("pick", cache_dir=tmp_path, max_steps=0)
    with pytest.raises(ValueError, match="split"):
        AlfWorldEnv("pick", cache_dir=tmp_path).game_path(0, "test")
    with pytest.raises(RuntimeError, match="reset"):
        AlfWorldEnv("pick", cache_dir=tmp_path).step("look")


# --------------------------------------------------------------------------- official data


def _write_trial(root, folder, task, seed, *, shipped=False, solvable=True):
    """One trial folder in ALFWorld's layout; a shipped game.tw-pddl only if ``shipped``."""
    scene = generate_scene(task, "train", seed)
    trial = root / "json_2.1.1" / folder / f"{scene_traj_data(scene)['task_type']}-{seed}"
    trial = trial / "trial_T20190001_000000_000000"
    write_game(trial, scene_problem(scene), scene_traj_data(scene), scene.description)
    if shipped:
        game = json.loads((trial / "game.tw-pddl").read_text())
        (trial / "game.tw-pddl").write_text(json.dumps({**game, "solvable": solvable}))
    else:
        (trial / "game.tw-pddl").unlink()
    return trial


@pytest.fixture(scope="module")
def official_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld-data")
    _write_trial(root, "train", "pick", 0)
    _write_trial(root, "train", "heat", 1, shipped=True)
    _write_trial(root, "train", "cool", 2, shipped=True, solvable=False)
    movable = _write_trial(root, "train", "pick", 3)
    movable.parent.rename(movable.parent.with_name(movable.parent.name + "-movable"))
    _write_trial(root, "valid_unseen", "clean", 4)
    _write_trial(root, "valid_seen", "pick", 5, shipped=True)
    return root


def test_list_official_games_skips_unsolvable_movable_and_filtered(official_data):
    train = list_official_games(official_data, "train")
    heat_only = list_official_games(official_data, "train", ["pick_heat_then_place_in_recep"])

    assert [p.parent.name for p in train] == [
        "pick_and_place_simple-0",
        "pick_heat_then_place_in_recep-1",
    ]
    assert [p.parent.name for p in heat_only] == ["pick_heat_then_place_in_recep-1"]
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA"):
        list_official_games(official_data / "missing", "train")


def test_official_env_plays_train_and_valid_unseen_games(official_data, tmp_path):
    with AlfWorldDataEnv(official_data, cache_dir=tmp_path) as env:
        for seed, split, folder in (
            (0, "train", "train"),
            (1, "train", "train"),
            (1_000_000, "eval", "valid_unseen"),
        ):
            results = play_expert(env, seed, split)
            _, info = env.reset(seed, split)

            assert results[-1].won and results[-1].reward == 1.0
            assert f"/json_2.1.1/{folder}/" in info["trial"]
        assert env.environment_id == "alfworld-official" and env.max_steps == 50


def test_official_env_builds_missing_game_files_into_the_cache_not_the_data(
    official_data, tmp_path
):
    before = sorted(p.name for p in official_data.rglob("*"))
    with AlfWorldDataEnv(official_data, cache_dir=tmp_path) as env:
        built = env.game_path(0, "train")
        shipped = env.game_path(1, "train")

        check_real_env(env, seed=0)

    assert built.is_relative_to(tmp_path) and built.name == "game.tw-pddl"
    assert shipped.is_relative_to(official_data)
    assert sorted(p.name for p in official_data.rglob("*")) == before


def test_official_env_eval_folder_option_and_seed_wraparound(official_data, tmp_path):
    with AlfWorldDataEnv(official_data, cache_dir=tmp_path, eval_folder="valid_seen") as env:
        _, first = env.reset(1_000_000, "eval")
        _, wrapped = env.reset(1_000_001, "eval")

        assert "/valid_seen/" in first["trial"] and first["trial"] == wrapped["trial"]


def test_official_env_without_data_fails_at_reset_naming_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    default = AlfWorldDataEnv()
    with pytest.raises(ValueError, match="eval_folder"):
        AlfWorldDataEnv(tmp_path, eval_folder="test")

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    env = make_env("alfworld-official", max_steps=7)

    assert default.data_dir == Path("~/.cache/alfworld").expanduser()
    assert env.data_dir == tmp_path
    with pytest.raises(FileNotFoundError, match=r"json_2\.1\.1.*ALFWORLD_DATA"):
        env.reset(0)
