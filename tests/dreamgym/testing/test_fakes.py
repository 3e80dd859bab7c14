"""Tests of the shared test doubles (dreamgym.testing.fakes)."""

from __future__ import annotations

import pytest

from dreamgym.llm.base import Completion, LLMBackend, SamplingParams
from dreamgym.testing.fakes import FakeLLMBackend, ScriptExhaustedError


def test_fake_llm_backend_satisfies_protocol():
    assert isinstance(FakeLLMBackend(), LLMBackend)


def test_fake_llm_backend_script_returned_in_order_across_calls():
    fake = FakeLLMBackend(["one", "two", "three"])

    first = fake.generate(["p1", "p2"], [SamplingParams()] * 2)
    second = fake.generate(["p3"], [SamplingParams()])

    assert [c.text for c in first + second] == ["one", "two", "three"]
    assert fake.remaining == 0


def test_fake_llm_backend_records_prompts_params_and_batches():
    fake = FakeLLMBackend(["a", "b"])
    params = [SamplingParams(seed=1), SamplingParams(seed=2, temperature=0.0)]

    fake.generate(["first prompt", "second prompt"], params)

    assert fake.prompts == ["first prompt", "second prompt"]
    assert fake.params == params
    assert fake.batches == [["first prompt", "second prompt"]]
    assert fake.calls[1].completion.text == "b"


def test_fake_llm_backend_responder_used_after_script():
    fake = FakeLLMBackend(["scripted"], responder=lambda prompt, params: f"{prompt}:{params.seed}")

    out = fake.generate(["x", "y"], [SamplingParams(seed=7), SamplingParams(seed=8)])

    assert [c.text for c in out] == ["scripted", "y:8"]


def test_fake_llm_backend_completion_items_pass_through():
    scripted = Completion(text="cut", finish_reason="length", num_completion_tokens=5)
    fake = FakeLLMBackend([scripted])

    (out,) = fake.generate(["p"], [SamplingParams()])

    assert out is scripted


def test_fake_llm_backend_scripted_exception_is_raised():
    fake = FakeLLMBackend([RuntimeError("backend down")])

    with pytest.raises(RuntimeError, match="backend down"):
        fake.generate(["p"], [SamplingParams()])


def test_fake_llm_backend_exhausted_script_raises():
    fake = FakeLLMBackend(["only"])

    with pytest.raises(ScriptExhaustedError, match="exhausted after 1"):
        fake.generate(["p1", "p2"], [SamplingParams()] * 2)


def test_fake_llm_backend_length_mismatch_raises():
    with pytest.raises(ValueError, match="equal length"):
        FakeLLMBackend(["a"]).generate(["p1", "p2"], [SamplingParams()])
