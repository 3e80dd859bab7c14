"""Task-variation prompt and completion format of the curriculum task generator (pure, no I/O).

DreamGym generates new tasks from high-reward-variance seed tasks with the same LLM that plays the
experience model (arXiv 2511.03773, Eq. 6: ``τ_t = M_task({τ^i_{t−1}}_{i=1..m})``; §4.2: M_task
shares parameters with M_exp). Our experience model is a small model fine-tuned by us, so the
format is deliberately simple and strict, and the completion format doubles as the SFT target.

Prompt (:func:`build_task_variation_prompt`)::

    ### Task variation
    Environment: twx-coin
    Write one new task ... and nothing else.

    Task: Find the coin.
    Observation: You are in the kitchen. To the North you see the pantry.
    Actions: move north | look around

    ### New task
    <- the model writes here

Completion / SFT target (:func:`render_task_variation_target`), and nothing after it::

    <task>Find the coin, then go back to the kitchen.</task>
    <observation>You are in the pantry. To the South you see the kitchen.</observation>
    <actions>move south | look around</actions>

:func:`parse_task_variation` reads a completion back and raises
:class:`TaskVariationParseError` (a ``ValueError`` with a ``reason``) on anything else.
Round trip: ``parse_task_variation(render_task_variation_target(task))`` recovers the task's
instruction, initial observation and admissible actions (each stripped of surrounding whitespace).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dreamgym.types import Task

__all__ = [
    "ACTION_SEPARATOR",
    "NEW_TASK_MARKER",
    "PROMPT_FORMAT",
    "TASK_VARIATION_MARKER",
    "ParsedTaskVariation",
    "TaskVariationParseError",
    "build_task_variation_prompt",
    "parse_task_variation",
    "render_task_variation_target",
]

TASK_VARIATION_MARKER = "### Task variation"
NEW_TASK_MARKER = "### New task"
ACTION_SEPARATOR = " | "
PROMPT_FORMAT = "task_variation/v1"
"""Version tag of this prompt/completion format (stored with generated tasks)."""

_FIELD_TAGS = ("task", "observation", "actions")
_ANY_TAG = re.compile(r"</?(?:task|observation|actions)>")
_LAYOUT = re.compile(
    r"\s*<task>(.*?)</task>\s*<observation>(.*?)</observation>\s*<actions>(.*?)</actions>(.*)",
    re.DOTALL,
)
_INSTRUCTIONS = (
    "Write one new task for this environment: a variation of the task(s) below that is more "
    "challenging but still feasible. Answer with <task>instruction</task>, "
    "<observation>initial observation</observation> and <actions>admissible actions separated "
    'by " | "</actions>, and nothing else.'
)


@dataclass(frozen=True)
class ParsedTaskVariation:
    """The fields of a task read from a task-variation completion.

    Attributes:
        instruction: the new task instruction τ (non-empty, stripped).
        initial_observation: the abstract observation at reset (non-empty, stripped).
        initial_admissible_actions: admissible actions at reset (at least one, each non-empty
            and stripped), in completion order.
    """

    instruction: str
    initial_observation: str
    initial_admissible_actions: tuple[str, ...]


class TaskVariationParseError(ValueError):
    """A completion does not follow the task-variation format.

    Attributes:
        reason: short human-readable cause, e.g. ``"missing <observation> tag"``.
        text: the completion that failed to parse.
    """

    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(f"malformed task variation: {reason}")
        self.reason = reason
        self.text = text


def _one_line(text: str) -> str:
    """Collapse every whitespace run (newlines included) into one space."""
    return " ".join(text.split())


def build_task_variation_prompt(seed_tasks: Sequence[Task], *, environment: str) -> str:
    r"""Render the prompt asking M_task for one variation of ``seed_tasks`` (Eq. 6).

    Each seed task becomes three lines ``Task:``, ``Observation:``, ``Actions:`` (whitespace
    runs collapsed so every field stays on its line; actions joined by ``" | "``).

    Args:
        seed_tasks: the m >= 1 seed tasks {τ^i_{t−1}} the variation is based on.
        environment: environment id the new task must belong to (e.g. ``"twx-coin"``).

    Returns:
        The prompt: starts with the line ``"### Task variation"`` and ends with
        ``"### New task\n"``, after which the model writes its completion.

    Raises:
        ValueError: ``seed_tasks`` is empty or ``environment`` is blank.

    References:
        DreamGym, arXiv 2511.03773, Eq. 6 and Appendix C.
    """
    if not seed_tasks:
        raise ValueError("seed_tasks: at least one seed task is required")
    if not environment.strip():
        raise ValueError("environment: must be a non-empty string")
    lines = [TASK_VARIATION_MARKER, f"Environment: {_one_line(environment)}", _INSTRUCTIONS]
    for task in seed_tasks:
        actions = ACTION_SEPARATOR.join(_one_line(a) for a in task.initial_admissible_actions)
        lines += [
            "",
            f"Task: {_one_line(task.instruction)}",
            f"Observation: {_one_line(task.initial_observation)}",
            f"Actions: {actions}",
        ]
    lines += ["", NEW_TASK_MARKER, ""]
    return "\n".join(lines)


def _renderable(text: str, field: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError(f"{field}: must be non-empty to render a task variation")
    if _ANY_TAG.search(value):
        raise ValueError(f"{field}: must not contain <task>/<observation>/<actions> tags")
    return value


def render_task_variation_target(task: Task) -> str:
    r"""Render ``task`` in the completion format (the experience model's SFT target).

    Args:
        task: any task with a non-empty instruction and observation and at least one action.

    Returns:
        ``"<task>I</task>\n<observation>O</observation>\n<actions>a1 | a2</actions>"`` with
        each field stripped; nothing follows ``</actions>``.

    Raises:
        ValueError: a field is empty after stripping or contains one of the format's tags, the
            action list is empty, or an action contains ``"|"`` or a newline (the message names
            the field).
    """
    instruction = _renderable(task.instruction, "instruction")
    observation = _renderable(task.initial_observation, "initial_observation")
    if not task.initial_admissible_actions:
        raise ValueError("initial_admissible_actions: at least one action is required")
    actions = []
    for i, raw in enumerate(task.initial_admissible_actions):
        action = _renderable(raw, f"initial_admissible_actions[{i}]")
        if "|" in action or "\n" in action:
            raise ValueError(f"initial_admissible_actions[{i}]: must not contain '|' or newlines")
        actions.append(action)
    return (
        f"<task>{instruction}</task>\n"
        f"<observation>{observation}</observation>\n"
        f"<actions>{ACTION_SEPARATOR.join(actions)}</actions>"
    )


def _check_tag_counts(text: str) -> None:
    for name in _FIELD_TAGS:
        for tag in (f"<{name}>", f"</{name}>"):
            count = text.count(tag)
            if count == 0:
                raise TaskVariationParseError(f"missing {tag} tag", text)
            if count > 1:
                raise TaskVariationParseError(f"duplicated {tag} tag", text)


def _parse_actions(raw: str, text: str) -> tuple[str, ...]:
    if not raw.strip():
        raise TaskVariationParseError("empty action list in <actions>", text)
    actions = tuple(a.strip() for a in raw.split("|"))
    for i, action in enumerate(actions):
        if not action:
            raise TaskVariationParseError(f"empty action at position {i} in <actions>", text)
    return actions


def parse_task_variation(text: str) -> ParsedTaskVariation:
    r"""Parse a completion written in the task-variation format.

    The completion must be exactly ``<task>…</task>``, ``<observation>…</observation>`` and
    ``<actions>a1 | a2 | …</actions>``, in this order, each tag once, separated and surrounded
    only by whitespace.

    Args:
        text: the model's completion (the text after ``"### New task\n"``).

    Returns:
        The parsed fields, each stripped of surrounding whitespace.

    Raises:
        TaskVariationParseError: with ``reason`` naming the defect: a missing or duplicated tag,
            text before ``<task>``, tags out of order or text between them, an empty field,
            an empty action list or empty action, trailing text after ``</actions>``, or
            undecodable bytes (U+FFFD).
    """
    _check_tag_counts(text)
    if "\ufffd" in text:  # a byte-level model sampled an invalid UTF-8 sequence
        raise TaskVariationParseError("text contains undecodable bytes (U+FFFD)", text)
    if not text.lstrip().startswith("<task>"):
        raise TaskVariationParseError("text before <task>", text)
    match = _LAYOUT.fullmatch(text)
    if match is None:
        raise TaskVariationParseError(
            "tags out of order or text between tags (expected <task>, <observation>, <actions>)",
            text,
        )
    instruction, observation, raw_actions, trailing = match.groups()
    if trailing.strip():
        raise TaskVariationParseError("trailing text after </actions>", text)
    for name, value in (("task", instruction), ("observation", observation)):
        if not value.strip():
            raise TaskVariationParseError(f"empty <{name}>", text)
    return ParsedTaskVariation(
        instruction=instruction.strip(),
        initial_observation=observation.strip(),
        initial_admissible_actions=_parse_actions(raw_actions, text),
    )
