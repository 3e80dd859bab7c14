"""Tests of the teacher prompt, its parser and the rule teacher (experience_model.domain.teacher).

The rule-teacher cases are real TextWorldExpress transitions (Coin Collector and CookingWorld
observations as the abstract-state mapping renders them).
"""

from __future__ import annotations

import pytest

from experience_model.domain.teacher import (
    MAX_TRACE_CHARS,
    TeacherInput,
    TeacherParseError,
    build_teacher_prompt,
    parse_teacher_output,
    rule_based_reasoning,
)

COIN_TASK = (
    "Your task is to search the environment and find the coin. Once you find the coin, take it."
)
KITCHEN = (
    "You are in the kitchen. You see a coin. To the North you see the pantry. "
    "To the East you see the corridor."
)
KITCHEN_ACTIONS = ["inventory", "look around", "move east", "move north", "take coin"]


def coin(**overrides) -> TeacherInput:
    fields = {
        "task": COIN_TASK,
        "observation": KITCHEN,
        "admissible_actions": KITCHEN_ACTIONS,
        "action": "take coin",
        "next_observation": "You take the coin.",
        "next_admissible_actions": [],
        "reward": 1.0,
        "terminated": True,
    }
    return TeacherInput(**(fields | overrides))


def test_rule_take_coin_explains_inventory_reward_and_success():
    trace = rule_based_reasoning(coin())

    assert trace == (
        "Taking the coin picks it up, so it is now carried in the inventory. "
        "The observation now reports the result of the action. "
        "This completes the task, so the reward is 1 and the episode ends in success."
    )


def test_rule_move_names_the_exit_target_and_the_room_change():
    trace = rule_based_reasoning(
        coin(
            action="move north",
            next_observation="You are in the pantry. To the South you see the kitchen.",
            next_admissible_actions=["inventory", "look around", "move south"],
            reward=0.0,
            terminated=False,
        )
    )

    assert trace.startswith("Moving north follows the exit towards the pantry. ")
    assert "The agent goes from the kitchen to the pantry." in trace
    assert "newly admissible: 'move south'" in trace.lower()
    assert "no longer admissible: 'move east', 'move north', 'take coin'" in trace
    assert trace.endswith("so the reward is 0 and the episode continues.")


def test_rule_look_around_says_nothing_changes():
    trace = rule_based_reasoning(
        coin(
            action="look around",
            next_observation=KITCHEN,
            next_admissible_actions=KITCHEN_ACTIONS,
            reward=0.0,
            terminated=False,
        )
    )

    assert "nothing changes" in trace
    assert "The observation is unchanged." in trace
    assert "The admissible actions stay the same." in trace


def test_rule_open_in_cookingworld_describes_the_container_and_new_close_action():
    trace = rule_based_reasoning(
        coin(
            task="You are hungry! Let's cook a delicious meal.",
            observation="You are in the kitchen. You see a cutlery drawer that is closed.",
            admissible_actions=["open cutlery drawer", "look around"],
            action="open cutlery drawer",
            next_observation="You open the cutlery drawer. It's empty inside.",
            next_admissible_actions=["close cutlery drawer", "look around"],
            reward=0.0,
            terminated=False,
        )
    )

    assert trace.startswith("Opening the cutlery drawer changes whether its contents")
    assert "Newly admissible: 'close cutlery drawer'" in trace
    assert "no longer admissible: 'open cutlery drawer'" in trace


def test_rule_inadmissible_action_has_no_effect():
    trace = rule_based_reasoning(coin(action="fly away", reward=0.0, terminated=False))

    assert trace.startswith("'fly away' is not an admissible action here, so it has no effect.")


def test_rule_termination_without_reward_is_a_failure():
    trace = rule_based_reasoning(coin(action="look around", reward=0.0, terminated=True))

    assert trace.endswith("The episode ends without completing the task, so the reward is 0.")


def test_rule_lists_at_most_four_changed_actions():
    many = [f"take item {i}" for i in range(7)]
    trace = rule_based_reasoning(
        coin(action="look around", next_admissible_actions=KITCHEN_ACTIONS + many, terminated=False)
    )

    assert "'take item 3' and 3 more" in trace
    assert "take item 4" not in trace


def test_rule_is_deterministic():
    assert rule_based_reasoning(coin()) == rule_based_reasoning(coin())


def test_teacher_prompt_shows_the_whole_transition_and_asks_for_think():
    text = build_teacher_prompt(coin())

    for part in (COIN_TASK, KITCHEN, "take coin", "You take the coin.", "Reward: 1"):
        assert part in text
    assert "the episode ends" in text
    assert "<think>" in text


@pytest.mark.parametrize(
    ("answer", "trace"),
    [
        (
            "<think> The coin is taken,\n so the task ends. </think>",
            "The coin is taken, so the task ends.",
        ),
        ("Taking the coin wins.", "Taking the coin wins."),
        ("preamble <think>inside</think> trailing", "inside"),
        ("<think>unclosed reasoning", "unclosed reasoning"),
    ],
)
def test_parse_teacher_output_reads_the_trace(answer, trace):
    assert parse_teacher_output(answer) == trace


@pytest.mark.parametrize(
    "answer", ["", "   ", "<think></think>", "<observation>x</observation>", "bad \ufffd byte"]
)
def test_parse_teacher_output_rejects_unusable_answers(answer):
    with pytest.raises(TeacherParseError):
        parse_teacher_output(answer)


def test_parse_teacher_output_cuts_long_traces_at_a_word_boundary():
    trace = parse_teacher_output("word " * 1000)

    assert len(trace) <= MAX_TRACE_CHARS
    assert trace.endswith("word")
