"""Validated job configurations (a bad config is a 422 naming the field at submit time)."""

from __future__ import annotations

from typing import Annotated, Any

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


RealEnvironment = Annotated[str, AfterValidator(check_real_environment)]
BehaviourPolicy = Annotated[str, AfterValidator(_behaviour_policy)]


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


class FidelityJobConfig(WireModel):
    """Experience-model fidelity on held-out real transitions."""

    environment: RealEnvironment = "twx-coin"
    episodes: int = Field(default=60, ge=1, le=10_000)
    max_steps: int = Field(default=10, ge=1, le=1000)
    seed: int = 0
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


def _evaluate(config: dict[str, Any]) -> dict[str, Any]:
    job = EvaluateJobConfig.model_validate(config)
    _validate_section(_EVAL, "evaluate", job.evaluate)
    return job.model_dump()


VALIDATORS = {
    "collect": lambda c: CollectJobConfig.model_validate(c).model_dump(),
    "fidelity": lambda c: FidelityJobConfig.model_validate(c).model_dump(),
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
