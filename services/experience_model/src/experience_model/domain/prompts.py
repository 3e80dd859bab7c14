"""Prompt and output format of the experience model (one format for SFT and inference).

Inference, paper Eq. 4 (arXiv 2511.03773):
``(R_t, s_{t+1}, r_{t+1}) = M_exp(R_t | {(s_i, a_i)}_{i=0}^{t}, {d_j}_{j=1}^{k}, τ)`` — the prompt
holds the task τ, the last ``history_length`` (observation, action) pairs, the top-k retrieved
transitions d_j and the current abstract state and action. The completion is, strictly::

    <think>R_t</think>                       (present when the model reasons; optional)
    <observation>s_{t+1} observation</observation>
    <actions>a | b | c</actions>
    <reward>r_{t+1}</reward>
    <terminated>true|false</terminated>

SFT, paper Eq. 5: the same prompt, and the completion as the target — so
``−log P(R*_t | ...) − log P(s_{t+1} | R*_t, ...)`` is the token-level loss over that completion
(the reasoning part only when the data carries a trace).

Reasoning switch (ablation "w/o experience reasoning", paper Table 2): with
``PromptOptions(use_reasoning=False)`` the prompt's last line reads ``### Next state (no
reasoning)`` and the target carries no ``<think>`` block, so a model trained that way predicts the
next state directly; with the default ``use_reasoning=True`` the prompt is unchanged and the
completion starts with ``<think>R_t</think>`` whenever the model was trained on traces.

:func:`parse_step_output` is strict: each tag once, in order, nothing but whitespace around them;
anything else raises :class:`StepParseError` with a reason, which the service retries and then
reports as a ``malformed_transition`` error (never as a reward of 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "FORMAT_TAGS",
    "NEXT_STATE_HEADER",
    "NEXT_STATE_HEADER_NO_REASONING",
    "FORMAT_VERSION",
    "ExampleTransition",
    "HistoryStep",
    "ParsedStep",
    "PromptOptions",
    "StepParseError",
    "build_step_prompt",
    "parse_step_output",
    "render_step_target",
]

FORMAT_VERSION = "dreamgym-step-v1"
ACTION_SEPARATOR = " | "
NEXT_STATE_HEADER = "### Next state"
NEXT_STATE_HEADER_NO_REASONING = "### Next state (no reasoning)"
# The output format's markup; small corpus tokenizers keep each tag as one token.
FORMAT_TAGS = tuple(
    f"<{end}{tag}>"
    for tag in ("think", "observation", "actions", "reward", "terminated")
    for end in ("", "/")
)


@dataclass(frozen=True)
class HistoryStep:
    """One past (observation, action) pair of the episode."""

    observation: str
    action: str


@dataclass(frozen=True)
class ExampleTransition:
    """A retrieved demonstration d_j (a stored transition)."""

    observation: str
    action: str
    next_observation: str
    next_admissible_actions: Sequence[str]
    reward: float
    terminated: bool


@dataclass(frozen=True, kw_only=True)
class PromptOptions:
    """Switches for ablations (paper Table 2 / Fig. 4).

    Attributes:
        history_length: past (observation, action) pairs shown; 0 disables history.
        use_retrieval: include retrieved examples.
        use_reasoning: the completion may start with a ``<think>`` reasoning trace; ``False``
            marks the prompt "no reasoning" (and the service drops any trace the model emits).
    """

    history_length: int = 3
    use_retrieval: bool = True
    use_reasoning: bool = True

    def __post_init__(self) -> None:
        if self.history_length < 0:
            raise ValueError(f"history_length must be >= 0, got {self.history_length}")


@dataclass(frozen=True)
class ParsedStep:
    """The experience model's prediction for one step."""

    observation: str
    admissible_actions: list[str]
    reward: float
    terminated: bool
    reasoning: str


