"""The ``annotate`` job: a teacher writes reasoning traces for real transitions (paper Eq. 5).

For every real transition in the replay store that has no reasoning trace yet (``GET
/v1/transitions?source=real&has_reasoning=false``), a teacher explains why a_t in s_t leads to
s_{t+1} and r_{t+1}; the traces go back with ``PATCH /v1/transitions`` (idempotent: an existing
trace is never overwritten unless ``overwrite``). SFT then trains on reasoning + next state.

Teachers (``teacher``):

- ``"rule"`` — :func:`~experience_model.domain.teacher.rule_based_reasoning`, deterministic, for
  the text games (no model needed);
- ``"openai"`` — any OpenAI-compatible completions endpoint (vLLM, SGLang, a hosted API):
  ``openai_base_url`` + ``openai_model``; the key, if any, is read in the job's process from the
  environment variable named by ``openai_api_key_env`` (never stored in the job record);
- ``"local"`` — a Hugging Face checkpoint loaded in process (``model_path``).

Start it with ``POST /v1/training-jobs {"kind": "annotate", "config": {...}}``
(:meth:`dreamgym.clients.experience_model.ExperienceModelClient.start_annotation`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from pydantic import TypeAdapter

from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.jobs import JobCancelled, JobContext
from dreamgym.llm.base import LLMBackend, SamplingParams
from dreamgym.replay_types import TransitionRecord
from experience_model.domain.teacher import (
    TeacherInput,
    TeacherParseError,
    build_teacher_prompt,
    parse_teacher_output,
    rule_based_reasoning,
)

__all__ = [
    "ANNOTATE_CONFIG",
    "AnnotateConfig",
    "LLMTeacher",
    "RuleTeacher",
    "Teacher",
    "annotate_replay_store",
    "build_teacher",
    "run",
    "validate",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AnnotateConfig:
    """Teacher-annotation settings.

    Attributes:
        replay_store_url: the replay store holding the transitions.
        teacher: ``"rule"``, ``"openai"`` or ``"local"`` (see the module docstring).
        environment: only this environment's transitions (``None``: all).
        openai_base_url / openai_model: the ``"openai"`` teacher's endpoint.
        openai_api_key_env: environment variable holding its API key (unset/empty: no key).
        model_path: the ``"local"`` teacher's checkpoint directory or model spec.
        device / dtype: torch device and dtype of the ``"local"`` teacher.
        max_new_tokens / temperature: teacher sampling (temperature 0 = greedy).
        batch_size: transitions per teacher call and per ``PATCH`` (1..5000).
        limit: annotate at most this many transitions (``None``: all that lack a trace).
        overwrite: replace traces transitions already have (and annotate those too).
        seed: sampling seed base (transition id is added).
        api_key: key the replay-store client sends (the submitting team's, forwarded by the
            service; never shown in job responses nor in the summary).
    """

    replay_store_url: str
    teacher: Literal["rule", "openai", "local"] = "rule"
    environment: str | None = None
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key_env: str = "OPENAI_API_KEY"
    model_path: str | None = None
    device: str = "cpu"
    dtype: str | None = None
    max_new_tokens: int = 160
    temperature: float = 0.0
    batch_size: int = 256
    limit: int | None = None
    overwrite: bool = False
    seed: int = 0
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        bad = {
            "batch_size": 1 <= self.batch_size <= 5000,
            "max_new_tokens": self.max_new_tokens >= 1,
            "temperature": self.temperature >= 0,
            "limit": self.limit is None or self.limit >= 1,
            "openai_base_url": self.teacher != "openai" or bool(self.openai_base_url),
            "openai_model": self.teacher != "openai" or bool(self.openai_model),
            "model_path": self.teacher != "local" or bool(self.model_path),
        }
        failed = [k for k, ok in bad.items() if not ok]
        if failed:
            raise ValueError(f"invalid annotate config fields: {failed}")


ANNOTATE_CONFIG = TypeAdapter(AnnotateConfig)


class Teacher(Protocol):
    """Writes one reasoning trace per transition (``None``: no usable trace for it)."""

    name: str

    def annotate(self, transitions: Sequence[TransitionRecord]) -> list[str | None]: ...


def teacher_input(r: TransitionRecord) -> TeacherInput:
    """The teacher's view of a stored transition."""
    return TeacherInput(
        task=r.task,
        observation=r.observation,
        admissible_actions=r.admissible_actions,
        action=r.action,
        next_observation=r.next_observation,
        next_admissible_actions=r.next_admissible_actions,
        reward=r.reward,
        terminated=r.terminated,
    )


class RuleTeacher:
    """The deterministic text-game teacher (:func:`rule_based_reasoning`)."""

    name = "rule"

    def annotate(self, transitions: Sequence[TransitionRecord]) -> list[str | None]:
        """One rule-based trace per transition."""
        return [rule_based_reasoning(teacher_input(r)) for r in transitions]


