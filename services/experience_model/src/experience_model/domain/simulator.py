"""The experience model M_exp: retrieval-grounded, batched next-state prediction.

For a batch of :class:`StepQuery` (one per episode step) it

1. retrieves the top-k most similar stored transitions for every (s_t, a_t) in one call
   (paper Eq. 4, ``Top_k(cos(φ(s_t, a_t), φ(s_i, a_i)))``);
2. builds the prompts (:mod:`experience_model.domain.prompts`);
3. generates all completions in one backend call, off the event loop;
4. parses them strictly; unparseable rows are regenerated (with a retry seed and at least
   ``retry_temperature``) up to ``parse_retries`` times, then reported as
   :class:`~dreamgym.errors.MalformedTransitionError` for that row only — never as reward 0.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from starlette.concurrency import run_in_threadpool

from dreamgym.errors import MalformedTransitionError
from dreamgym.llm.base import LLMBackend, SamplingParams
from experience_model.domain.prompts import (
    ExampleTransition,
    HistoryStep,
    PromptOptions,
    StepParseError,
    build_step_prompt,
    parse_step_output,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ExperienceModel",
    "RetrievedExample",
    "Retriever",
    "SamplingConfig",
    "StepPrediction",
    "StepQuery",
]


@dataclass(frozen=True)
class StepQuery:
    """What the experience model needs to predict one transition.

    Attributes:
        task: task instruction τ.
        environment: environment id (restricts retrieval), if known.
        observation: abstract observation of s_t.
        admissible_actions: admissible actions in s_t.
        action: a_t.
        history: earlier (observation, action) pairs, oldest first.
        seed: sampling seed for this step (``None``: unseeded).
        options: this query's prompt switches (an episode's reset options); ``None``: the
            model's.
    """

    task: str
    environment: str | None
    observation: str
    admissible_actions: Sequence[str]
    action: str
    history: Sequence[HistoryStep] = ()
    seed: int | None = None
    options: PromptOptions | None = None


@dataclass(frozen=True)
class RetrievedExample:
    """A retrieved transition with its provenance id and similarity."""

    example: ExampleTransition
    ref: str
    score: float


class Retriever(Protocol):
    """Top-k retrieval from the replay buffer."""

    async def retrieve(self, queries: Sequence[StepQuery], k: int) -> list[list[RetrievedExample]]:
        """k nearest stored transitions per query, most similar first."""
        ...


@dataclass(frozen=True, kw_only=True)
class SamplingConfig:
    """Sampling of the experience model.

    Attributes:
        max_new_tokens: completion budget (tokens).
        temperature: sampling temperature (0 = greedy).
        top_p: nucleus mass.
        parse_retries: extra attempts for unparseable completions.
        retry_temperature: minimum temperature used on retries (greedy retries would repeat).
    """

    max_new_tokens: int = 192
    temperature: float = 1.0
    top_p: float = 1.0
    parse_retries: int = 2
    retry_temperature: float = 0.7


@dataclass
class StepPrediction:
    """A parsed prediction plus diagnostics returned in the step's ``info``."""

    observation: str
    admissible_actions: list[str]
    reward: float
    terminated: bool
    reasoning: str
    attempts: int
    retrieved: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0


def _retry_seed(seed: int | None, attempt: int) -> int | None:
    if seed is None:
        return None
    return seed if attempt == 0 else seed * 1_000_003 + attempt


