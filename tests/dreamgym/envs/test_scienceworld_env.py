"""ScienceWorld adapter (dreamgym.envs.scienceworld_env): pure action logic, real simulator."""

from __future__ import annotations

import pytest

from dreamgym.envs import ScienceWorldEnv, make_env
from dreamgym.envs.accounting import real_steps_total
from dreamgym.envs.scienceworld_env import (
    bounded_action_map,
    bounded_actions,
    canonical_listing,
    container_names,
    gold_alias,
    room_name,
    visible_object_ids,
)
from dreamgym.testing.checkers import check_real_env

# --------------------------------------------------------------------------- pure helpers

TEMPLATES = {
    0: "open OBJ",
    2: "go OBJ",
    3: "look around",
    9: "move OBJ to OBJ",
    11: "focus on OBJ",
    16: "connect OBJ to OBJ",
    21: "pick up OBJ",
}
REFERENTS = {
    1: ["agent"],
    2: ["air"],
    3: ["room", "kitchen"],
    4: ["green box", "box"],
    5: ["blue jay egg", "egg blue jay egg", "blue jay", "living thing"],
    6: ["table"],
    7: ["ERROR: SHOULD USE OVERRIDE FOR PORTAL."],
    8: ["apple", "red apple"],
    9: ["room", "hallway"],
}
LOOK = (
    "This room is called the kitchen. In it, you see: \n\tthe agent\n\ta substance called air\n"
    "\ta green box (containing nothing)\n\ta table. On the table is: a red apple.\n"
    "You also see:\n\tA door to the hallway (that is open)\n"
)
INVENTORY = "In your inventory, you see:\n\ta blue jay egg\n"
SCOPE = {1, 2, 3, 4, 6, 7, 8, 9}


def valid(*entries):
    return [{"action": a, "template_id": t, "obj_ids": list(ids)} for a, t, ids in entries]


VALID = valid(
    ("look around", 3, []),
    ("go to hallway", 2, [9]),
    ("open door", 0, [7]),
    ("focus on agent", 11, [1]),
    ("focus on kitchen", 11, [3]),
    ("focus on apple", 11, [8]),
    ("focus on blue jay", 11, [5]),
    ("pick up apple", 21, [8]),
    ("move blue jay to green box", 9, [5, 4]),
    ("move blue jay to table", 9, [5, 6]),
    ("move blue jay to apple", 9, [5, 8]),
    ("move apple to green box", 9, [8, 4]),
    ("connect apple to table", 16, [8, 6]),
)


def test_room_and_container_names_come_from_the_look_text():
    assert room_name(LOOK) == "kitchen"
    assert room_name("This outside location is called the outside. Here you see:") == "outside"
    assert room_name("You move to the kitchen.") is None
    assert container_names(LOOK) == {"green box", "table"}


def test_visible_object_ids_match_whole_referent_phrases():
    assert visible_object_ids(REFERENTS, INVENTORY) == {5}
    assert visible_object_ids(REFERENTS, "a pineapple") == set()  # 'apple' inside a word


def test_bounded_actions_keep_templates_objects_in_view_and_held_moves():
    actions = bounded_actions(VALID, TEMPLATES, REFERENTS, LOOK, INVENTORY, scope=SCOPE)

    assert actions == [
        "focus on blue jay egg",
        "focus on red apple",
        "go to hallway",
        "look around",
        "move blue jay egg to green box",
        "move blue jay egg to table",
        "open door",
        "pick up red apple",
    ]


def test_bounded_actions_focused_object_may_be_moved_and_out_of_view_objects_not():
    focused = bounded_actions(VALID, TEMPLATES, REFERENTS, LOOK, INVENTORY, scope=SCOPE, focused=8)
    hidden = bounded_actions(VALID, TEMPLATES, REFERENTS, LOOK, "", scope=SCOPE - {8})

    assert "move red apple to green box" in focused
    assert not any("apple" in a or "blue jay" in a for a in hidden)


def test_bounded_actions_cap_keeps_meta_and_navigation_first():
    capped = bounded_actions(
        VALID, TEMPLATES, REFERENTS, LOOK, INVENTORY, scope=SCOPE, max_actions=3
    )

    assert capped == ["go to hallway", "look around", "open door"]


def test_bounded_action_map_names_objects_canonically_and_maps_back():
    entries = valid(
        ("focus on paint", 11, [20]),
        ("focus on paint in cup containing red paint", 11, [21]),
        ("go to hallway", 2, [9]),
    )
    referents = {
        20: ["paint", "blue paint", "paint in wood cup containing blue paint"],
        21: ["paint", "red paint", "paint in cup containing red paint"],
        9: ["room", "hallway"],
        3: ["room", "kitchen"],
    }
    look = "This room is called the kitchen. In it, you see:\n\ta cup (containing red paint)"

    mapping = bounded_action_map(entries, TEMPLATES, referents, look, "", scope={3, 9, 20, 21})

    assert mapping == {
        "focus on blue paint": "focus on paint",
        "focus on red paint": "focus on paint in cup containing red paint",
        "go to hallway": "go to hallway",
    }


def test_canonical_listing_sorts_lines_and_contents():
    one = "In it, you see: \n\ta wood cup (containing red paint)\n\ta table. On the table is: b, a."
    two = "In it, you see: \n\ta table. On the table is: a, b.\n\ta wood cup (containing red paint)"

    assert canonical_listing(one) == canonical_listing(two)
    nested = canonical_listing("a bowl (containing x, an apple (containing y, b))")
    assert nested == "a bowl (containing an apple (containing b, y), x)"


