"""Curriculum task generation: vary the highest-variance tasks with the LLM (Eq. 6–7).

One round (:meth:`TaskGenerator.generate`):

1. score every train task that has outcome groups (Eq. 7, see :mod:`.curriculum`) and select up
   to m seed tasks with score > 0 with ``select_top_k`` (deterministic top-m, or softmax
   sampling when ``selection_temperature`` is set);
2. build one task-variation prompt per seed task (Eq. 6 with one seed task per prompt, so every
   variation has exactly one parent) and ask the LLM backend for n completions of it, all
   m·n prompts in one batch; completion j of the round gets sampling seed ``seed + j``;
3. parse each completion (:func:`dreamgym.prompts.task_variation.parse_task_variation`) and
   reject unparseable ones with the parser's reason;
4. reject duplicates: a variation whose ``(environment, instruction, initial_observation)``
   equals an existing task's (its parent included) or an earlier variation of the round;
5. with a feasibility checker (and unless the request says ``check_feasibility=false``), reject
   the variations the experience model cannot complete in imagination
   (:mod:`task_generator.domain.feasibility`; reasons start with ``"infeasible"``);
6. store the rest as ``origin="generated"``, ``split="train"``, ``parent_task_id`` = the seed,
   the seed's environment and ``task_id = "gen-" + sha256(environment, instruction,
   observation)[:16]``; their lineage is also in ``metadata``: ``generation_depth`` (parent's +
   1; seeds are depth 0), ``generation_round`` (the request's ``round``) and ``feasibility``.

A round only ever reads and writes the calling team's tasks: seeds are the team's scored tasks,
duplicates are checked against the team's tasks, and the variations are stored for the team
(within its task quota).

References:
    DreamGym, arXiv 2511.03773, §3.3, Eq. 6 (task generator) and Eq. 7 (seed selection).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dreamgym.curriculum.scoring import select_top_k
from dreamgym.errors import DreamGymError
from dreamgym.llm.base import LLMBackend, SamplingParams
from dreamgym.prompts.task_variation import (
    PROMPT_FORMAT,
    ParsedTaskVariation,
    TaskVariationParseError,
    build_task_variation_prompt,
    parse_task_variation,
)
from dreamgym.task_types import RejectedVariation, TaskGenerateRequest, TaskGenerateResponse
from dreamgym.types import Task
from task_generator.domain.curriculum import GroupScorer, Scorer
from task_generator.domain.errors import (
    FeasibilityNotConfiguredError,
    LLMBackendNotConfiguredError,
    LLMGenerationError,
)
from task_generator.domain.feasibility import FeasibilityChecker, infeasible_reason
from task_generator.domain.ports import QuotaReachedError, TaskRepository, VariationKey
from task_generator.domain.quota import TaskQuota

__all__ = [
    "GenerationConfig",
    "TaskGenerator",
    "make_generated_task",
    "select_seed_task_ids",
    "variation_key",
    "variation_task_id",
]

MAX_REJECTED_COMPLETION_CHARS = 500

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    """Task-generation hyperparameters.

    Attributes:
        score_window: W, outcome groups averaged into a score (as in the curriculum).
        selection_temperature: T for softmax seed selection; ``None`` = deterministic top-m.
        max_new_tokens: generation budget per completion.
        temperature: default LLM sampling temperature (a request may override it).
        top_p: nucleus sampling mass.
    """

    score_window: int = 1
    selection_temperature: float | None = None
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass(frozen=True)
class _Candidate:
    parent: Task
    parent_score: float
    completion: str


def variation_key(environment: str, instruction: str, initial_observation: str) -> VariationKey:
    """The identity of a variation: two tasks with equal keys are duplicates."""
    return (environment, instruction, initial_observation)


def variation_task_id(key: VariationKey) -> str:
    """``"gen-"`` + the first 16 hex digits of SHA-256 over the key (deterministic)."""
    digest = hashlib.sha256("\x00".join(key).encode("utf-8")).hexdigest()
    return f"gen-{digest[:16]}"


def make_generated_task(
    parent: Task,
    parsed: ParsedTaskVariation,
    *,
    parent_score: float,
    backend_name: str,
    generation_round: int | None = None,
) -> Task:
    """Build the stored task of a parsed variation of ``parent`` (lineage in its metadata)."""
    key = variation_key(parent.environment, parsed.instruction, parsed.initial_observation)
    lineage: dict[str, int] = {
        "generation_depth": int(parent.metadata.get("generation_depth", 0)) + 1
    }
    if generation_round is not None:
        lineage["generation_round"] = generation_round
    return Task(
        task_id=variation_task_id(key),
        environment=parent.environment,
        instruction=parsed.instruction,
        initial_observation=parsed.initial_observation,
        initial_admissible_actions=list(parsed.initial_admissible_actions),
        game_seed=None,
        split="train",
        origin="generated",
        parent_task_id=parent.task_id,
        metadata={
            "prompt_format": PROMPT_FORMAT,
            "llm_backend": backend_name,
            "parent_score": parent_score,
            **lineage,
        },
    )


def select_seed_task_ids(
    scores: dict[str, float],
    k: int,
    *,
    rng: np.random.Generator,
    temperature: float | None,
) -> list[str]:
    """Up to k task ids with score > 0, best (or first drawn) first (Eq. 7 selection).

    Args:
        scores: ``task_id -> V_τ``.
        k: m, the number of seed tasks wanted.
        rng: generator for softmax selection.
        temperature: softmax temperature, or ``None`` for deterministic top-k.

    Returns:
        Selected ids; ties in deterministic mode go to the smaller task id.
    """
    task_ids = sorted(scores)
    values = np.array([scores[t] for t in task_ids], dtype=np.float64)  # (B,)
    picks = select_top_k(values, k, rng=rng, temperature=temperature, min_score=0.0)
    return [task_ids[int(i)] for i in picks]


def _reject(candidate: _Candidate, reason: str) -> RejectedVariation:
    return RejectedVariation(
        parent_task_id=candidate.parent.task_id,
        reason=reason,
        completion=candidate.completion[:MAX_REJECTED_COMPLETION_CHARS],
    )


class TaskGenerator:
    """Generates task variations of high-variance tasks and stores the valid ones.

    Calls to the LLM backend are serialised (one generation round at a time per process), since
    an in-process model must not run ``generate`` from two threads at once.

    >>> generator = TaskGenerator(repository, FakeLLMBackend([...]), GenerationConfig())
    >>> generator.generate(TaskGenerateRequest(num_seed_tasks=2, variations_per_task=4), team="a")
    """

    def __init__(
        self,
        repository: TaskRepository,
        backend: LLMBackend | None,
        config: GenerationConfig,
        quota: TaskQuota | None = None,
        *,
        scorer: Scorer | None = None,
        feasibility: FeasibilityChecker | None = None,
    ) -> None:
        self.repository = repository
        self.backend = backend
        self.config = config
        self.quota = quota or TaskQuota()
        self.scorer = scorer or GroupScorer()
        self.feasibility = feasibility
        # one round at a time: in-process models are not re-entrant
        self._llm_lock = threading.Lock()

    def generate(
        self, request: TaskGenerateRequest, *, team: str, api_key: str | None = None
    ) -> TaskGenerateResponse:
        """Run one generation round for ``team`` (see the module docstring); ``api_key`` is the
        caller's, used for the feasibility episodes.

        Raises:
            LLMBackendNotConfiguredError: the service has no LLM backend (503).
            FeasibilityNotConfiguredError: ``check_feasibility=true`` without a checker (503).
            FeasibilityCheckError: the experience model failed during the check (502).
            LLMGenerationError: the backend failed or answered the wrong number of
                completions (502); nothing was stored.
            TaskQuotaExceededError: the team's task quota is full before the round, or the
                round's variations would exceed it (429; nothing stored).
        """
        if self.backend is None:
            raise LLMBackendNotConfiguredError()
        if request.check_feasibility and self.feasibility is None:
            raise FeasibilityNotConfiguredError()
        if self.quota.max_tasks_per_team is not None:  # no LLM work when nothing can be stored
            self.quota.check_room(team, self.repository.count_tasks(team), param="body")
        outcomes = self.repository.task_outcomes(
            team, window=self.config.score_window, environment=request.environment, split="train"
        )
        scores = self.scorer.scores(team, outcomes)
        rng = np.random.default_rng(request.seed)
        seed_ids = select_seed_task_ids(
            scores,
            request.num_seed_tasks,
            rng=rng,
            temperature=self.config.selection_temperature,
        )
        if not seed_ids:
            return TaskGenerateResponse(
                created=[], rejected=[], seed_task_ids=[], message=_no_seed_message(len(scores))
            )
        parents = self.repository.get_tasks(team, seed_ids)
        candidates = self._complete(self.backend, parents, scores, request)
        created, rejected = self._accept(team, self.backend.name, candidates, request, api_key)
        return TaskGenerateResponse(
            created=created,
            rejected=rejected,
            seed_task_ids=seed_ids,
            num_infeasible=sum(r.reason.startswith("infeasible") for r in rejected),
        )

    def _sampling_params(self, request: TaskGenerateRequest, count: int) -> list[SamplingParams]:
        temperature = (
            request.temperature if request.temperature is not None else self.config.temperature
        )
        return [
            SamplingParams(
                max_new_tokens=self.config.max_new_tokens,
                temperature=temperature,
                top_p=self.config.top_p,
                seed=None if request.seed is None else request.seed + j,
            )
            for j in range(count)
        ]

    def _complete(
        self,
        backend: LLMBackend,
        parents: Sequence[Task],
        scores: dict[str, float],
        request: TaskGenerateRequest,
    ) -> list[_Candidate]:
        n = request.variations_per_task
        prompts = [
            build_task_variation_prompt([parent], environment=parent.environment)
            for parent in parents
            for _ in range(n)
        ]
        try:
            with self._llm_lock:
                completions = backend.generate(
                    prompts, self._sampling_params(request, len(prompts))
                )
        except DreamGymError:  # e.g. the shared checkpoint does not exist yet: its own status
            raise
        except Exception as exc:  # any backend failure is a 502 with its cause, not a 500
            raise LLMGenerationError(
                f"LLM backend '{backend.name}' failed: {type(exc).__name__}: {exc}"
            ) from exc
        if len(completions) != len(prompts):
            raise LLMGenerationError(
                f"LLM backend '{backend.name}' returned {len(completions)} completions "
                f"for {len(prompts)} prompts"
            )
        return [
            _Candidate(parents[j // n], scores[parents[j // n].task_id], c.text)
            for j, c in enumerate(completions)
        ]

    def _accept(
        self,
        team: str,
        backend_name: str,
        candidates: Sequence[_Candidate],
        request: TaskGenerateRequest,
        api_key: str | None,
    ) -> tuple[list[Task], list[RejectedVariation]]:
        rejected: list[RejectedVariation] = []
        parsed: list[tuple[_Candidate, Task]] = []
        for candidate in candidates:
            try:
                variation = parse_task_variation(candidate.completion)
            except TaskVariationParseError as exc:
                rejected.append(_reject(candidate, exc.reason))
                continue
            task = make_generated_task(
                candidate.parent,
                variation,
                parent_score=candidate.parent_score,
                backend_name=backend_name,
                generation_round=request.round,
            )
            parsed.append((candidate, task))
        unique, duplicates = self._drop_duplicates(team, parsed)
        rejected += duplicates
        if unique and request.check_feasibility is not False and self.feasibility is not None:
            unique, infeasible = self._check_feasibility(unique, request.seed, api_key)
            rejected += infeasible
        try:
            inserted = set(
                self.repository.insert_generated(
                    team, [task for _, task in unique], max_tasks=self.quota.max_tasks_per_team
                )
            )
        except QuotaReachedError as exc:
            raise self.quota.exceeded(team, exc.stored, param="body") from None
        created = [task for _, task in unique if task.task_id in inserted]
        rejected += [
            _reject(c, f"duplicate of task '{t.task_id}' (stored concurrently)")
            for c, t in unique
            if t.task_id not in inserted
        ]
        return created, rejected

    def _check_feasibility(
        self,
        parsed: Sequence[tuple[_Candidate, Task]],
        seed: int | None,
        api_key: str | None,
    ) -> tuple[list[tuple[_Candidate, Task]], list[RejectedVariation]]:
        """Keep the variations with an imagined success; the others are rejected with why."""
        assert self.feasibility is not None
        results = self.feasibility.check([t for _, t in parsed], seed=seed, api_key=api_key)
        kept: list[tuple[_Candidate, Task]] = []
        rejected: list[RejectedVariation] = []
        for (candidate, task), result in zip(parsed, results, strict=True):
            reason = infeasible_reason(result, self.feasibility.max_steps)
            if reason is not None:
                rejected.append(_reject(candidate, reason))
                continue
            stats = {"successes": result.successes, "rollouts": result.rollouts}
            kept.append(
                (
                    candidate,
                    task.model_copy(update={"metadata": {**task.metadata, "feasibility": stats}}),
                )
            )
        if rejected:
            logger.info("rejected %d infeasible task variation(s)", len(rejected))
        return kept, rejected

    def _drop_duplicates(
        self, team: str, parsed: Sequence[tuple[_Candidate, Task]]
    ) -> tuple[list[tuple[_Candidate, Task]], list[RejectedVariation]]:
        keys = [_key_of(task) for _, task in parsed]
        existing = self.repository.find_variations(team, sorted(set(keys)))
        unique: list[tuple[_Candidate, Task]] = []
        rejected: list[RejectedVariation] = []
        seen: dict[VariationKey, str] = {}
        for (candidate, task), key in zip(parsed, keys, strict=True):
            if key in existing:
                reason = f"duplicate of existing task '{existing[key]}'"
                rejected.append(_reject(candidate, reason))
            elif key in seen:
                reason = f"duplicate of variation '{seen[key]}' generated in this round"
                rejected.append(_reject(candidate, reason))
            else:
                seen[key] = task.task_id
                unique.append((candidate, task))
        return unique, rejected


def _key_of(task: Task) -> VariationKey:
    return variation_key(task.environment, task.instruction, task.initial_observation)


def _no_seed_message(num_scored: int) -> str:
    return (
        f"no train task has a curriculum score > 0 ({num_scored} scored task(s)); generation "
        "needs tasks whose outcome groups mix successes and failures (reward variance > 0, "
        "Eq. 7); report more outcome groups with POST /v1/tasks/{task_id}/outcomes"
    )
