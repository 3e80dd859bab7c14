"""Tests of the feasibility rule (task_generator.domain.feasibility) with an in-memory imagined
environment, and of the generator's use of it (in-memory repository, FakeLLMBackend)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dreamgym.task_types import TaskGenerateRequest
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.types import AbstractState, Task
from task_generator.domain.errors import FeasibilityNotConfiguredError
from task_generator.domain.feasibility import (
    FeasibilityResult,
    ImaginedStep,
    infeasible_reason,
    play_random_rollouts,
)
from task_generator.domain.generation import GenerationConfig, TaskGenerator

from ..factories import make_task, variation
from .memory_repository import TEAM, InMemoryTaskRepository

WIN = "take coin"


class CoinWorld:
    """An imagined environment: ``take coin`` pays 1 and ends; every other action keeps the
    state; ``crash`` answers an error. Records every call."""

    def __init__(self) -> None:
        self.resets: list[tuple[str, int, int]] = []
        self.steps: list[list[tuple[Any, str]]] = []
        self.open: set[int] = set()
        self.closed: list[int] = []
        self.states: dict[int, AbstractState] = {}

    def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        handle = len(self.resets)
        self.resets.append((task.task_id, seed, max_steps))
        self.open.add(handle)
        self.states[handle] = task.initial_state()
        return handle, self.states[handle]

    def step_many(self, items: Sequence[tuple[Any, str]]) -> list[ImaginedStep]:
        self.steps.append(list(items))
        out = []
        for handle, action in items:
            assert handle in self.open, "stepped a closed episode"
            if action == "crash":
                out.append(ImaginedStep(error="malformed_transition: bad output"))
            elif action == WIN:
                out.append(ImaginedStep(state=self.states[handle], reward=1.0, done=True))
            else:
                out.append(ImaginedStep(state=self.states[handle], reward=0.0))
        return out

    def close(self, handle: Any) -> None:
        self.open.discard(handle)
        self.closed.append(handle)


def task(index: int, actions: list[str]) -> Task:
    return make_task(index, origin="generated", initial_admissible_actions=actions)


def test_task_with_a_winning_action_is_feasible_and_one_without_is_not():
    env = CoinWorld()
    tasks = [task(0, ["look around", WIN]), task(1, ["look around", "move north"])]

    results = play_random_rollouts(env, tasks, rollouts=4, max_steps=10, seed=0)

    assert results[0].feasible and results[0].rollouts == 4 and results[0].successes >= 1
    assert results[1] == FeasibilityResult(rollouts=4, successes=0, errors=0)
    assert env.open == set() and sorted(env.closed) == list(range(8))


def test_rollouts_are_seeded_per_task_and_episode_and_respect_max_steps():
    env = CoinWorld()
    tasks = [task(0, ["look around"]), task(1, ["move north"])]

    play_random_rollouts(env, tasks, rollouts=2, max_steps=3, seed=7)

    assert [(t, s, m) for t, s, m in env.resets] == [
        ("gen-test-0", 7, 3),
        ("gen-test-0", 8, 3),
        ("gen-test-1", 1007, 3),
        ("gen-test-1", 1008, 3),
    ]
    assert [len(round_) for round_ in env.steps] == [4, 4, 4]  # lockstep, 3 steps each


def test_same_seed_gives_the_same_actions():
    tasks = [task(0, ["a", "b", "c", WIN])]
    first, second = CoinWorld(), CoinWorld()

    play_random_rollouts(first, tasks, rollouts=3, max_steps=5, seed=3)
    play_random_rollouts(second, tasks, rollouts=3, max_steps=5, seed=3)

    assert first.steps == second.steps


def test_errors_are_counted_and_end_the_episode():
    env = CoinWorld()

    (result,) = play_random_rollouts(env, [task(0, ["crash"])], rollouts=3, max_steps=5, seed=0)

    assert result == FeasibilityResult(rollouts=3, successes=0, errors=3)
    assert len(env.steps) == 1


def test_task_without_admissible_actions_gets_no_rollout():
    env = CoinWorld()

    (result,) = play_random_rollouts(env, [task(0, [])], rollouts=3, max_steps=5, seed=0)

    assert result.rollouts == 0 and not result.feasible
    assert env.resets == []


def test_episodes_are_closed_when_the_environment_fails():
    class Failing(CoinWorld):
        def step_many(self, items):
            raise RuntimeError("service down")

    env = Failing()

    with pytest.raises(RuntimeError):
        play_random_rollouts(env, [task(0, ["a"])], rollouts=2, max_steps=5, seed=0)

    assert env.open == set()


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (FeasibilityResult(4, 1), None),
        (FeasibilityResult(0, 0), "infeasible: the variation has no admissible actions"),
        (FeasibilityResult(4, 0), "infeasible: 0/4 imagined random-policy rollouts"),
        (FeasibilityResult(4, 0, errors=2), "within 10 steps, 2 failed"),
    ],
)
def test_infeasible_reason(result, reason):
    text = infeasible_reason(result, 10)

    if reason is None:
        assert text is None
    else:
        assert reason in text


# -- the generator with a checker ----------------------------------------------------------------


class RecordingChecker:
    """A checker answering from a rule on the task's admissible actions."""

    max_steps = 10

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int | None, str | None]] = []

    def check(self, tasks, *, seed, api_key):
        self.calls.append(([t.instruction for t in tasks], seed, api_key))
        return [
            FeasibilityResult(4, 2 if WIN in t.initial_admissible_actions else 0) for t in tasks
        ]


