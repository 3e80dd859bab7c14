"""Tests of agent_trainer.judge: the rubric prompt, reply parsing, sampling and aggregation."""

from __future__ import annotations

import json
import threading

import pytest

from agent_trainer.judge import (
    CRITERIA,
    RUBRIC,
    JudgeItem,
    Judgement,
    JudgeParseError,
    JudgeRequestError,
    aggregate_judgements,
    judge_fidelity,
    judge_item,
    judge_messages,
    judge_transitions,
    parse_rubric,
    reply_text,
    sample_indices,
)
from dreamgym.errors import ErrorInfo
from dreamgym.experience_types import Prediction, PredictQuery
from dreamgym.types import Transition


def rubric(c: int, d: int, i: int, h: int) -> str:
    scores = {"causal_consistency": c, "diversity": d, "informativeness": i, "hallucination": h}
    return json.dumps({"rubric_scores": scores})


def chat(content: object) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def item(n: int = 0) -> JudgeItem:
    return JudgeItem(
        task=f"Find the coin {n}.",
        observation=f"You are in the kitchen {n}.",
        admissible_actions=("move east", "look"),
        action="move east",
        predicted_observation=f"You are in the pantry {n}.",
        predicted_admissible_actions=("move west",),
        predicted_reward=0.0,
        predicted_terminated=None,
        real_next_observation=f"You are in the hallway {n}.",
        real_reward=0.0,
        real_terminated=False,
    )


# -- prompt -------------------------------------------------------------------------------------


def test_rubric_defines_every_criterion_and_the_0_1_2_scale():
    for key in CRITERIA:
        assert key in RUBRIC
    for title in (
        "Causal State Consistency",
        "Diversity & State Variation",
        "Informativeness",
        "Hallucination & Failure Feedback",
    ):
        assert title in RUBRIC
    assert RUBRIC.count("2 = ") == 4 and RUBRIC.count("1 = ") == 4 and RUBRIC.count("0 = ") == 4
    assert '"rubric_scores"' in RUBRIC


def test_judge_messages_show_state_action_prediction_and_labelled_reference():
    system, user = judge_messages(item(3))

    assert system == {"role": "system", "content": RUBRIC}
    assert user["role"] == "user"
    text = user["content"]
    sections = [
        "## TASK",
        "Find the coin 3.",
        "## STATE BEFORE",
        "You are in the kitchen 3.",
        "## ACTION",
        "move east",
        "## PREDICTED NEXT STATE (score this)",
        "You are in the pantry 3.",
        "## REFERENCE: REAL NEXT STATE (for comparison only; do not score it)",
        "You are in the hallway 3.",
    ]
    at = 0
    for section in sections:  # in this order
        at = text.index(section, at) + len(section)
    assert "Admissible actions: move east, look" in text
    assert "Admissible actions: move west" in text
    assert "Episode ended: (not given)" in text  # the prediction's missing flag
    assert "Episode ended: False" in text  # the reference's


def test_judge_item_takes_the_state_from_the_query_and_the_reference_from_the_label():
    query = PredictQuery(
        task="t", observation="before", admissible_actions=["a"], action="a", environment="e"
    )
    prediction = Prediction(observation="predicted", reward=1.0, terminated=True)
    label = Transition(
        step=0,
        observation="before",
        action="a",
        next_observation="real after",
        reward=0.0,
        terminated=False,
    )

    got = judge_item(query, prediction, label)

    assert (got.observation, got.action, got.predicted_observation) == ("before", "a", "predicted")
    assert (got.predicted_reward, got.predicted_terminated) == (1.0, True)
    assert (got.real_next_observation, got.real_reward, got.real_terminated) == (
        "real after",
        0.0,
        False,
    )


def test_judge_item_of_a_failed_prediction_raises():
    query = PredictQuery(task="t", observation="o", action="a", environment="e")
    failed = Prediction(error=ErrorInfo(type="malformed_transition", message="bad", code=502))
    label = Transition(step=0, observation="o", action="a", next_observation="n", reward=0.0)

    with pytest.raises(ValueError, match="failed prediction"):
        judge_item(query, failed, label)


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        rubric(2, 1, 0, 2),
        f"```json\n{rubric(2, 1, 0, 2)}\n```",
        f"Here is my verdict:\n```\n{rubric(2, 1, 0, 2)}\n```\nHope this helps.",
        f"The state is plausible. {rubric(2, 1, 0, 2)} That is all.",
        'Reasoning {not json}. {"rubric_scores": {"causal_consistency": 2, "diversity": "1", '
        '"informativeness": 0.0, "hallucination": 2}, "notes": "ok"}',
        '{"verdict": {"rubric_scores": {"causal_consistency": 2, "diversity": 1, '
        '"informativeness": 0, "hallucination": 2}}}',
        '{"causal_consistency": 2, "diversity": 1, "informativeness": 0, "hallucination": 2}',
    ],
    ids=["bare", "fenced", "fenced-prose", "inline-prose", "lenient-types", "nested", "flat"],
)
def test_parse_rubric_finds_the_scores(text):
    assert parse_rubric(text) == {
        "causal_consistency": 2,
        "diversity": 1,
        "informativeness": 0,
        "hallucination": 2,
    }


