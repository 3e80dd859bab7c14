"""Reasoning traces R*_t for real transitions: the teacher prompt, its parser, and a rule teacher.

DreamGym annotates every offline transition ``(s_t, a_t, s_{t+1}, r_{t+1})`` with a reasoning
trace written by a strong teacher LLM that explains *why* taking a_t in s_t leads to s_{t+1} and
r_{t+1}; the experience model is then trained on reasoning + next state (arXiv 2511.03773,
§4.1.2, Eq. 5; the annotation prompt of Appendix C.1 asks for a per-step "transition plan").

- :func:`build_teacher_prompt` / :func:`parse_teacher_output` — the prompt sent to any teacher LLM
  (an OpenAI-compatible endpoint or a local model) and the strict reading of its answer.
- :func:`rule_based_reasoning` — a deterministic teacher for room-and-object text games
  (TextWorldExpress, TextWorld), derived from the real transition alone: what the action does,
  how the location, the visible objects and the admissible actions change, and why the reward and
  termination follow. It exists so the annotation pipeline and the "w/o reasoning" ablation run
  where no capable teacher LLM is available; it states facts of the transition, nothing more.

All functions are pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_TRACE_CHARS",
    "TeacherInput",
    "TeacherParseError",
    "build_teacher_prompt",
    "parse_teacher_output",
    "rule_based_reasoning",
]

MAX_TRACE_CHARS = 1000
_LOCATION = re.compile(r"\bYou are in (?:the |a |an )?([^.]+)\.", re.IGNORECASE)
_EXIT = re.compile(r"\bTo the (North|South|East|West) you see (?:the |a |an )?([^.]+)\.", re.I)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_MOVE = re.compile(r"^(?:move|go|walk)\s+(north|south|east|west)$", re.IGNORECASE)
_MAX_LISTED = 4


@dataclass(frozen=True, kw_only=True)
class TeacherInput:
    """One real transition to explain.

    Attributes:
        task: the task instruction τ.
        observation / admissible_actions: s_t.
        action: a_t.
        next_observation / next_admissible_actions: s_{t+1}.
        reward: r_{t+1}.
        terminated: the episode ended in s_{t+1} (success or failure).
    """

    task: str
    observation: str
    admissible_actions: Sequence[str]
    action: str
    next_observation: str
    next_admissible_actions: Sequence[str]
    reward: float
    terminated: bool


class TeacherParseError(ValueError):
    """The teacher's answer holds no usable trace; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _flat(text: str) -> str:
    return " ".join(text.split())


def build_teacher_prompt(t: TeacherInput) -> str:
    """The annotation prompt for one transition (plain text, for a completions endpoint).

    The teacher sees the whole transition, outcome included, and is asked for a short causal
    explanation inside ``<think>…</think>`` (the same tag the experience model emits).
    """
    outcome = "the episode ends" if t.terminated else "the episode continues"
    return "\n".join(
        [
            "You are an expert in text-based game environments. You write the reasoning an "
            "experience model should produce when it simulates one environment step.",
            f"Task: {_flat(t.task)}",
            f"Observation: {_flat(t.observation)}",
            f"Admissible actions: {' | '.join(_flat(a) for a in t.admissible_actions)}",
            f"Action: {_flat(t.action)}",
            f"Next observation: {_flat(t.next_observation)}",
            f"Next admissible actions: {' | '.join(_flat(a) for a in t.next_admissible_actions)}",
            f"Reward: {t.reward:g}; {outcome}.",
            "Explain in one to three sentences why taking this action in this state leads to "
            "this next observation and reward: what the action does, what changes, and whether "
            "the task is completed. Do not repeat the whole observation.",
            "Answer with the explanation only, as <think>explanation</think>.",
            "",
        ]
    )


def parse_teacher_output(text: str) -> str:
    """The trace in a teacher answer: the first ``<think>`` block, else the whole text.

    Returns:
        The trace with whitespace flattened, cut to :data:`MAX_TRACE_CHARS` characters at a word
        boundary.

    Raises:
        TeacherParseError: the answer is empty, holds the experience model's output tags, or
            contains undecodable bytes.
    """
    if "\ufffd" in text:
        raise TeacherParseError("answer contains undecodable bytes (U+FFFD)")
    match = _THINK.search(text)
    trace = _flat(match.group(1) if match else text.replace("<think>", ""))
    if "<observation>" in trace or "</think>" in trace:
        raise TeacherParseError("answer contains experience-model output tags")
    if not trace:
        raise TeacherParseError("empty answer")
    if len(trace) > MAX_TRACE_CHARS:
        trace = trace[:MAX_TRACE_CHARS].rsplit(" ", 1)[0]
    return trace