def scored_generator(checker=None, completions=()) -> tuple[TaskGenerator, InMemoryTaskRepository]:
    repository = InMemoryTaskRepository([make_task(0)])
    repository.add_outcome(TEAM, "twx-coin/train/0", [1, 0], None)
    backend = FakeLLMBackend(list(completions))
    return TaskGenerator(repository, backend, GenerationConfig(), feasibility=checker), repository


COMPLETIONS = [
    variation("Find the coin in the attic.", actions=("move south", WIN)),
    variation("Find the coin in the moon.", actions=("move south", "look around")),
]


def test_generator_rejects_infeasible_variations_and_records_feasibility():
    checker = RecordingChecker()
    generator, repository = scored_generator(checker, COMPLETIONS)
    request = TaskGenerateRequest(num_seed_tasks=1, variations_per_task=2, seed=5, round=3)

    out = generator.generate(request, team=TEAM, api_key="dg_key")

    assert [t.instruction for t in out.created] == ["Find the coin in the attic."]
    assert out.num_infeasible == 1
    assert out.rejected[0].reason.startswith("infeasible: 0/4")
    assert out.rejected[0].parent_task_id == "twx-coin/train/0"
    assert checker.calls == [
        (["Find the coin in the attic.", "Find the coin in the moon."], 5, "dg_key")
    ]
    stored = repository.tasks[out.created[0].task_id]
    assert stored.metadata["feasibility"] == {"successes": 2, "rollouts": 4}
    assert stored.metadata["generation_depth"] == 1
    assert stored.metadata["generation_round"] == 3
    assert stored.parent_task_id == "twx-coin/train/0"


def test_generator_check_feasibility_false_skips_the_checker():
    checker = RecordingChecker()
    generator, _ = scored_generator(checker, COMPLETIONS)
    request = TaskGenerateRequest(num_seed_tasks=1, variations_per_task=2, check_feasibility=False)

    out = generator.generate(request, team=TEAM)

    assert len(out.created) == 2 and out.num_infeasible == 0
    assert checker.calls == []
    assert "feasibility" not in out.created[0].metadata


def test_generator_check_feasibility_true_without_checker_is_503():
    generator, _ = scored_generator(None, COMPLETIONS)
    request = TaskGenerateRequest(num_seed_tasks=1, variations_per_task=2, check_feasibility=True)

    with pytest.raises(FeasibilityNotConfiguredError) as info:
        generator.generate(request, team=TEAM)

    assert info.value.status_code == 503


def test_generation_depth_grows_along_the_lineage():
    repository = InMemoryTaskRepository([make_task(0)])
    repository.add_outcome(TEAM, "twx-coin/train/0", [1, 0], None)
    backend = FakeLLMBackend(
        [variation("Find the coin twice."), variation("Find the coin three times.")]
    )
    generator = TaskGenerator(repository, backend, GenerationConfig())
    (child,) = generator.generate(
        TaskGenerateRequest(num_seed_tasks=1, variations_per_task=1), team=TEAM
    ).created
    repository.groups.clear()
    repository.add_outcome(TEAM, child.task_id, [1, 0], None)

    (grandchild,) = generator.generate(
        TaskGenerateRequest(num_seed_tasks=1, variations_per_task=1), team=TEAM
    ).created

    assert child.metadata["generation_depth"] == 1 and "generation_round" not in child.metadata
    assert grandchild.metadata["generation_depth"] == 2
    assert grandchild.parent_task_id == child.task_id
    assert repository.lineage(TEAM, grandchild.task_id) == [child.task_id, "twx-coin/train/0"]