def test_parse_rubric_prefers_the_fenced_block_over_prose_objects():
    text = f'Example: {{"x": 1}}\n```json\n{rubric(0, 0, 1, 1)}\n```'

    assert parse_rubric(text)["informativeness"] == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The prediction looks fine, I give it full marks.", "no JSON object"),
        ('{"score": 2}', "no rubric_scores"),
        ('{"rubric_scores": {"causal_consistency": 2, "diversity": 1}}', "lacks informativeness"),
        (rubric(3, 1, 1, 1), "causal_consistency=3"),
        (rubric(2, -1, 1, 1), "diversity=-1"),
        (rubric(2, 1, 1, 1).replace('"hallucination": 1', '"hallucination": 1.5'), "1.5"),
        (rubric(2, 1, 1, 1).replace('"hallucination": 1', '"hallucination": true'), "True"),
        (rubric(2, 1, 1, 1).replace('"hallucination": 1', '"hallucination": "high"'), "high"),
        (rubric(2, 1, 1, 1).replace('"hallucination": 1', '"hallucination": null'), "None"),
        ('{"rubric_scores": {"causal_consistency": 2, ', "no JSON object"),
    ],
    ids=[
        "prose",
        "other-json",
        "missing",
        "above",
        "below",
        "fraction",
        "bool",
        "word",
        "null",
        "truncated",
    ],
)
def test_parse_rubric_rejects_invalid_replies_with_a_reason(text, reason):
    with pytest.raises(JudgeParseError) as info:
        parse_rubric(text)

    assert reason in info.value.reason


def test_reply_text_reads_string_and_part_list_contents():
    assert reply_text(chat("hello")) == "hello"
    parts = [{"type": "text", "text": "hel"}, {"type": "image"}, {"type": "text", "text": "lo"}]
    assert reply_text(chat(parts)) == "hello"


@pytest.mark.parametrize(
    "body",
    [{}, {"choices": []}, {"choices": [{"message": {}}]}, chat(None), chat("  "), "text", None],
)
def test_reply_text_without_content_is_a_parse_error(body):
    with pytest.raises(JudgeParseError):
        reply_text(body)


# -- sampling -----------------------------------------------------------------------------------


def test_sample_indices_is_seeded_distinct_sorted_and_capped():
    a = sample_indices(50, 10, seed=7)

    assert a == sample_indices(50, 10, seed=7)
    assert a != sample_indices(50, 10, seed=8)
    assert len(set(a)) == 10 and a == sorted(a) and all(0 <= i < 50 for i in a)
    assert sample_indices(4, 100, seed=0) == [0, 1, 2, 3]
    assert sample_indices(0, 5, seed=0) == []


def test_sample_indices_rejects_negative_sizes():
    with pytest.raises(ValueError):
        sample_indices(-1, 3, seed=0)


# -- aggregation --------------------------------------------------------------------------------


def test_aggregate_means_counts_and_failures_hand_case():
    scores = [
        dict(zip(CRITERIA, (2, 1, 2, 0), strict=True)),
        dict(zip(CRITERIA, (1, 1, 0, 2), strict=True)),
        dict(zip(CRITERIA, (2, 0, 2, 2), strict=True)),
    ]
    judgements = [
        Judgement(scores=scores[0]),
        Judgement(failure="parse", detail="no JSON object in the reply"),
        Judgement(scores=scores[1]),
        Judgement(scores=scores[2]),
        Judgement(failure="request", detail="judge endpoint answered 503: busy"),
        None,
    ]

    got = aggregate_judgements(judgements, model="judge-7b", population=40)

    assert got == {
        "model": "judge-7b",
        "population": 40,
        "sampled": 6,
        "judged": 3,
        "parse_failures": 1,
        "request_failures": 1,
        "not_asked": 1,
        "means": {
            "causal_consistency": 5 / 3,
            "diversity": 2 / 3,
            "informativeness": 4 / 3,
            "hallucination": 4 / 3,
        },
        "counts": {
            "causal_consistency": [0, 1, 2],
            "diversity": [1, 2, 0],
            "informativeness": [1, 0, 2],
            "hallucination": [1, 0, 2],
        },
        "error": "judge endpoint answered 503: busy",
    }


def test_aggregate_with_nothing_judged_has_no_means():
    got = aggregate_judgements([Judgement(failure="parse", detail="x")], model="m", population=1)

    assert got["means"] == dict.fromkeys(CRITERIA)
    assert got["judged"] == 0 and got["parse_failures"] == 1 and got["error"] is None