# -- rule teacher ------------------------------------------------------------------------------
def _location(observation: str) -> str | None:
    m = _LOCATION.search(observation)
    return m.group(1).strip() if m else None


def _exits(observation: str) -> dict[str, str]:
    return {d.lower(): place.strip() for d, place in _EXIT.findall(observation)}


def _listing(items: Sequence[str]) -> str:
    shown = [f"'{a}'" for a in items[:_MAX_LISTED]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _action_effect(t: TeacherInput) -> str:
    """What the action does, from its verb and the states around it."""
    action = _flat(t.action)
    verb, _, rest = action.partition(" ")
    verb = verb.lower()
    if action not in [_flat(a) for a in t.admissible_actions]:
        return f"'{action}' is not an admissible action here, so it has no effect."
    move = _MOVE.match(action)
    if move:
        direction = move.group(1).lower()
        target = _exits(t.observation).get(direction)
        where = f" towards the {target}" if target else ""
        return f"Moving {direction} follows the exit{where}."
    if verb in ("take", "pick", "get"):
        return f"Taking the {rest} picks it up, so it is now carried in the inventory."
    if verb in ("open", "close"):
        return f"{verb.capitalize()}ing the {rest} changes whether its contents can be reached."
    if verb in ("examine", "read"):
        return f"{verb.capitalize()}ing the {rest} only describes it; nothing moves."
    if action.lower() in ("look", "look around"):
        return "Looking around describes the current room again; nothing changes."
    if action.lower() == "inventory":
        return "Checking the inventory lists what is carried; the room does not change."
    return f"The action '{action}' is carried out in the current room."


def _state_change(t: TeacherInput) -> str:
    before, after = _location(t.observation), _location(t.next_observation)
    if before and after and before.lower() != after.lower():
        return f"The agent goes from the {before} to the {after}."
    if _flat(t.observation) == _flat(t.next_observation):
        return "The observation is unchanged."
    if after:
        return f"The agent stays in the {after}."
    return "The observation now reports the result of the action."


def _actions_change(t: TeacherInput) -> str:
    if t.terminated:  # nothing is admissible after the end: the change says nothing
        return ""
    before = [_flat(a) for a in t.admissible_actions]
    after = [_flat(a) for a in t.next_admissible_actions]
    added = [a for a in after if a not in before]
    removed = [a for a in before if a not in after]
    parts = []
    if added:
        parts.append(f"newly admissible: {_listing(added)}")
    if removed:
        parts.append(f"no longer admissible: {_listing(removed)}")
    if not parts:
        return "The admissible actions stay the same."
    return parts[0][0].upper() + "; ".join(parts)[1:] + "."


def _outcome(t: TeacherInput) -> str:
    if t.terminated and t.reward > 0:
        return (
            f"This completes the task, so the reward is {t.reward:g} and the episode ends in "
            "success."
        )
    if t.terminated:
        return f"The episode ends without completing the task, so the reward is {t.reward:g}."
    if t.reward > 0:
        return f"This makes progress on the task (reward {t.reward:g}); the episode continues."
    return (
        f"The task is not completed yet, so the reward is {t.reward:g} and the episode continues."
    )


def rule_based_reasoning(t: TeacherInput) -> str:
    """A deterministic reasoning trace for a text-game transition (see the module docstring).

    Example: in Coin Collector, ``take coin`` in a room with a coin gives "Taking the coin picks
    it up, so it is now carried in the inventory. … This completes the task, so the reward is 1
    and the episode ends in success."

    Returns:
        Two to four sentences: the action's effect, the change of location or observation, the
        change of admissible actions (omitted when the episode ended), and
        why the reward and termination follow.
    """
    parts = [_action_effect(t), _state_change(t), _actions_change(t), _outcome(t)]
    return " ".join(p for p in parts if p)
