"""The LLM backend port used by the experience model and the task generator.

A backend turns a batch of prompts into a batch of completions. Implementations:

- :class:`dreamgym.llm.transformers_backend.TransformersBackend` — in-process Hugging Face model
  (CPU here, GPU elsewhere), batched ``generate``;
- :class:`dreamgym.llm.openai_backend.OpenAICompatibleBackend` — any OpenAI-compatible
  ``/v1/completions`` endpoint (vLLM, SGLang);
- :class:`dreamgym.testing.fakes.FakeLLMBackend` — scripted completions for unit tests.

Backends are synchronous and may block: services call them from a worker thread, never on the
event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

__all__ = ["Completion", "LLMBackend", "SamplingParams"]


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """Sampling parameters for one prompt.

    Attributes:
        max_new_tokens: generation budget in tokens (> 0).
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass in (0, 1].
        seed: per-request seed; equal seeds with equal prompts give equal samples on one backend.
        stop: strings that end generation (not included in the completion text).
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be > 0, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(frozen=True)
class Completion:
    """One generated completion.

    Attributes:
        text: decoded completion, stop string removed.
        num_prompt_tokens: prompt length in tokens.
        num_completion_tokens: generated tokens.
        finish_reason: ``"stop"`` (EOS or stop string) or ``"length"`` (budget exhausted).
    """

    text: str
    num_prompt_tokens: int = 0
    num_completion_tokens: int = 0
    finish_reason: Literal["stop", "length"] = "stop"


@runtime_checkable
class LLMBackend(Protocol):
    """Batched text generation."""

    name: str

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Generate one completion per prompt.

        Args:
            prompts: B prompt strings.
            params: B sampling parameter sets (one per prompt).

        Returns:
            B completions, in prompt order.
        """
        ...