# -- judging with an injected endpoint ----------------------------------------------------------


def test_judge_transitions_scores_and_counts_malformed_replies_without_raising():
    replies = {
        "kitchen 0": chat(rubric(2, 2, 2, 2)),
        "kitchen 1": chat("Looks good to me!"),
        "kitchen 2": chat(f"```json\n{rubric(0, 1, 1, 0)}\n```"),
        "kitchen 3": chat(rubric(5, 1, 1, 1)),
        "kitchen 4": {"unexpected": "shape"},
    }

    def ask(messages):
        return next(v for k, v in replies.items() if k in messages[1]["content"])

    got = judge_transitions([item(n) for n in range(5)], ask, concurrency=3)

    assert [j.scores for j in got] == [
        dict.fromkeys(CRITERIA, 2),
        None,
        dict(zip(CRITERIA, (0, 1, 1, 0), strict=True)),
        None,
        None,
    ]
    assert [j.failure for j in got] == [None, "parse", None, "parse", "parse"]
    assert "causal_consistency=5" in got[3].detail


def test_judge_transitions_stops_after_a_request_failure():
    calls = []

    def ask(messages):
        calls.append(messages)
        if len(calls) == 2:
            raise JudgeRequestError("judge endpoint answered 401: invalid api key")
        return chat(rubric(1, 1, 1, 1))

    got = judge_transitions([item(n) for n in range(6)], ask, concurrency=1)

    assert len(calls) == 2
    assert got[0] is not None and got[0].scores == dict.fromkeys(CRITERIA, 1)
    assert got[1] == Judgement(
        failure="request", detail="judge endpoint answered 401: invalid api key"
    )
    assert got[2:] == [None] * 4


def test_judge_transitions_runs_requests_concurrently():
    barrier = threading.Barrier(3, timeout=10)

    def ask(messages):
        barrier.wait()  # only returns once 3 requests are in flight together
        return chat(rubric(1, 1, 1, 1))

    got = judge_transitions([item(n) for n in range(3)], ask, concurrency=3)

    assert all(j is not None and j.failure is None for j in got)


def test_judge_transitions_rejects_zero_concurrency():
    with pytest.raises(ValueError, match="concurrency"):
        judge_transitions([item()], lambda m: chat(""), concurrency=0)


def fidelity_rows(n: int, failed: set[int]):
    queries, predictions, labels = [], [], []
    for i in range(n):
        queries.append(
            PredictQuery(task="t", observation=f"before {i}", action="look", environment="e")
        )
        predictions.append(
            Prediction(error=ErrorInfo(type="malformed_transition", message="bad", code=502))
            if i in failed
            else Prediction(observation=f"predicted {i}", reward=0.0, terminated=False)
        )
        labels.append(
            Transition(
                step=0, observation=f"before {i}", action="look", next_observation="n", reward=0.0
            )
        )
    return queries, predictions, labels


def recording_ask(states: list[str]):
    """An endpoint that records the STATE BEFORE of each item and scores (2, 1, 1, 0)."""
    lock = threading.Lock()

    def ask(messages):
        with lock:
            states.append(messages[1]["content"].split("## STATE BEFORE\n")[1].split("\n")[0])
        return chat(rubric(2, 1, 1, 0))

    return ask


def test_judge_fidelity_samples_parsed_predictions_with_the_seed():
    queries, predictions, labels = fidelity_rows(12, failed={0, 5, 7})
    first: list[str] = []
    again: list[str] = []
    other: list[str] = []
    kwargs = {"model": "m", "max_transitions": 4}

    got = judge_fidelity(queries, predictions, labels, ask=recording_ask(first), seed=3, **kwargs)
    judge_fidelity(queries, predictions, labels, ask=recording_ask(again), seed=3, **kwargs)
    judge_fidelity(queries, predictions, labels, ask=recording_ask(other), seed=4, **kwargs)

    assert sorted(first) == sorted(again) and len(set(first)) == 4
    assert sorted(first) != sorted(other)
    assert not {"before 0", "before 5", "before 7"} & set(first)  # failed predictions: not judged
    assert got["population"] == 9 and got["sampled"] == 4 and got["judged"] == 4
    assert got["means"] == {
        "causal_consistency": 2.0,
        "diversity": 1.0,
        "informativeness": 1.0,
        "hallucination": 0.0,
    }


def test_judge_fidelity_with_fewer_transitions_than_the_cap_judges_them_all():
    queries, predictions, labels = fidelity_rows(3, failed=set())

    got = judge_fidelity(
        queries,
        predictions,
        labels,
        ask=lambda m: chat(rubric(1, 1, 1, 1)),
        model="m",
        max_transitions=100,
        seed=0,
    )

    assert (got["population"], got["sampled"], got["judged"]) == (3, 3, 3)
