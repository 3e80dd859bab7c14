"""Tests of the in-process vLLM backend (dreamgym.llm.vllm_backend) with ``vllm`` mocked.

vLLM needs CUDA and is not installed on CPU machines; a stand-in ``vllm`` module (engine args,
an async engine streaming partial then final outputs, sampling params) checks what the backend
sends and how it reads the answers. The real engine runs only on GPU nodes.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import types
from types import SimpleNamespace

import pytest

from dreamgym.llm.base import LLMBackend, SamplingParams
from dreamgym.llm.vllm_backend import VLLMAsyncBackend, import_vllm

HANG = 999  # max_new_tokens that makes the fake engine never finish


class FakeEngine:
    def __init__(self, args) -> None:
        self.args = args
        self.requests: list[tuple[dict, object, str]] = []
        self.threads: set[str] = set()
        self.aborted: list[str] = []
        self.shut_down = False

    async def generate(self, prompt, sampling_params, request_id):
        self.threads.add(threading.current_thread().name)
        self.requests.append((prompt, sampling_params, request_id))
        if sampling_params.max_tokens == HANG:
            await asyncio.Event().wait()
        n = len(prompt["prompt_token_ids"])
        yield SimpleNamespace(
            outputs=[SimpleNamespace(text="par", token_ids=[1], finish_reason=None)]
        )
        reason = "length" if sampling_params.max_tokens <= 3 else "stop"
        text = f"{n} tokens seed={sampling_params.seed}"
        yield SimpleNamespace(
            outputs=[SimpleNamespace(text=text, token_ids=[1, 2, 3], finish_reason=reason)]
        )

    async def abort(self, request_id):
        self.aborted.append(request_id)

    def shutdown(self):
        self.shut_down = True


class FakeSamplingParams:
    def __init__(self, **kwargs) -> None:
        self.__dict__.update(kwargs)
        self.kwargs = kwargs


class FakeTokenizer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        self.calls.append((text, add_special_tokens))
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture()
def fake_vllm(monkeypatch) -> types.ModuleType:
    module = types.ModuleType("vllm")
    module.AsyncEngineArgs = lambda **kwargs: SimpleNamespace(**kwargs)
    module.AsyncLLMEngine = SimpleNamespace(from_engine_args=FakeEngine)
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


@pytest.fixture()
def backend(fake_vllm):
    made = VLLMAsyncBackend(
        "/models/em", engine_args={"gpu_memory_utilization": 0.5}, tokenizer=FakeTokenizer()
    )
    yield made
    made.close()


def test_backend_satisfies_protocol_and_builds_engine_from_args(backend):
    assert isinstance(backend, LLMBackend) and backend.name == "vllm"
    assert backend.engine.args.model == "/models/em"
    assert backend.engine.args.gpu_memory_utilization == 0.5


def test_generate_sends_token_ids_and_per_request_sampling(backend):
    params = [
        SamplingParams(max_new_tokens=3, temperature=0.0, seed=None),
        SamplingParams(max_new_tokens=40, temperature=0.7, top_p=0.9, seed=11, stop=("</x>",)),
    ]

    out = backend.generate(["abcd", "xy"], params)

    assert [c.text for c in out] == ["4 tokens seed=None", "2 tokens seed=11"]
    assert [c.finish_reason for c in out] == ["length", "stop"]
    assert [(c.num_prompt_tokens, c.num_completion_tokens) for c in out] == [(4, 3), (2, 3)]
    assert backend.tokenizer.calls == [("abcd", False), ("xy", False)]
    sent = {prompt["prompt_token_ids"][0]: sp.kwargs for prompt, sp, _ in backend.engine.requests}
    assert sent[ord("a")] == {
        "n": 1, "max_tokens": 3, "temperature": 0.0, "top_p": 1.0, "seed": None, "stop": None,
    }  # fmt: skip
    assert sent[ord("x")]["stop"] == ["</x>"] and sent[ord("x")]["seed"] == 11
    assert len({rid for _, _, rid in backend.engine.requests}) == 2


def test_generate_runs_the_engine_on_its_own_loop_thread(backend):
    results: list[str] = []

    def from_worker_thread() -> None:
        results.extend(c.text for c in backend.generate(["a"], [SamplingParams()]))

    worker = threading.Thread(target=from_worker_thread)
    worker.start()
    worker.join(10.0)

    assert results == ["1 tokens seed=None"]
    assert backend.engine.threads == {"vllm-engine-loop"}


def test_generate_mismatched_params_raises(backend):
    with pytest.raises(ValueError, match="1 prompts but 2"):
        backend.generate(["a"], [SamplingParams(), SamplingParams()])


def test_generate_past_timeout_aborts_the_engine_request(fake_vllm):
    backend = VLLMAsyncBackend("/m", tokenizer=FakeTokenizer(), timeout_s=0.2)
    try:
        with pytest.raises(TimeoutError):
            backend.generate(["a"], [SamplingParams(max_new_tokens=HANG)])
        deadline = time.monotonic() + 5.0
        while not backend.engine.aborted and time.monotonic() < deadline:
            time.sleep(0.01)

        assert backend.engine.aborted == [backend.engine.requests[0][2]]
    finally:
        backend.close()
    assert backend.engine.shut_down


def test_missing_vllm_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)

    with pytest.raises(ImportError, match=r"dreamgym\[vllm\]"):
        import_vllm()