def test_gold_alias_maps_gold_referents_to_the_valid_action():
    def alias(action):
        return gold_alias(action, VALID, TEMPLATES, REFERENTS)

    assert alias("move egg blue jay egg in inventory to green box") == "move blue jay to green box"
    assert alias("focus on red apple") == "focus on apple"
    assert alias("open door to hallway") == "open door"  # doors have no usable referents
    assert alias("look around") == "look around"
    assert alias("eat the moon") == "eat the moon"


# --------------------------------------------------------------------------- real simulator

envs_mark = pytest.mark.envs


@envs_mark
@pytest.mark.parametrize(("seed", "split"), [(0, "train"), (1_000_000, "eval")])
def test_check_real_env_scienceworld_passes(sw_env, seed, split):
    check_real_env(sw_env("find-non-living-thing"), seed=seed, split=split)


@envs_mark
@pytest.mark.parametrize(
    ("task", "seed", "split"),
    [("lifespan-longest-lived", 1, "train"), ("find-living-thing", 1_000_001, "eval")],
)
def test_scienceworld_expert_wins_through_admissible_actions(sw_env, task, seed, split):
    env = sw_env(task)
    state, info = env.reset(seed, split)
    results = []
    while not results or not (results[-1].terminated or results[-1].truncated):
        action = env.expert_actions()[0]
        assert action in state.admissible_actions
        results.append(env.step(action))
        state = results[-1].state

    assert results[-1].won and results[-1].info["score"] == 1.0
    assert [r.reward for r in results] == [0.0] * (len(results) - 1) + [1.0]
    assert len(results) <= env.max_steps


@envs_mark
def test_scienceworld_splits_play_scienceworlds_own_disjoint_variations(sw_env):
    env = sw_env("find-non-living-thing")
    train, held_out = env.variations("train"), env.variations("eval")

    _, first_train = env.reset(0, "train")
    _, first_eval = env.reset(1_000_000, "eval")
    _, wrapped = env.reset(len(train), "train")

    assert set(train).isdisjoint(held_out) and len(train) >= 100 and len(held_out) >= 50
    assert first_train["variation"] == train[0] and first_eval["variation"] == held_out[0]
    assert wrapped["variation"] == train[0]


@envs_mark
def test_scienceworld_focusing_on_the_wrong_thing_loses(sw_env):
    env = sw_env("find-living-thing")
    state, _ = env.reset(0)
    wrong = next(a for a in state.admissible_actions if a.startswith("focus on") and "door" in a)

    result = env.step(wrong)

    assert result.terminated and not result.won and result.info["lost"]
    assert result.reward == 0.0 and result.info["score"] == 0.0 and result.info["score_raw"] < 0
    assert result.state.admissible_actions == [] and env.expert_actions() == []


@envs_mark
def test_scienceworld_observation_names_the_room_and_drops_agent_and_air(sw_env):
    env = sw_env("find-non-living-thing")
    state, info = env.reset(0)

    result = env.step(env.expert_actions()[0])

    assert "the agent" in info["raw_observation"] and "the agent" not in state.observation
    assert "called air" not in state.observation
    assert state.observation.startswith("This room is called the ")
    assert result.state.observation.endswith(f"You are in the {room_name(env._episode.look)}.")


@envs_mark
def test_scienceworld_counts_real_steps_and_caps_admissible_actions():
    with ScienceWorldEnv("find-non-living-thing", max_actions=5, max_steps=2) as env:
        before = real_steps_total()
        state, _ = env.reset(0)
        results = [env.step("look around"), env.step("inventory")]

        assert len(state.admissible_actions) <= 5 and "look around" in state.admissible_actions
        assert [r.truncated for r in results] == [False, True]
        assert env.num_steps_total == 2 and real_steps_total() - before == 2
        with pytest.raises(RuntimeError, match="ended"):
            env.step("look around")


@envs_mark
def test_scienceworld_deviation_ends_the_expert_plan(sw_env):
    env = sw_env("find-non-living-thing")
    state, _ = env.reset(0)
    plan = env.expert_actions()
    detour = next(a for a in state.admissible_actions if a.startswith("open") and a != plan[0])

    env.step("look around")
    assert env.expert_actions() == plan
    env.step(detour)
    assert env.expert_actions() == []


def test_scienceworld_invalid_arguments_raise_value_error():
    with pytest.raises(ValueError, match="max_steps"):
        ScienceWorldEnv("boil", max_steps=0)
    with pytest.raises(ValueError, match="max_actions"):
        ScienceWorldEnv("boil", max_actions=0)
    with pytest.raises(RuntimeError, match="reset"):
        ScienceWorldEnv("boil").step("look around")
    assert make_env("sw-find-living-thing").max_steps == 20


@envs_mark
def test_scienceworld_unknown_task_is_reported_at_reset():
    with ScienceWorldEnv("juggle-flames") as env, pytest.raises(ValueError, match="juggle"):
        env.reset(0)


@envs_mark
def test_scienceworld_truncated_state_lists_the_new_rooms_actions():
    with ScienceWorldEnv("find-non-living-thing", max_steps=2) as env:
        env.reset(0)
        before = env.step(env.expert_actions()[0]).state  # open the door
        destination = env.expert_actions()[0]  # go to <room>

        result = env.step(destination)

        assert result.truncated and not result.terminated
        assert destination in before.admissible_actions
        assert destination not in result.state.admissible_actions
        assert result.state.admissible_actions and "look around" in result.state.admissible_actions
