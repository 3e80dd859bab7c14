"""Tests of the experience model's batched prediction (experience_model.domain.simulator)."""

from __future__ import annotations

import pytest

from dreamgym.errors import BackendUnavailableError, MalformedTransitionError
from dreamgym.testing.fakes import FakeLLMBackend
from experience_model.domain.prompts import HistoryStep, PromptOptions
from experience_model.domain.simulator import (
    ExperienceModel,
    SamplingConfig,
    StepPrediction,
    StepQuery,
)

from ..factories import (
    GARBAGE,
    FakeRetriever,
    action_of,
    make_example,
    scripted_responder,
    step_completion,
)

BAD = "<observation>half a transition"


def query(action: str = "move north", *, seed: int | None = None, **overrides) -> StepQuery:
    fields = {
        "task": "Find the coin.",
        "environment": "twx-coin",
        "observation": "You are in the kitchen.",
        "admissible_actions": ["move north", "look"],
        "action": action,
        "seed": seed,
    }
    return StepQuery(**(fields | overrides))


def model(
    backend, retriever=None, *, parse_retries: int = 2, temperature: float = 1.0, **kwargs
) -> ExperienceModel:
    sampling = SamplingConfig(
        parse_retries=parse_retries,
        temperature=temperature,
        retry_temperature=0.7,
        max_new_tokens=64,
    )
    return ExperienceModel(backend, retriever, sampling=sampling, **kwargs)


async def test_predict_well_formed_output_parsed_in_one_attempt():
    fake = FakeLLMBackend(
        [
            step_completion(
                "You are in the pantry.", ("take coin",), 0.0, reasoning="north of the kitchen"
            )
        ]
    )

    (result,) = await model(fake).predict([query()])

    assert isinstance(result, StepPrediction)
    assert result.observation == "You are in the pantry."
    assert result.admissible_actions == ["take coin"]
    assert result.reasoning == "north of the kitchen"
    assert result.attempts == 1
    assert result.completion_tokens > 0 and result.prompt_tokens > 0


async def test_predict_unparseable_then_good_retries_and_reports_attempts():
    fake = FakeLLMBackend([BAD, step_completion("You are in the pantry.")])
    m = model(fake)

    (result,) = await m.predict([query()])

    assert isinstance(result, StepPrediction)
    assert result.observation == "You are in the pantry."
    assert result.attempts == 2
    assert len(fake.batches) == 2
    assert fake.batches[0] == fake.batches[1]  # the same prompt is regenerated
    assert m.parse_failures == 1


async def test_predict_always_malformed_row_fails_alone_after_all_retries():
    fake = FakeLLMBackend(responder=scripted_responder)
    m = model(fake, parse_retries=2)

    results = await m.predict([query("move north"), query(GARBAGE), query("look")])

    assert [type(r) for r in results] == [StepPrediction, MalformedTransitionError, StepPrediction]
    failed = results[1]
    assert failed.attempts == 3
    assert failed.status_code == 502
    assert "missing tags" in failed.reason
    assert failed.raw_text == "I am not sure what happens next."
    assert results[0].observation == "You did move north."
    assert results[2].observation == "You did look."
    assert [len(b) for b in fake.batches] == [3, 1, 1]  # only the failing row is regenerated
    assert all(action_of(p) == GARBAGE for p in fake.batches[1] + fake.batches[2])


async def test_predict_zero_retries_fails_after_one_attempt():
    fake = FakeLLMBackend([BAD])

    (result,) = await model(fake, parse_retries=0).predict([query()])

    assert isinstance(result, MalformedTransitionError)
    assert result.attempts == 1
    assert fake.remaining == 0


async def test_predict_retrieved_examples_appear_in_prompt_and_refs():
    retriever = FakeRetriever(
        [
            make_example("traj-7#3", "A REMEMBERED CELLAR"),
            make_example("traj-8#0", "A REMEMBERED ATTIC"),
        ]
    )
    fake = FakeLLMBackend(responder=scripted_responder)

    (result,) = await model(fake, retriever, k=2).predict([query()])

    assert "A REMEMBERED CELLAR" in fake.prompts[0]
    assert "A REMEMBERED ATTIC" in fake.prompts[0]
    assert result.retrieved == ["traj-7#3", "traj-8#0"]
    assert retriever.calls[0][1] == 2
    assert retriever.calls[0][0][0].action == "move north"


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"options": PromptOptions(use_retrieval=False)}])
async def test_predict_retrieval_disabled_does_not_call_retriever(kwargs):
    retriever = FakeRetriever()
    fake = FakeLLMBackend(responder=scripted_responder)

    (result,) = await model(fake, retriever, **kwargs).predict([query()])

    assert retriever.calls == []
    assert "Examples:" not in fake.prompts[0]
    assert result.retrieved == []