class ExperienceModel:
    """Batched, retrieval-grounded transition prediction.

    Args:
        backend: the LLM backend.
        retriever: top-k retrieval (``None`` disables retrieval).
        k: number of retrieved examples per step.
        options: prompt ablation switches.
        sampling: sampling configuration.
    """

    def __init__(
        self,
        backend: LLMBackend,
        retriever: Retriever | None,
        *,
        k: int = 3,
        options: PromptOptions = PromptOptions(),  # noqa: B008
        sampling: SamplingConfig = SamplingConfig(),  # noqa: B008
    ) -> None:
        self.backend = backend
        self.retriever = retriever
        self.k = k
        self.options = options
        self.sampling = sampling
        self.parse_failures = 0
        self.generated_tokens = 0
        # (batch size, retrieval seconds, generation+parse seconds) of recent batches
        self.timings: deque[tuple[int, float, float]] = deque(maxlen=1000)

    def _params(self, seed: int | None, attempt: int) -> SamplingParams:
        temperature = self.sampling.temperature
        if attempt > 0:
            temperature = max(temperature, self.sampling.retry_temperature)
        return SamplingParams(
            max_new_tokens=self.sampling.max_new_tokens,
            temperature=temperature,
            top_p=self.sampling.top_p,
            seed=_retry_seed(seed, attempt),
        )

    def options_for(self, query: StepQuery) -> PromptOptions:
        """The prompt switches of ``query``: its own (episode reset options) or the model's."""
        return query.options or self.options

    async def _examples(self, queries: Sequence[StepQuery]) -> list[list[RetrievedExample]]:
        out: list[list[RetrievedExample]] = [[] for _ in queries]
        if self.retriever is None or self.k == 0:
            return out
        wanted = [i for i, q in enumerate(queries) if self.options_for(q).use_retrieval]
        if wanted:
            found = await self.retriever.retrieve([queries[i] for i in wanted], self.k)
            for i, examples in zip(wanted, found, strict=True):
                out[i] = examples
        return out

    def prompt_for(self, query: StepQuery, examples: Sequence[RetrievedExample]) -> str:
        """The prompt for one query (exposed for SFT data building and debugging)."""
        return build_step_prompt(
            task=query.task,
            observation=query.observation,
            admissible_actions=query.admissible_actions,
            action=query.action,
            history=query.history,
            examples=[e.example for e in examples],
            options=self.options_for(query),
        )

    async def predict(
        self, queries: Sequence[StepQuery]
    ) -> list[StepPrediction | MalformedTransitionError]:
        """Predict the next state for every query (one result per query, in order)."""
        start = time.perf_counter()
        examples = await self._examples(queries)
        retrieved_at = time.perf_counter()
        prompts = [self.prompt_for(q, ex) for q, ex in zip(queries, examples, strict=True)]
        results: list[StepPrediction | MalformedTransitionError | None] = [None] * len(queries)
        pending = list(range(len(queries)))
        last_error: dict[int, tuple[str, str]] = {}
        for attempt in range(1 + self.sampling.parse_retries):
            params = [self._params(queries[i].seed, attempt) for i in pending]
            completions = await run_in_threadpool(
                self.backend.generate, [prompts[i] for i in pending], params
            )
            still: list[int] = []
            for i, completion in zip(pending, completions, strict=True):
                self.generated_tokens += completion.num_completion_tokens
                try:
                    parsed = parse_step_output(completion.text)
                except StepParseError as exc:
                    self.parse_failures += 1
                    last_error[i] = (exc.reason, completion.text)
                    still.append(i)
                    continue
                results[i] = StepPrediction(
                    observation=parsed.observation,
                    admissible_actions=parsed.admissible_actions,
                    reward=parsed.reward,
                    terminated=parsed.terminated,
                    # reasoning off: a trace the model emits anyway is not reported
                    reasoning=parsed.reasoning
                    if self.options_for(queries[i]).use_reasoning
                    else "",
                    attempts=attempt + 1,
                    retrieved=[e.ref for e in examples[i]],
                    prompt_tokens=completion.num_prompt_tokens,
                    completion_tokens=completion.num_completion_tokens,
                )
            pending = still
            if not pending:
                break
        for i in pending:
            reason, raw = last_error[i]
            results[i] = MalformedTransitionError(
                reason, raw_text=raw[:2000], attempts=1 + self.sampling.parse_retries
            )
        latency = (time.perf_counter() - start) * 1000.0
        self.timings.append(
            (len(queries), retrieved_at - start, time.perf_counter() - retrieved_at)
        )
        logger.debug(
            "predicted batch",
            extra={
                "batch_size": len(queries),
                "retrieval_ms": round((retrieved_at - start) * 1000, 1),
                "generate_ms": round(latency - (retrieved_at - start) * 1000, 1),
                "malformed": len(pending),
            },
        )
        for r in results:
            if isinstance(r, StepPrediction):
                r.latency_ms = latency
        return [r for r in results if r is not None]