class StepParseError(ValueError):
    """The completion does not follow the output format; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _flat(text: str) -> str:
    return " ".join(text.split())


def _join_actions(actions: Sequence[str]) -> str:
    return ACTION_SEPARATOR.join(_flat(a) for a in actions)


def build_step_prompt(
    *,
    task: str,
    observation: str,
    admissible_actions: Sequence[str],
    action: str,
    history: Sequence[HistoryStep] = (),
    examples: Sequence[ExampleTransition] = (),
    options: PromptOptions = PromptOptions(),  # noqa: B008 - frozen dataclass
) -> str:
    """Render the experience-model prompt for one step (paper Eq. 4 inputs).

    Args:
        task: the task instruction τ.
        observation: current abstract observation (s_t).
        admissible_actions: actions admissible in s_t.
        action: the agent's action a_t.
        history: earlier steps of the episode, oldest first (only the last
            ``options.history_length`` are shown).
        examples: retrieved transitions d_j, most similar first.
        options: ablation switches.

    Returns:
        The prompt text; the completion follows the final ``### Next state`` line
        (``### Next state (no reasoning)`` when ``options.use_reasoning`` is false).
    """
    lines = ["### Environment step", f"Task: {_flat(task)}"]
    if options.use_retrieval and examples:
        lines.append("Examples:")
        for d in examples:
            outcome = "terminated" if d.terminated else "running"
            lines.append(
                f"- {_flat(d.observation)} | {_flat(d.action)} => {_flat(d.next_observation)} | "
                f"{_join_actions(d.next_admissible_actions)} | reward {d.reward:g} | {outcome}"
            )
    shown = list(history)[-options.history_length :] if options.history_length else []
    if shown:
        lines.append("History:")
        lines.extend(f"- {_flat(h.observation)} | {_flat(h.action)}" for h in shown)
    lines += [
        f"Observation: {_flat(observation)}",
        f"Actions: {_join_actions(admissible_actions)}",
        f"Action: {_flat(action)}",
        NEXT_STATE_HEADER if options.use_reasoning else NEXT_STATE_HEADER_NO_REASONING,
        "",
    ]
    return "\n".join(lines)


def render_step_target(
    *,
    next_observation: str,
    next_admissible_actions: Sequence[str],
    reward: float,
    terminated: bool,
    reasoning: str | None = None,
) -> str:
    """Render the SFT target (the completion the model should produce).

    Raises:
        ValueError: an action contains the separator ``|`` (it could not be parsed back).
    """
    for a in next_admissible_actions:
        if "|" in a:
            raise ValueError(f"admissible action {a!r} contains '|', which the format reserves")
    parts = []
    if reasoning:
        parts.append(f"<think>{_flat(reasoning)}</think>")
    parts += [
        f"<observation>{_flat(next_observation)}</observation>",
        f"<actions>{_join_actions(next_admissible_actions)}</actions>",
        f"<reward>{reward:g}</reward>",
        f"<terminated>{'true' if terminated else 'false'}</terminated>",
    ]
    return "\n".join(parts)


_PATTERN = re.compile(
    r"\A\s*(?:<think>(?P<think>.*?)</think>\s*)?"
    r"<observation>(?P<observation>.*?)</observation>\s*"
    r"<actions>(?P<actions>.*?)</actions>\s*"
    r"<reward>(?P<reward>.*?)</reward>\s*"
    r"<terminated>(?P<terminated>.*?)</terminated>\s*\Z",
    re.DOTALL,
)
_TAGS = ("think", "observation", "actions", "reward", "terminated")


def parse_step_output(text: str) -> ParsedStep:
    """Parse a completion into a :class:`ParsedStep`.

    Raises:
        StepParseError: missing, repeated or out-of-order tags, trailing text, a reward that is
            not a finite number, a terminated flag other than true/false, an empty observation,
            no admissible actions in a non-terminal state, or undecodable bytes (U+FFFD).
    """
    if "\ufffd" in text:  # a byte-level model sampled an invalid UTF-8 sequence
        raise StepParseError("text contains undecodable bytes (U+FFFD)")
    for tag in _TAGS:
        if text.count(f"<{tag}>") > 1:
            raise StepParseError(f"tag <{tag}> appears more than once")
    m = _PATTERN.match(text)
    if m is None:
        missing = [t for t in _TAGS[1:] if f"<{t}>" not in text or f"</{t}>" not in text]
        reason = f"missing tags: {missing}" if missing else "tags out of order or trailing text"
        raise StepParseError(reason)
    observation = _flat(m["observation"])
    if not observation:
        raise StepParseError("empty <observation>")
    try:
        reward = float(m["reward"].strip())
    except ValueError:
        raise StepParseError(f"<reward> is not a number: {m['reward'].strip()!r}") from None
    if not math.isfinite(reward):
        raise StepParseError(f"<reward> is not finite: {reward}")
    flag = m["terminated"].strip().lower()
    if flag not in ("true", "false"):
        raise StepParseError(f"<terminated> must be true or false, got {flag!r}")
    actions = [a.strip() for a in m["actions"].split("|") if a.strip()]
    if not actions and flag == "false":
        raise StepParseError("no admissible actions in a non-terminal state")
    return ParsedStep(
        observation=observation,
        admissible_actions=actions,
        reward=reward,
        terminated=flag == "true",
        reasoning=_flat(m["think"] or ""),
    )