async def test_predict_retriever_failure_raises():
    class Down:
        async def retrieve(self, queries, k):
            raise BackendUnavailableError("replay store down")

    with pytest.raises(BackendUnavailableError):
        await model(FakeLLMBackend(responder=scripted_responder), Down()).predict([query()])


async def test_predict_history_limited_to_history_length():
    history = [HistoryStep(f"room {i}", f"step {i}") for i in range(4)]
    fake = FakeLLMBackend(responder=scripted_responder)

    await model(fake, options=PromptOptions(history_length=1)).predict([query(history=history)])

    assert "room 3 | step 3" in fake.prompts[0]
    assert "room 2" not in fake.prompts[0]


async def test_predict_seeds_propagate_to_sampling_params():
    fake = FakeLLMBackend(responder=scripted_responder)

    await model(fake).predict([query(seed=11), query(seed=22), query(seed=None)])

    assert [p.seed for p in fake.params] == [11, 22, None]
    assert all(p.max_new_tokens == 64 and p.temperature == 1.0 for p in fake.params)


async def test_predict_retry_uses_new_seed_and_at_least_retry_temperature():
    fake = FakeLLMBackend(responder=scripted_responder)

    await model(fake, parse_retries=2, temperature=0.0).predict([query(GARBAGE, seed=5)])

    seeds = [p.seed for p in fake.params]
    assert seeds[0] == 5
    assert len(set(seeds)) == 3
    assert fake.params[0].temperature == 0.0
    assert all(p.temperature == 0.7 for p in fake.params[1:])


async def test_predict_retry_of_unseeded_query_stays_unseeded():
    fake = FakeLLMBackend([BAD, step_completion()])

    await model(fake).predict([query(seed=None)])

    assert [p.seed for p in fake.params] == [None, None]


async def test_predict_same_seed_same_retry_seeds():
    first, second = (FakeLLMBackend(responder=scripted_responder) for _ in range(2))

    await model(first).predict([query(GARBAGE, seed=3)])
    await model(second).predict([query(GARBAGE, seed=3)])

    assert [p.seed for p in first.params] == [p.seed for p in second.params]


async def test_predict_counts_generated_tokens():
    fake = FakeLLMBackend([BAD, step_completion()])
    m = model(fake)

    await m.predict([query()])

    assert m.generated_tokens == sum(c.completion.num_completion_tokens for c in fake.calls)
    assert m.generated_tokens > 0


# -- per-query prompt switches (episode reset options) -------------------------------------------


async def test_predict_query_without_reasoning_marks_prompt_and_drops_the_trace():
    fake = FakeLLMBackend(responder=lambda p, s: step_completion("Room.", reasoning="because"))
    off = PromptOptions(history_length=2, use_reasoning=False)

    with_trace, without = await model(fake).predict([query(), query(options=off)])

    assert with_trace.reasoning == "because"
    assert without.reasoning == ""
    assert fake.prompts[0].endswith("### Next state\n")
    assert fake.prompts[1].endswith("### Next state (no reasoning)\n")


async def test_predict_retrieves_only_for_queries_with_retrieval_on():
    retriever = FakeRetriever()
    fake = FakeLLMBackend(responder=lambda p, s: step_completion("Room."))
    off = PromptOptions(history_length=2, use_retrieval=False)

    results = await model(fake, retriever, k=1).predict(
        [query(options=off), query("look"), query(options=off)]
    )

    assert [len(q) for q, _ in retriever.calls] == [1]
    assert retriever.calls[0][0][0].action == "look"
    assert [r.retrieved for r in results] == [[], ["traj-1#0"], []]
    assert "Examples:" not in fake.prompts[0] and "Examples:" in fake.prompts[1]


async def test_predict_query_history_length_overrides_the_models():
    fake = FakeLLMBackend(responder=lambda p, s: step_completion("Room."))
    history = [HistoryStep(f"old room {i}", f"old action {i}") for i in range(3)]
    one = PromptOptions(history_length=1)

    await model(fake, options=PromptOptions(history_length=3)).predict(
        [query(history=history), query(history=history, options=one)]
    )

    assert "old room 0" in fake.prompts[0]
    assert "old room 0" not in fake.prompts[1] and "old room 2" in fake.prompts[1]
