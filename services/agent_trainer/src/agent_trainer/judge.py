"""LLM-judge rubric of the experience model's predicted transitions (pure logic).

DreamGym evaluates its experience model with an LLM judge (GPT-4o, 100 randomly sampled
trajectories) that reads the state before, the action and the *predicted* next state and scores
four criteria 0 / 1 / 2 (arXiv 2511.03773, Figure 4 and Appendix C.4; ``paper.md`` §5.7):
causal state consistency, diversity & state variation, informativeness, and hallucination &
failure feedback. The judge answers
``{"rubric_scores": {"causal_consistency": 0|1|2, "diversity": …, "informativeness": …,
"hallucination": …}}``.

Here the unit is one held-out real *transition* (the rubric's input is one step), teacher-forced
as in :mod:`agent_trainer.fidelity`; the judge also sees the real next state, labelled as a
reference only. This module builds the prompt, parses replies (JSON in code fences or prose is
found; missing, non-integer or out-of-range scores are a parse failure, never an exception out of
:func:`judge_transitions`), samples transitions with a seeded RNG and aggregates the scores. The
HTTP call is injected (:data:`Ask`; the adapter is :mod:`agent_trainer.judge_client`).
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from dreamgym.experience_types import Prediction, PredictQuery
from dreamgym.types import Transition

__all__ = [
    "CRITERIA",
    "RUBRIC",
    "Ask",
    "JudgeItem",
    "JudgeParseError",
    "JudgeRequestError",
    "Judgement",
    "aggregate_judgements",
    "judge_fidelity",
    "judge_item",
    "judge_messages",
    "judge_transitions",
    "parse_rubric",
    "reply_text",
    "sample_indices",
]

CRITERIA: tuple[str, ...] = ("causal_consistency", "diversity", "informativeness", "hallucination")
"""The rubric's criteria, in the paper's order and with its JSON keys."""

RUBRIC = """\
You evaluate a simulator of a text environment. You are given the state before a step, the
agent's action, and the simulator's PREDICTED next state. Score the predicted next state on four
criteria, each 0, 1 or 2.

1. causal_consistency (Causal State Consistency): is the predicted state consistent with the
   state before and causally linked to the action?
   2 = consistent and appropriate to the action, with all expected updates;
   1 = mostly consistent, with minor gaps;
   0 = inconsistent, or not causally linked to the action.
2. diversity (Diversity & State Variation): does the state change in a substantive, coherent way?
   2 = substantive, coherent change (new results, updated filters, a new place or item...);
   1 = minimal or superficial change;
   0 = no meaningful change, or an incoherent jump.
3. informativeness (Informativeness): is the predicted state informative for the agent?
   2 = detailed, relevant and internally consistent;
   1 = sparse or partly inconsistent;
   0 = no information, irrelevant or inconsistent.
4. hallucination (Hallucination & Failure Feedback): does the state reflect an appropriate
   failure or empty-result signal instead of hallucinating success?
   2 = signals failure or success properly;
   1 = partial or ambiguous;
   0 = hallucinates success or ignores failure.

A REFERENCE next state, observed in the real environment after the same action, is shown to help
you judge what the action really does. Score the PREDICTED state, not the reference; a prediction
may differ in wording from the reference and still deserve full marks.

Answer with JSON only, in exactly this form, each <score> being 0, 1 or 2:
{"rubric_scores": {"causal_consistency": <score>, "diversity": <score>,
                   "informativeness": <score>, "hallucination": <score>}}"""

Message = dict[str, str]
Ask = Callable[[list[Message]], Any]
"""Sends chat messages to the judge and returns the decoded response body (OpenAI chat format).

Raises :class:`JudgeRequestError` when the endpoint failed after its retries, or
:class:`JudgeParseError` when the answer was not JSON at all."""


class JudgeParseError(ValueError):
    """A judge reply without a valid rubric; ``reason`` says what was wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class JudgeRequestError(RuntimeError):
    """The judge endpoint failed after its retries (the message never contains the API key)."""


@dataclass(frozen=True)
class JudgeItem:
    """One predicted transition shown to the judge.

    Attributes:
        task: the task instruction.
        observation: the state before (real).
        admissible_actions: actions admissible in the state before.
        action: the action taken.
        predicted_observation: the experience model's next observation.
        predicted_admissible_actions: its next admissible actions.
        predicted_reward: its reward (``None`` if it gave none).
        predicted_terminated: its episode-end flag (``None`` if it gave none).
        real_next_observation: the real next observation (reference only).
        real_reward: the real reward.
        real_terminated: the real episode-end flag.
    """

    task: str
    observation: str
    admissible_actions: tuple[str, ...]
    action: str
    predicted_observation: str
    predicted_admissible_actions: tuple[str, ...]
    predicted_reward: float | None
    predicted_terminated: bool | None
    real_next_observation: str
    real_reward: float
    real_terminated: bool