class LLMTeacher:
    """A teacher LLM behind any :class:`~dreamgym.llm.base.LLMBackend`.

    Args:
        backend: an OpenAI-compatible or in-process backend.
        max_new_tokens / temperature: sampling.
        seed: base seed; transition ``id`` is added so each trace is reproducible.
    """

    def __init__(
        self, backend: LLMBackend, *, max_new_tokens: int, temperature: float, seed: int = 0
    ) -> None:
        self.backend = backend
        self.name = f"llm:{backend.name}"
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed
        self.unparseable = 0

    def annotate(self, transitions: Sequence[TransitionRecord]) -> list[str | None]:
        """One generate call for the batch; an unusable answer gives ``None`` (counted)."""
        prompts = [build_teacher_prompt(teacher_input(r)) for r in transitions]
        params = [
            SamplingParams(
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                seed=self.seed + r.id,
            )
            for r in transitions
        ]
        out: list[str | None] = []
        for r, completion in zip(transitions, self.backend.generate(prompts, params), strict=True):
            try:
                out.append(parse_teacher_output(completion.text))
            except TeacherParseError as exc:
                self.unparseable += 1
                logger.info("teacher answer for transition %d unusable: %s", r.id, exc.reason)
                out.append(None)
        return out


def build_teacher(cfg: AnnotateConfig) -> Teacher:
    """The configured teacher (loads a local model when ``teacher="local"``)."""
    if cfg.teacher == "rule":
        return RuleTeacher()
    sampling = {"max_new_tokens": cfg.max_new_tokens, "temperature": cfg.temperature}
    if cfg.teacher == "openai":
        from dreamgym.llm.openai_backend import OpenAICompatibleBackend  # noqa: PLC0415

        assert cfg.openai_base_url and cfg.openai_model  # checked by the config
        backend: LLMBackend = OpenAICompatibleBackend(
            cfg.openai_base_url,
            cfg.openai_model,
            api_key=os.environ.get(cfg.openai_api_key_env) or None,
        )
        return LLMTeacher(backend, seed=cfg.seed, **sampling)  # type: ignore[arg-type]
    from dreamgym.llm.transformers_backend import TransformersBackend  # noqa: PLC0415

    assert cfg.model_path
    backend = TransformersBackend(model_path=cfg.model_path, device=cfg.device, dtype=cfg.dtype)
    return LLMTeacher(backend, seed=cfg.seed, **sampling)  # type: ignore[arg-type]


def _pending(cfg: AnnotateConfig, client: ReplayStoreClient) -> list[TransitionRecord]:
    """The real transitions to annotate (lacking a trace, or all with ``overwrite``)."""
    records = []
    for r in client.iter_transitions(
        environment=cfg.environment,
        source="real",
        has_reasoning=None if cfg.overwrite else False,
    ):
        records.append(r)
        if cfg.limit is not None and len(records) >= cfg.limit:
            break
    return records


def annotate_replay_store(
    cfg: AnnotateConfig,
    client: ReplayStoreClient,
    teacher: Teacher,
    *,
    progress: Callable[[float, str, dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Annotate the pending real transitions batch by batch; each batch is stored at once.

    Returns:
        Summary: ``pending`` transitions found, ``annotated`` (traces written), ``unchanged``
        (already had one, e.g. written concurrently), ``no_trace`` (teacher gave none),
        ``teacher``, ``seconds``, ``config``.

    Raises:
        InterruptedError: ``should_stop()`` became true (batches stored so far stay stored).
    """
    t0 = time.perf_counter()
    report = progress or (lambda *_: None)
    pending = _pending(cfg, client)
    annotated = unchanged = no_trace = 0
    report(0.02, f"{len(pending)} real transitions to annotate", {})
    for start in range(0, len(pending), cfg.batch_size):
        if should_stop is not None and should_stop():
            raise InterruptedError("annotation cancelled")
        batch = pending[start : start + cfg.batch_size]
        traces = teacher.annotate(batch)
        updates = [(r.id, t) for r, t in zip(batch, traces, strict=True) if t]
        no_trace += len(batch) - len(updates)
        if updates:
            result = client.annotate(updates, overwrite=cfg.overwrite)
            annotated, unchanged = annotated + result.updated, unchanged + result.unchanged
        done = start + len(batch)
        report(
            0.02 + 0.97 * done / len(pending),
            f"annotated {done}/{len(pending)}",
            {"annotated": annotated, "no_trace": no_trace},
        )
    summary = {
        "teacher": teacher.name,
        "pending": len(pending),
        "annotated": annotated,
        "unchanged": unchanged,
        "no_trace": no_trace,
        "seconds": round(time.perf_counter() - t0, 2),
        "config": {k: v for k, v in asdict(cfg).items() if k != "api_key"},
    }
    logger.info("annotation finished", extra={k: v for k, v in summary.items() if k != "config"})
    return summary


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Validate an annotate job config (raises pydantic ValidationError naming the field)."""
    ANNOTATE_CONFIG.validate_python(config)
    return config


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Job body: annotate and return the summary."""
    cfg = ANNOTATE_CONFIG.validate_python(config)
    teacher = build_teacher(cfg)
    try:
        with ReplayStoreClient(cfg.replay_store_url, api_key=cfg.api_key, timeout_s=300) as client:
            return annotate_replay_store(
                cfg,
                client,
                teacher,
                progress=lambda p, msg, metrics: ctx.report(p, msg, metrics),
                should_stop=ctx.cancelled,
            )
    except InterruptedError:
        raise JobCancelled(ctx.job_id) from None
    finally:
        close = getattr(getattr(teacher, "backend", None), "close", None)
        if callable(close):
            close()
