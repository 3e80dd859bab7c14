"""Hyperparameters of the trainer's jobs (TRL-style config dataclasses, validated on creation).

Defaults are the CPU demo's (tiny policy, TextWorldExpress Coin Collector); the GPU preset in the
README swaps the policy for a Qwen/Llama checkpoint. Paper symbols are in brackets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from dreamgym.envs import list_environments
from dreamgym.llm.models import parse_tiny_spec

__all__ = [
    "ConfigValueError",
    "EvaluateConfig",
    "GRPOConfig",
    "PolicyConfig",
    "check_model_spec",
    "check_real_environment",
]

# Validated from job configs with pydantic: an unknown key is an error, not silently ignored.
_FORBID_EXTRA = {"extra": "forbid"}


class ConfigValueError(ValueError):
    """A hyperparameter out of range; ``fields`` names the offending fields (first = param)."""

    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = list(fields)


def check_real_environment(environment: str, field_name: str = "environment") -> str:
    """``environment`` if it is a registered real environment id.

    Raises:
        ConfigValueError: unknown id (the message lists the valid ids).
    """
    valid = list_environments()
    if environment not in valid:
        raise ConfigValueError(
            f"unknown environment id {environment!r}; valid ids: {', '.join(valid)}", [field_name]
        )
    return environment


def check_model_spec(spec: str, field_name: str) -> str:
    """``spec`` if a ``tiny[:k=v,...]`` spec parses (checkpoint paths are checked by the worker
    that loads them: they may live only on GPU nodes).

    Raises:
        ConfigValueError: a malformed tiny spec (unknown key, non-integer size).
    """
    if spec == "tiny" or spec.startswith("tiny:"):
        try:
            parse_tiny_spec(spec)
        except ValueError as exc:
            raise ConfigValueError(f"{field_name}: {exc}", [field_name]) from None
    return spec


@dataclass(frozen=True, kw_only=True)
class PolicyConfig:
    """Which policy model to load and how it acts.

    Attributes:
        model: model spec: ``"tiny[:layers=..,hidden=..]"`` (from config, SmolLM2 tokenizer),
            ``"smollm2-135m"`` or a local checkpoint directory (e.g. Qwen2.5 on a GPU node).
        init_seed: initialisation seed of ``tiny`` models.
        device: torch device.
        dtype: optional torch dtype name.
        history_length: earlier (observation, action) pairs in the prompt.
        decoding: ``"constrained"`` (choose among admissible actions token by token) or
            ``"free"`` (unconstrained text, for instruction-tuned models).
    """

    __pydantic_config__ = _FORBID_EXTRA

    model: str = "tiny:layers=2,hidden=128,heads=4,intermediate=512"
    init_seed: int = 1
    device: str = "cpu"
    dtype: str | None = None
    history_length: int = 2
    decoding: Literal["constrained", "free"] = "constrained"

    def __post_init__(self) -> None:
        if self.history_length < 0:
            raise ConfigValueError(
                f"history_length must be >= 0, got {self.history_length}", ["history_length"]
            )
        check_model_spec(self.model, "model")


@dataclass(frozen=True, kw_only=True)
class GRPOConfig:
    """GRPO in the imagined environment (paper §3.2, §4.2; GRPO arXiv 2402.03300).

    > Parameters that control rollouts
    Attributes:
        environment: environment id of the tasks (e.g. ``"twx-coin"``).
        iterations: policy-update iterations.
        tasks_per_iteration: B, tasks sampled from ``/tasks`` per iteration.
        group_size: G, rollouts per task [G in the GRPO advantage].
        max_steps: step limit of an imagined episode.
        temperature: policy sampling temperature during training rollouts.

    > Parameters that control the update
        learning_rate: AdamW learning rate.
        epochs_per_iteration: passes over each iteration's turns [μ].
        minibatch_size: turns per gradient step.
        epsilon_low / epsilon_high: clip range [ε].
        beta: KL coefficient to the reference policy [β] (0 disables the reference).
        kl_estimator: ``"k1"``, ``"k2"`` or ``"k3"``.
        advantage_scale: ``"group"`` (std of the group), ``"batch"`` or ``"none"``.
        max_grad_norm: gradient clipping.

    > Parameters that control the DreamGym loop
        curriculum_every: ask the task generator for variations every N iterations (0 = never)
            [Eq. 6-7].
        curriculum_seed_tasks / curriculum_variations: m seed tasks × n variations per call.
        push_synthetic: add the imagined trajectories to the replay store (co-evolving buffer).
        checkpoint_every: save the policy every N iterations (and at the end).
        seed: seed of task sampling, episode seeds and policy sampling.
    """

    __pydantic_config__ = _FORBID_EXTRA

    environment: str = "twx-coin"
    iterations: int = 20
    tasks_per_iteration: int = 8
    group_size: int = 8
    max_steps: int = 10
    temperature: float = 1.0
    learning_rate: float = 1e-3
    epochs_per_iteration: int = 2
    minibatch_size: int = 128
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    beta: float = 0.01
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    advantage_scale: Literal["group", "batch", "none"] = "group"
    max_grad_norm: float = 1.0
    curriculum_every: int = 5
    curriculum_seed_tasks: int = 4
    curriculum_variations: int = 2
    push_synthetic: bool = True
    checkpoint_every: int = 10
    seed: int = 0
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self) -> None:
        checks = {
            "iterations": self.iterations >= 1,
            "tasks_per_iteration": self.tasks_per_iteration >= 1,
            "group_size": self.group_size >= 2,
            "max_steps": self.max_steps >= 1,
            "temperature": self.temperature >= 0,
            "learning_rate": self.learning_rate > 0,
            "epochs_per_iteration": self.epochs_per_iteration >= 1,
            "minibatch_size": self.minibatch_size >= 1,
            "epsilon_low": 0 < self.epsilon_low < 1,
            "epsilon_high": self.epsilon_high > 0,
            "beta": self.beta >= 0,
            "max_grad_norm": self.max_grad_norm > 0,
            "curriculum_every": self.curriculum_every >= 0,
            "checkpoint_every": self.checkpoint_every >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = {name: getattr(self, name) for name in bad}
            raise ConfigValueError(
                f"invalid GRPO config values {values} (group_size needs "
                ">= 2: a group-relative advantage needs a group)",
                bad,
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (saved with every run)."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class EvaluateConfig:
    """Evaluation of a policy in the real environment on held-out games.

    Attributes:
        environment: real environment id.
        policy: ``"random"`` or a policy checkpoint directory / model spec.
        episodes: held-out episodes (game seeds from the eval split).
        max_steps: step limit.
        first_seed_index: offset into the eval seed list.
        greedy: act greedily (temperature 0) instead of sampling.
        concurrency: real environment instances played in lockstep.
        seed: sampling seed.
    """

    __pydantic_config__ = _FORBID_EXTRA

    environment: str = "twx-coin"
    policy: str = "random"
    episodes: int = 200
    max_steps: int = 10
    first_seed_index: int = 0
    greedy: bool = False
    concurrency: int = 8
    history_length: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        check_real_environment(self.environment)
        if self.policy != "random":
            check_model_spec(self.policy, "policy")
        for name in ("first_seed_index", "history_length"):
            if getattr(self, name) < 0:
                raise ConfigValueError(f"{name} must be >= 0, got {getattr(self, name)}", [name])
        if self.episodes < 1:
            raise ConfigValueError(f"episodes must be >= 1, got {self.episodes}", ["episodes"])
        if self.max_steps < 1:
            raise ConfigValueError(f"max_steps must be >= 1, got {self.max_steps}", ["max_steps"])
        if self.concurrency < 1:
            raise ConfigValueError(
                f"concurrency must be >= 1, got {self.concurrency}", ["concurrency"]
            )
