"""Fixtures of the agent trainer tests: tiny causal-LM policies (1 layer, hidden 32, CPU)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_trainer.policy import LMPolicy
from dreamgym.llm.models import load_causal_lm

from .factories import TINY


@pytest.fixture(scope="session")
def make_policy() -> Callable[..., LMPolicy]:
    """Factory: a fresh tiny policy, ``make_policy(seed=0, **LMPolicy kwargs)``."""

    def make(seed: int = 0, **kwargs: object) -> LMPolicy:
        model, tokenizer = load_causal_lm(TINY, seed=seed)
        return LMPolicy(model, tokenizer, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="module")
def policy(make_policy: Callable[..., LMPolicy]) -> LMPolicy:
    """A tiny policy shared by a module's tests; tests must not change its weights."""
    return make_policy(seed=0)
