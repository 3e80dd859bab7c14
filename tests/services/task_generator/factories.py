"""Test data for the task generator tests: tasks and task-variation completions."""

from __future__ import annotations

from typing import Any

from dreamgym.types import Task

ENVIRONMENT = "twx-coin"


def make_task(
    index: int = 0,
    *,
    split: str = "train",
    origin: str = "seed",
    environment: str = ENVIRONMENT,
    **overrides: Any,
) -> Task:
    """A valid task; ``index`` makes its id, instruction and game seed unique."""
    fields: dict[str, Any] = {
        "task_id": f"{environment}/{split}/{index}" if origin == "seed" else f"gen-test-{index}",
        "environment": environment,
        "instruction": f"Find the coin in game {index}.",
        "initial_observation": f"You are in room {index}. To the North you see the pantry.",
        "initial_admissible_actions": ["move north", "look around"],
        "game_seed": index if origin == "seed" else None,
        "split": split,
        "origin": origin,
        "metadata": {"source": "test"},
    }
    fields.update(overrides)
    return Task.model_validate(fields)


def variation(
    instruction: str,
    observation: str = "You are in the pantry.",
    actions: tuple[str, ...] = ("move south", "take coin"),
) -> str:
    """A well-formed task-variation completion."""
    return (
        f"<task>{instruction}</task>\n<observation>{observation}</observation>\n"
        f"<actions>{' | '.join(actions)}</actions>"
    )


def task_json(task: Task) -> dict[str, Any]:
    """The task as a JSON request body element."""
    return task.model_dump(mode="json")
