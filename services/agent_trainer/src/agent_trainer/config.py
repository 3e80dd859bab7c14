"""Hyperparameters of the trainer's jobs (TRL-style config dataclasses, validated on creation).

Defaults are the CPU demo's (tiny policy, TextWorldExpress Coin Collector); the GPU preset in the
README swaps the policy for a Qwen/Llama checkpoint. Paper symbols are in brackets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

from dreamgym.envs import list_environments
from dreamgym.experience_types import EpisodeOptions
from dreamgym.llm.models import parse_tiny_spec

__all__ = [
    "ConfigValueError",
    "EvaluateConfig",
    "GRPOConfig",
    "LoRAConfig",
    "PPOConfig",
    "PolicyConfig",
    "RLConfig",
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


def _raise_bad(kind: str, checks: dict[str, bool], config: Any, hint: str = "") -> None:
    """Raise one :class:`ConfigValueError` naming every failed check (in declaration order)."""
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        values = {name: getattr(config, name) for name in bad}
        raise ConfigValueError(f"invalid {kind} config values {values}{hint}", bad)


@dataclass(frozen=True, kw_only=True)
class LoRAConfig:
    """Low-rank adapters (LoRA, Hu et al. 2021, arXiv 2106.09685) applied with ``peft``.

    Only the adapter weights (and the PPO value head) train; the base weights stay frozen, and
    with the adapters switched off the model *is* the reference policy, so no copy is kept.
    Checkpoints hold the adapter (``adapter_config.json``, ``adapter_model.safetensors``) and
    ``base_model.json`` naming the base model spec.

    Attributes:
        r: adapter rank (>= 1).
        alpha: scaling numerator; the update is (alpha / r)·B·A.
        dropout: dropout on the adapter input, in [0, 1).
        target_modules: module names to adapt (``["q_proj", "v_proj"]``, …) or
            ``["all-linear"]`` for every linear layer but the output head.
    """

    __pydantic_config__ = _FORBID_EXTRA

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )

    def __post_init__(self) -> None:
        checks = {
            "r": self.r >= 1,
            "alpha": self.alpha > 0,
            "dropout": 0 <= self.dropout < 1,
            "target_modules": len(self.target_modules) >= 1,
        }
        _raise_bad("LoRA", checks, self)


def _valid_episode_options(options: dict[str, Any]) -> bool:
    """True when ``options`` are valid :class:`~dreamgym.experience_types.EpisodeOptions`."""
    try:
        EpisodeOptions.model_validate(options)
    except ValidationError:
        return False
    return True


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
        lora: train LoRA adapters instead of every weight (large policies); None = full
            fine-tuning.
    """

    __pydantic_config__ = _FORBID_EXTRA

    model: str = "tiny:layers=2,hidden=128,heads=4,intermediate=512"
    init_seed: int = 1
    device: str = "cpu"
    dtype: str | None = None
    history_length: int = 2
    decoding: Literal["constrained", "free"] = "constrained"
    lora: LoRAConfig | None = None

    def __post_init__(self) -> None:
        if self.history_length < 0:
            raise ConfigValueError(
                f"history_length must be >= 0, got {self.history_length}", ["history_length"]
            )
        check_model_spec(self.model, "model")


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """Fields every RL trainer shares (rollouts, clipped update, KL, DreamGym loop)."""

    __pydantic_config__ = _FORBID_EXTRA
    _KIND: ClassVar[str] = "RL"
    _MIN_GROUP_SIZE: ClassVar[int] = 1
    _HINT: ClassVar[str] = ""

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
    max_grad_norm: float = 1.0
    curriculum_every: int = 5
    curriculum_seed_tasks: int = 4
    curriculum_variations: int = 2
    push_synthetic: bool = True
    em_refresh_every: int = 0
    em_refresh_sft: dict[str, Any] = field(default_factory=dict)
    episode_options: dict[str, Any] = field(default_factory=dict)
    checkpoint_every: int = 10
    seed: int = 0
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    environment_mode: Literal["imagined", "real"] = "imagined"
    real_step_budget: int | None = None
    real_env_concurrency: int = 8
    push_real: bool = False
    task_scope: Literal["shared", "run"] = "shared"
    generated_task_fraction: float = 0.25

    def _checks(self) -> dict[str, bool]:
        return {
            "iterations": self.iterations >= 1,
            "tasks_per_iteration": self.tasks_per_iteration >= 1,
            "group_size": self.group_size >= self._MIN_GROUP_SIZE,
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
            "em_refresh_every": self.em_refresh_every >= 0,
            "episode_options": _valid_episode_options(self.episode_options),
            "checkpoint_every": self.checkpoint_every >= 1,
            # a budget of real interactions only means something where there are some
            "real_step_budget": self.real_step_budget is None or self.real_step_budget >= 1,
            "real_env_concurrency": self.real_env_concurrency >= 1,
            "generated_task_fraction": 0 <= self.generated_task_fraction <= 1,
        }

    def __post_init__(self) -> None:
        if self.environment_mode != "real":
            for name in ("real_step_budget", "push_real"):
                if getattr(self, name) not in (None, False):
                    raise ConfigValueError(
                        f"{name} applies only to environment_mode='real' (got "
                        f"environment_mode={self.environment_mode!r})",
                        [name],
                    )
        _raise_bad(self._KIND, self._checks(), self, self._HINT)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (saved with every run)."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class GRPOConfig(RLConfig):
    """GRPO in the imagined environment (paper §3.2, §4.2; GRPO arXiv 2402.03300).

    > Parameters that control rollouts
    Attributes:
        environment: environment id of the tasks (e.g. ``"twx-coin"``).
        iterations: policy-update iterations.
        tasks_per_iteration: B, tasks sampled from ``/tasks`` per iteration.
        group_size: G, rollouts per task [G in the GRPO advantage]; >= 2.
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
        em_refresh_every: every N iterations, fine-tune the experience model on the grown buffer
            (real + synthetic) and reload it (0 = never; the paper keeps it frozen; see
            :mod:`agent_trainer.em_refresh`).
        em_refresh_sft: SFT config fields of those refreshes (e.g. ``{"steps": 100}``).
        episode_options: reset options of every imagined episode
            (:class:`~dreamgym.experience_types.EpisodeOptions`: ``use_reasoning``,
            ``use_retrieval``, ``history_length``), e.g. ``{"use_retrieval": false}`` for the
            "w/o replay" ablation on a shared experience-model service.
        checkpoint_every: save the policy every N iterations (and at the end).
        seed: seed of task sampling, episode seeds and policy sampling.
        policy: the policy model (and its optional LoRA adapters); ``policy.model`` may be a
            checkpoint of an earlier run (sim-to-real: a DreamGym policy continued in the real
            environment).

    > Parameters that control where rollouts run (paper §4.3: sim-to-real, real-env baseline)
        environment_mode: ``"imagined"`` (the experience model; 0 real steps) or ``"real"``
            (real adapters of ``environment`` on the train-split games of the seed tasks; the
            same abstract-state mapping). Real mode samples only seed tasks (a generated task
            has no real game), so the curriculum is off there (no outcome reports, no
            generation) and nothing is pushed as synthetic.
        real_step_budget: real mode only: training stops once this many real environment steps
            were taken (``None`` = only ``iterations`` bounds it). The budget is exact: a step
            beyond it is refused, the rollouts it cuts short are masked (their steps count,
            they are not trained on) and the iteration's update uses the finished rollouts.
        real_env_concurrency: real adapter instances playing at once (real mode).
        push_real: real mode only: ingest the real rollouts into the replay store tagged
            ``source="real"``, ``policy="agent"`` (retrievable by the experience model).
        task_scope: ``"shared"``: the task generator's λ-capped sample over every train task
            (also variations other runs generated); ``"run"``: the train seed tasks plus only
            the variations this run generated, λ-capped here with ``generated_task_fraction``,
            so runs sharing a task generator (an experiment's rows and seeds) stay independent.
        generated_task_fraction: λ of ``task_scope="run"``: at most floor(λ·B) generated tasks
            per batch.
    """

    _KIND: ClassVar[str] = "GRPO"
    _MIN_GROUP_SIZE: ClassVar[int] = 2
    _HINT: ClassVar[str] = " (group_size needs >= 2: a group-relative advantage needs a group)"

    advantage_scale: Literal["group", "batch", "none"] = "group"


