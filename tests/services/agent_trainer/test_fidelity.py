"""Tests of agent_trainer.fidelity: metrics on hand-made predictions, teacher-forced queries."""

from __future__ import annotations

import pytest

from agent_trainer.fidelity import fidelity_metrics, heldout_queries
from dreamgym.errors import ErrorInfo
from dreamgym.experience_types import HistoryEntry, Prediction
from dreamgym.types import Provenance, Trajectory, Transition


def label(
    step: int,
    *,
    reward: float = 0.0,
    terminated: bool = False,
    next_obs: str = "o",
    next_actions: tuple[str, ...] = ("a", "b"),
) -> Transition:
    return Transition(
        step=step,
        observation=f"obs {step}",
        admissible_actions=["a", "b"],
        action=f"act {step}",
        next_observation=next_obs,
        next_admissible_actions=list(next_actions),
        reward=reward,
        terminated=terminated,
        won=reward > 0 if terminated else None,
    )


def prediction(
    *,
    reward: float | None = 0.0,
    terminated: bool | None = False,
    observation: str | None = "o",
    actions: tuple[str, ...] = ("a", "b"),
) -> Prediction:
    return Prediction(
        observation=observation,
        admissible_actions=list(actions),
        reward=reward,
        terminated=terminated,
    )


FAILED = Prediction(error=ErrorInfo(type="malformed_transition", message="bad", code=502))


def test_fidelity_metrics_hand_case_exact_values():
    labels = [
        label(0),  # 0: all correct
        label(1, next_obs="room 2", next_actions=("c",)),  # 1: obs and actions wrong
        label(2, reward=1.0, terminated=True, next_obs="won"),  # 2: reward missed
        label(0, reward=1.0, terminated=True, next_obs="won"),  # 3: win predicted, terminal
        label(1),  # 4: parse failure
    ]
    predictions = [
        prediction(),
        prediction(observation="room 3", actions=("d",)),
        prediction(reward=0.0, terminated=True, observation="won"),
        prediction(reward=1.0, terminated=True, observation="won", actions=()),
        FAILED,
    ]

    metrics = fidelity_metrics(predictions, labels)

    assert metrics == {
        "transitions": 5,
        "parse_failure_rate": 1 / 5,
        "reward_accuracy": 3 / 5,
        "success_reward_recall": 1 / 2,
        "termination_accuracy": 4 / 5,
        "next_observation_exact_match": 3 / 5,  # a parse failure counts as a miss
        "admissible_actions_exact_match": 1 / 2,  # non-terminal parsed labels: 0 ok, 1 wrong
        "real_winning_steps": 2,
    }


def test_fidelity_metrics_admissible_actions_compare_as_sets():
    labels = [label(0, next_actions=("b", "a"))]

    metrics = fidelity_metrics([prediction(actions=("a", "b"))], labels)

    assert metrics["admissible_actions_exact_match"] == 1.0


def test_fidelity_metrics_without_real_wins_has_no_recall():
    metrics = fidelity_metrics([prediction(reward=1.0)], [label(0)])

    assert metrics["success_reward_recall"] is None
    assert metrics["reward_accuracy"] == 0.0
    assert metrics["real_winning_steps"] == 0


def test_fidelity_metrics_missing_reward_counts_as_zero():
    metrics = fidelity_metrics([prediction(reward=None)], [label(0)])

    assert metrics["reward_accuracy"] == 1.0


def test_fidelity_metrics_length_mismatch_raises():
    with pytest.raises(ValueError):
        fidelity_metrics([prediction()], [label(0), label(1)])


def trajectory(task: str, actions: list[str]) -> Trajectory:
    transitions = [
        Transition(
            step=i,
            observation=f"{task} obs {i}",
            admissible_actions=list(actions),
            action=a,
            next_observation=f"{task} obs {i + 1}",
            next_admissible_actions=list(actions),
            reward=float(i == len(actions) - 1),
            terminated=i == len(actions) - 1,
        )
        for i, a in enumerate(actions)
    ]
    return Trajectory(
        task=task,
        transitions=transitions,
        provenance=Provenance(
            environment="twx-coin",
            game_seed=1_000_000,
            split="eval",
            policy="expert",
            source="real",
        ),
    )


def test_heldout_queries_carry_the_real_history_and_transition_labels():
    trajectories = [
        trajectory("t1", ["move north", "take coin", "look"]),
        trajectory("t2", ["take coin"]),
    ]

    queries, labels = heldout_queries(trajectories, "twx-coin")

    assert labels == [*trajectories[0].transitions, *trajectories[1].transitions]
    assert [q.history for q in queries] == [
        [],
        [HistoryEntry(observation="t1 obs 0", action="move north")],
        [
            HistoryEntry(observation="t1 obs 0", action="move north"),
            HistoryEntry(observation="t1 obs 1", action="take coin"),
        ],
        [],
    ]
    assert [(q.task, q.observation, q.action) for q in queries] == [
        ("t1", "t1 obs 0", "move north"),
        ("t1", "t1 obs 1", "take coin"),
        ("t1", "t1 obs 2", "look"),
        ("t2", "t2 obs 0", "take coin"),
    ]
    assert {q.environment for q in queries} == {"twx-coin"}
    assert [q.seed for q in queries] == [0, 1, 2, 3]
    assert queries[1].admissible_actions == ["move north", "take coin", "look"]