@dataclass(frozen=True)
class Judgement:
    """The judge's verdict on one item: ``scores`` (criterion → 0/1/2) or a failure.

    Attributes:
        scores: one score per :data:`CRITERIA` key, ``None`` on failure.
        failure: ``"parse"`` (no valid rubric in the reply) or ``"request"`` (the endpoint failed);
            ``None`` when scored.
        detail: why it failed (empty when scored).
    """

    scores: Mapping[str, int] | None = None
    failure: Literal["parse", "request"] | None = None
    detail: str = ""


def judge_item(query: PredictQuery, prediction: Prediction, label: Transition) -> JudgeItem:
    """The judge's view of one teacher-forced prediction and its real transition.

    Raises:
        ValueError: ``prediction`` carries an error or no observation (nothing to judge).
    """
    if prediction.error is not None or prediction.observation is None:
        raise ValueError("a failed prediction has no predicted state to judge")
    return JudgeItem(
        task=query.task,
        observation=query.observation,
        admissible_actions=tuple(query.admissible_actions),
        action=query.action,
        predicted_observation=prediction.observation,
        predicted_admissible_actions=tuple(prediction.admissible_actions),
        predicted_reward=prediction.reward,
        predicted_terminated=prediction.terminated,
        real_next_observation=label.next_observation,
        real_reward=label.reward,
        real_terminated=label.terminated,
    )


def _actions(actions: Sequence[str]) -> str:
    return ", ".join(actions) if actions else "(none)"


def _value(value: object) -> str:
    return "(not given)" if value is None else str(value)


def judge_messages(item: JudgeItem) -> list[Message]:
    """Chat messages asking the judge to score ``item``: the rubric, then the transition.

    Returns:
        ``[{"role": "system", "content": RUBRIC}, {"role": "user", "content": …}]``; the user
        message has the sections TASK, STATE BEFORE, ACTION, PREDICTED NEXT STATE (to score) and
        REFERENCE (real next state, not to score).
    """
    user = "\n".join(
        [
            "## TASK",
            item.task,
            "",
            "## STATE BEFORE",
            item.observation,
            f"Admissible actions: {_actions(item.admissible_actions)}",
            "",
            "## ACTION",
            item.action,
            "",
            "## PREDICTED NEXT STATE (score this)",
            item.predicted_observation,
            f"Admissible actions: {_actions(item.predicted_admissible_actions)}",
            f"Reward: {_value(item.predicted_reward)}",
            f"Episode ended: {_value(item.predicted_terminated)}",
            "",
            "## REFERENCE: REAL NEXT STATE (for comparison only; do not score it)",
            item.real_next_observation,
            f"Reward: {item.real_reward}",
            f"Episode ended: {item.real_terminated}",
            "",
            "Answer with the JSON rubric_scores object only.",
        ]
    )
    return [{"role": "system", "content": RUBRIC}, {"role": "user", "content": user}]


def reply_text(body: Any) -> str:
    """The assistant text of an OpenAI chat-completions response body.

    ``choices[0].message.content`` may be a string or a list of ``{"type": "text", "text": …}``
    parts (joined).

    Raises:
        JudgeParseError: the body has no such content.
    """
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise JudgeParseError("response has no choices[0].message.content") from None
    if isinstance(content, list):
        content = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    if not isinstance(content, str) or not content.strip():
        raise JudgeParseError("empty reply")
    return content