@dataclass(frozen=True, kw_only=True)
class PPOConfig(RLConfig):
    """PPO with a learned value head and turn-level GAE (paper §3.2; PPO arXiv 1707.06347).

    Shares every GRPO field except ``advantage_scale`` (see :class:`GRPOConfig`); ``group_size``
    may be 1 here (rollouts per task still feed the curriculum's group statistics).

    > Parameters that control the advantage
    Attributes:
        gamma: discount γ per environment step (turn), in [0, 1].
        gae_lambda: GAE λ in [0, 1] (0: one-step TD, 1: Monte-Carlo return − V).
        whiten_advantages: normalise the batch's advantages to mean 0, std 1 (cleanrl
            ``norm_adv``).

    > Parameters that control the critic
        vf_coef: value-loss coefficient c_V.
        vf_clip: clip range of the value update around the rollout-time value (PPO2), in
            return units; None disables value clipping.
        value_learning_rate: AdamW learning rate of the value head (None = ``learning_rate``).
        entropy_coef: entropy-bonus coefficient c_H (0 disables it; entropy is then only
            logged).
    """

    _KIND: ClassVar[str] = "PPO"

    gamma: float = 0.99
    gae_lambda: float = 0.95
    whiten_advantages: bool = True
    vf_coef: float = 0.1
    vf_clip: float | None = 0.2
    value_learning_rate: float | None = None
    entropy_coef: float = 0.0

    def _checks(self) -> dict[str, bool]:
        return super()._checks() | {
            "gamma": 0 <= self.gamma <= 1,
            "gae_lambda": 0 <= self.gae_lambda <= 1,
            "vf_coef": self.vf_coef >= 0,
            "vf_clip": self.vf_clip is None or self.vf_clip >= 0,
            "value_learning_rate": self.value_learning_rate is None or self.value_learning_rate > 0,
            "entropy_coef": self.entropy_coef >= 0,
        }


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
        policies: evaluate these policies instead of ``policy``, one after another on the same
            games in one job (one process, one set of real adapters; the result lists each
            with its own wall/CPU time). Empty: evaluate ``policy``.
        device: torch device the policies run on.
    """

    __pydantic_config__ = _FORBID_EXTRA

    environment: str = "twx-coin"
    policy: str = "random"
    policies: list[str] = field(default_factory=list)
    episodes: int = 200
    max_steps: int = 10
    first_seed_index: int = 0
    greedy: bool = False
    concurrency: int = 8
    history_length: int = 2
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_real_environment(self.environment)
        if self.policy != "random":
            check_model_spec(self.policy, "policy")
        for spec in self.policies:
            if spec != "random":
                check_model_spec(spec, "policies")
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
