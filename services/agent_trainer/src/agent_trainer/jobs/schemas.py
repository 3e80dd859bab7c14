"""Validated job configurations (a bad config is a 422 naming the field at submit time)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from agent_trainer.behaviour_cloning import BCConfig
from agent_trainer.config import EvaluateConfig, GRPOConfig, PPOConfig, check_real_environment
from dreamgym.collect import parse_policy
from dreamgym.types import WireModel

__all__ = [
    "BCJobConfig",
    "CollectJobConfig",
    "FidelityJobConfig",
    "GRPOJobConfig",
    "JudgeConfig",
    "PPOJobConfig",
    "ServiceURLs",
    "VALIDATORS",
    "bc_config",
    "evaluate_config",
    "grpo_config",
    "ppo_config",
]


def _behaviour_policy(name: str) -> str:
    parse_policy(name)  # ValueError naming the valid policies
    return name


def _http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"must be an http(s) URL such as 'http://vllm:8000/v1', got {url!r}")
    return url


RealEnvironment = Annotated[str, AfterValidator(check_real_environment)]
BehaviourPolicy = Annotated[str, AfterValidator(_behaviour_policy)]
HttpURL = Annotated[str, AfterValidator(_http_url)]


class ServiceURLs(WireModel):
    """Where a job finds the other services (filled from the trainer's settings if omitted)."""

    experience_model: str | None = None
    replay_store: str | None = None
    task_generator: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    """The submitting team's key, forwarded so the job acts as that team on the other services
    (set by the trainer from the request; never returned by the job API)."""


class CollectJobConfig(WireModel):
    """Seed-data collection (paper §2: expert + random trajectories seed the buffer).

    Attributes:
        environment: real environment id.
        train_seeds: number of train-split games; every game is played once per policy.
        eval_tasks: number of eval-split games registered as held-out tasks (reset only).
        max_steps: step limit of collected episodes.
        policies: behaviour policies, e.g. ``["expert", "random", "epsilon_greedy:0.3"]``.
        seed: collection seed.
    """

    environment: RealEnvironment = "twx-coin"
    train_seeds: int = Field(default=120, ge=1, le=100_000)
    eval_tasks: int = Field(default=200, ge=0, le=100_000)
    max_steps: int = Field(default=10, ge=1, le=1000)
    policies: list[BehaviourPolicy] = Field(
        default_factory=lambda: ["expert", "random", "epsilon_greedy:0.3"], min_length=1
    )
    seed: int = 0
    services: ServiceURLs = Field(default_factory=ServiceURLs)


class JudgeConfig(WireModel):
    """The optional LLM judge of a ``fidelity`` job (rubric of arXiv 2511.03773, Appendix C.4).

    Attributes:
        base_url: OpenAI-compatible API root; ``/chat/completions`` is appended (a bare server
            root such as ``http://vllm:8000`` gets ``/v1`` first).
        model: the judge model's name (the paper uses GPT-4o).
        api_key: optional bearer token for the endpoint; never returned by the job API nor
            written to the job's result or logs.
        max_transitions: transitions judged, sampled with the job's ``seed`` from the held-out
            transitions the experience model predicted (paper: 100 trajectories).
        timeout_s: per-request timeout, seconds.
        max_retries: retries of a request on 429, 5xx and connection errors.
        concurrency: judge requests in flight at once.
        max_tokens: reply length limit, tokens.
    """

    base_url: HttpURL
    model: str = Field(min_length=1)
    api_key: str | None = Field(default=None, repr=False)
    max_transitions: int = Field(default=100, ge=1, le=10_000)
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    max_retries: int = Field(default=4, ge=0, le=10)
    concurrency: int = Field(default=4, ge=1, le=32)
    max_tokens: int = Field(default=512, ge=16, le=16_384)


class FidelityJobConfig(WireModel):
    """Experience-model fidelity on held-out real transitions.

    Attributes:
        environment: real environment id.
        episodes: held-out real episodes played (eval split).
        max_steps: their step limit.
        seed: collection seed, also the judge's sampling seed.
        judge: the optional LLM-judge rubric (:class:`JudgeConfig`); ``None``: not judged.
        services: where the experience model is.
    """

    environment: RealEnvironment = "twx-coin"
    episodes: int = Field(default=60, ge=1, le=10_000)
    max_steps: int = Field(default=10, ge=1, le=1000)
    seed: int = 0
    judge: JudgeConfig | None = None
    services: ServiceURLs = Field(default_factory=ServiceURLs)


class GRPOJobConfig(WireModel):
    """A GRPO job: the hyperparameters plus where the services are."""

    grpo: dict[str, Any] = Field(default_factory=dict)
    resume: bool = True
    services: ServiceURLs = Field(default_factory=ServiceURLs)


class PPOJobConfig(WireModel):
    """A PPO job: the hyperparameters (:class:`~agent_trainer.config.PPOConfig`) and services."""

    ppo: dict[str, Any] = Field(default_factory=dict)
    resume: bool = True
    services: ServiceURLs = Field(default_factory=ServiceURLs)


class BCJobConfig(WireModel):
    """A behaviour-cloning job: :class:`~agent_trainer.behaviour_cloning.BCConfig` and services."""

    bc: dict[str, Any] = Field(default_factory=dict)
    services: ServiceURLs = Field(default_factory=ServiceURLs)


class EvaluateJobConfig(WireModel):
    """An evaluation job."""

    evaluate: dict[str, Any] = Field(default_factory=dict)


_GRPO = TypeAdapter(GRPOConfig)
_PPO = TypeAdapter(PPOConfig)
_EVAL = TypeAdapter(EvaluateConfig)
_BC = TypeAdapter(BCConfig)


def _validate_section(adapter: TypeAdapter[Any], section: str, values: dict[str, Any]) -> None:
    """Validate one config section; errors are located under it (``grpo.group_size``).

    A range check in ``__post_init__`` has no location of its own: it is located at the first
    field its :class:`~agent_trainer.config.ConfigValueError` names.
    """
    try:
        adapter.validate_python(values)
    except ValidationError as exc:
        errors = []
        for e in exc.errors():
            cause = (e.get("ctx") or {}).get("error")
            fields = getattr(cause, "fields", [])[:1]
            errors.append({**e, "loc": (section, *e["loc"], *fields)})
        raise ValidationError.from_exception_data(exc.title, errors) from None  # type: ignore[arg-type]


def _grpo(config: dict[str, Any]) -> dict[str, Any]:
    job = GRPOJobConfig.model_validate(config)
    _validate_section(_GRPO, "grpo", job.grpo)  # raises a ValidationError naming the field
    return job.model_dump()


def _ppo(config: dict[str, Any]) -> dict[str, Any]:
    job = PPOJobConfig.model_validate(config)
    _validate_section(_PPO, "ppo", job.ppo)  # raises a ValidationError naming the field
    return job.model_dump()


def _bc(config: dict[str, Any]) -> dict[str, Any]:
    job = BCJobConfig.model_validate(config)
    _validate_section(_BC, "bc", job.bc)
    return job.model_dump()


def _fidelity(config: dict[str, Any]) -> dict[str, Any]:
    job = FidelityJobConfig.model_validate(config)
    return job.model_dump(exclude={"judge"} if job.judge is None else None)  # as before judges


def _evaluate(config: dict[str, Any]) -> dict[str, Any]:
    job = EvaluateJobConfig.model_validate(config)
    _validate_section(_EVAL, "evaluate", job.evaluate)
    return job.model_dump()


VALIDATORS = {
    "collect": lambda c: CollectJobConfig.model_validate(c).model_dump(),
    "fidelity": _fidelity,
    "grpo": _grpo,
    "ppo": _ppo,
    "evaluate": _evaluate,
    "bc": _bc,
}


def grpo_config(config: dict[str, Any]) -> GRPOConfig:
    """The validated :class:`GRPOConfig` of a job config."""
    return _GRPO.validate_python(config.get("grpo", {}))


def ppo_config(config: dict[str, Any]) -> PPOConfig:
    """The validated :class:`PPOConfig` of a job config."""
    return _PPO.validate_python(config.get("ppo", {}))


def bc_config(config: dict[str, Any]) -> BCConfig:
    """The validated :class:`BCConfig` of a job config."""
    return _BC.validate_python(config.get("bc", {}))


def evaluate_config(config: dict[str, Any]) -> EvaluateConfig:
    """The validated :class:`EvaluateConfig` of a job config."""
    return _EVAL.validate_python(config.get("evaluate", {}))