_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that starts at some ``{`` of ``text``, outermost first."""
    decoder, found, i = json.JSONDecoder(), [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def _rubric_scores(obj: object) -> dict[str, Any] | None:
    """The first ``rubric_scores`` object inside ``obj`` (depth first), if any."""
    if isinstance(obj, dict):
        if isinstance(obj.get("rubric_scores"), dict):
            return obj["rubric_scores"]  # type: ignore[no-any-return]
        children: list[object] = list(obj.values())
    elif isinstance(obj, list):
        children = list(obj)
    else:
        return None
    return next((r for r in map(_rubric_scores, children) if r is not None), None)


def _score(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise JudgeParseError(f"{name}={value!r} is not 0, 1 or 2")
    if isinstance(value, str) and value.strip() in ("0", "1", "2"):
        return int(value.strip())
    if isinstance(value, int | float) and value in (0, 1, 2):
        return int(value)
    raise JudgeParseError(f"{name}={value!r} is not 0, 1 or 2")


def parse_rubric(text: str) -> dict[str, int]:
    """The four scores of a judge reply.

    The rubric object is looked for in fenced code blocks first, then anywhere in the text: the
    first JSON object with a ``rubric_scores`` object is used (a bare object holding the four
    criteria is accepted too). Scores may be ``0``/``1``/``2`` as integers, integral floats or
    digit strings.

    Args:
        text: the judge's reply.

    Returns:
        ``{criterion: score}`` for every key of :data:`CRITERIA`, scores in {0, 1, 2}.

    Raises:
        JudgeParseError: no rubric object, a missing criterion, or a score outside {0, 1, 2}.
    """
    candidates = [*_FENCE.findall(text), text]
    objects = [obj for chunk in candidates for obj in _json_objects(chunk)]
    if not objects:
        raise JudgeParseError("no JSON object in the reply")
    rubric = next((r for r in map(_rubric_scores, objects) if r is not None), None)
    if rubric is None:
        rubric = next((o for o in objects if any(c in o for c in CRITERIA)), None)
    if rubric is None:
        raise JudgeParseError("no rubric_scores object in the reply")
    missing = [c for c in CRITERIA if c not in rubric]
    if missing:
        raise JudgeParseError(f"rubric_scores lacks {', '.join(missing)}")
    return {c: _score(c, rubric[c]) for c in CRITERIA}


def sample_indices(n: int, k: int, seed: int) -> list[int]:
    """``min(k, n)`` distinct indices of ``range(n)``, drawn with ``random.Random(seed)``, sorted.

    Raises:
        ValueError: ``n < 0`` or ``k < 0``.
    """
    if n < 0 or k < 0:
        raise ValueError(f"n and k must be >= 0, got n={n}, k={k}")
    return sorted(random.Random(seed).sample(range(n), min(k, n)))


def judge_transitions(
    items: Sequence[JudgeItem], ask: Ask, *, concurrency: int = 4
) -> list[Judgement | None]:
    """Ask the judge about every item (``concurrency`` requests at a time).

    A reply without a valid rubric is a ``"parse"`` failure. A request that failed after the
    endpoint's retries is a ``"request"`` failure and stops the judging: items not asked yet are
    ``None`` (an unreachable or misconfigured judge is not asked a hundred times).

    Args:
        items: what to judge.
        ask: sends messages, returns the response body (see :data:`Ask`).
        concurrency: requests in flight at once (>= 1).

    Returns:
        One :class:`Judgement` per item, or ``None`` for items not asked.

    Raises:
        ValueError: ``concurrency < 1``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    stop = threading.Event()

    def one(item: JudgeItem) -> Judgement | None:
        if stop.is_set():
            return None
        try:
            return Judgement(scores=parse_rubric(reply_text(ask(judge_messages(item)))))
        except JudgeParseError as exc:
            return Judgement(failure="parse", detail=exc.reason)
        except JudgeRequestError as exc:
            stop.set()
            return Judgement(failure="request", detail=str(exc)[:300])

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge") as pool:
        return list(pool.map(one, items))


def aggregate_judgements(
    judgements: Sequence[Judgement | None], *, model: str, population: int
) -> dict[str, Any]:
    """Per-criterion means on the 0–2 scale and the failure counts.

    Args:
        judgements: one per sampled item (``None``: not asked, see :func:`judge_transitions`).
        model: the judge model's name (reported).
        population: transitions the sample was drawn from.

    Returns:
        ``model``; ``population``; ``sampled``; ``judged`` (valid rubrics); ``parse_failures``;
        ``request_failures``; ``not_asked``; ``means`` (criterion → mean score in [0, 2], or
        ``None`` when nothing was judged); ``counts`` (criterion → ``[n0, n1, n2]``); ``error``
        (the first request failure, or ``None``).
    """
    scored = [j.scores for j in judgements if j is not None and j.scores is not None]
    failures = [j for j in judgements if j is not None and j.failure is not None]
    request = [j for j in failures if j.failure == "request"]
    return {
        "model": model,
        "population": population,
        "sampled": len(judgements),
        "judged": len(scored),
        "parse_failures": sum(j.failure == "parse" for j in failures),
        "request_failures": len(request),
        "not_asked": sum(j is None for j in judgements),
        "means": {
            c: (sum(s[c] for s in scored) / len(scored) if scored else None) for c in CRITERIA
        },
        "counts": {c: [sum(s[c] == v for s in scored) for v in (0, 1, 2)] for c in CRITERIA},
        "error": request[0].detail if request else None,
    }


def judge_fidelity(
    queries: Sequence[PredictQuery],
    predictions: Sequence[Prediction],
    labels: Sequence[Transition],
    *,
    ask: Ask,
    model: str,
    max_transitions: int,
    seed: int,
    concurrency: int = 4,
) -> dict[str, Any]:
    """Judge a seeded sample of the parsed predictions of a fidelity run.

    Predictions the experience model failed to produce (counted by ``parse_failure_rate`` of
    :func:`agent_trainer.fidelity.fidelity_metrics`) have no state to judge and are not sampled.

    Args:
        queries, predictions, labels: aligned, as in
            :func:`agent_trainer.fidelity.measure_fidelity`.
        ask: the judge endpoint (see :data:`Ask`).
        model: the judge model's name (reported).
        max_transitions: at most this many transitions are judged (paper: 100 trajectories).
        seed: sampling seed.
        concurrency: judge requests at once.

    Returns:
        :func:`aggregate_judgements` of the sample.

    Raises:
        ValueError: the three sequences differ in length.
    """
    rows = list(zip(queries, predictions, labels, strict=True))
    usable = [r for r in rows if r[1].error is None and r[1].observation is not None]
    picked = [usable[i] for i in sample_indices(len(usable), max_transitions, seed)]
    items = [judge_item(q, p, t) for q, p, t in picked]
    judgements = judge_transitions(items, ask, concurrency=concurrency)
    return aggregate_judgements(judgements, model=model, population=len(usable))
