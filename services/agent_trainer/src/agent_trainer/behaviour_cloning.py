"""Behaviour cloning of the policy on stored real trajectories (the paper's "SFT" baseline row).

Table 1 of DreamGym (arXiv 2511.03773) compares RL against SFT on real expert data. Here the
policy is fine-tuned on the replay store's real expert trajectories of the train split with the
same prompt and the same decoding the RL trainers use: each expert step becomes a
:class:`~agent_trainer.policy.Decision` whose completion is the expert action's tokens, with the
allowed-token sets constrained decoding would have had (the trie over the admissible actions),
and the loss is the action's negative log-likelihood under π_θ,

    L_BC = −(1/N) Σ_n Σ_t log π_θ(y_{n,t} | prompt_n, y_{n,<t})    over the choice tokens,

so the probability mass is moved only among admissible actions, exactly like the RL losses.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from agent_trainer.config import ConfigValueError, PolicyConfig, check_real_environment
from agent_trainer.policy import Decision, HistoryItem, LMPolicy
from agent_trainer.policy_io import save_policy_model, trainable_parameters
from dreamgym.replay_types import TransitionRecord
from dreamgym.sampling import length_grouped_batches
from dreamgym.types import AbstractState

__all__ = [
    "BCConfig",
    "BCExample",
    "bc_examples",
    "teacher_decision",
    "train_behaviour_cloning",
]

_FORBID_EXTRA = {"extra": "forbid"}


@dataclass(frozen=True, kw_only=True)
class BCConfig:
    """Behaviour-cloning settings.

    Attributes:
        environment: real environment id of the demonstrations.
        behaviour_policies: which stored behaviour policies to imitate (``"expert"``: the
            environment's oracle; ε-greedy or random data would clone noise).
        won_only: keep only trajectories that reached the goal.
        max_trajectories: use at most this many trajectories (lowest ids first; ``None`` = all).
        epochs: passes over the examples.
        learning_rate: AdamW learning rate.
        minibatch_size: decisions per gradient step.
        max_grad_norm: gradient clipping.
        seed: data order seed.
        policy: the policy to fine-tune (``init_seed`` makes ``tiny`` inits match the RL rows).
    """

    __pydantic_config__ = _FORBID_EXTRA

    environment: str = "twx-coin"
    behaviour_policies: list[str] = field(default_factory=lambda: ["expert"])
    won_only: bool = True
    max_trajectories: int | None = None
    epochs: int = 2
    learning_rate: float = 1e-3
    minibatch_size: int = 64
    max_grad_norm: float = 1.0
    seed: int = 0
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def __post_init__(self) -> None:
        check_real_environment(self.environment)
        checks = {
            "behaviour_policies": len(self.behaviour_policies) >= 1,
            "max_trajectories": self.max_trajectories is None or self.max_trajectories >= 1,
            "epochs": self.epochs >= 1,
            "learning_rate": self.learning_rate > 0,
            "minibatch_size": self.minibatch_size >= 1,
            "max_grad_norm": self.max_grad_norm > 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            values = {k: getattr(self, k) for k in bad}
            raise ConfigValueError(f"invalid BC config values {values}", bad)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (saved with the run)."""
        return asdict(self)


@dataclass(frozen=True)
class BCExample:
    """One expert step: the state the expert saw, its episode history and its action."""

    state: AbstractState
    history: tuple[HistoryItem, ...]
    action: str
    trajectory_id: str


def bc_examples(
    records: Iterable[TransitionRecord],
    *,
    behaviour_policies: Sequence[str],
    won_only: bool = True,
    max_trajectories: int | None = None,
) -> list[BCExample]:
    """Expert steps of the stored trajectories, with the history each step was taken in.

    Args:
        records: stored transitions (any order; e.g. ``ReplayStoreClient.iter_transitions``).
        behaviour_policies: keep trajectories whose ``policy`` is one of these.
        won_only: keep only trajectories whose last transition is ``won``.
        max_trajectories: keep the first this many trajectories (by first transition id).

    Returns:
        One example per kept transition whose action is admissible in its state, trajectories
        in ascending order of their first transition id and steps in order.
    """
    wanted = set(behaviour_policies)
    by_trajectory: dict[str, list[TransitionRecord]] = defaultdict(list)
    for r in records:
        if r.policy in wanted:
            by_trajectory[r.trajectory_id].append(r)
    ordered = sorted(by_trajectory.values(), key=lambda rows: min(r.id for r in rows))
    out: list[BCExample] = []
    kept = 0
    for rows in ordered:
        rows = sorted(rows, key=lambda r: r.step)
        if won_only and not rows[-1].won:
            continue
        if max_trajectories is not None and kept >= max_trajectories:
            break
        kept += 1
        history: list[HistoryItem] = []
        for r in rows:
            if r.action in r.admissible_actions:
                state = AbstractState(
                    task=r.task,
                    observation=r.observation,
                    admissible_actions=list(r.admissible_actions),
                    step=r.step,
                )
                out.append(BCExample(state, tuple(history), r.action, r.trajectory_id))
            history.append(HistoryItem(r.observation, r.action))
    return out


def teacher_decision(
    policy: LMPolicy, state: AbstractState, action: str, history: Sequence[HistoryItem] = ()
) -> Decision:
    """The decision the policy's decoding would record had it produced ``action``.

    Constrained decoding: the allowed set at position t is the set of t-th tokens of the
    admissible actions that share the action's first t tokens (forced positions have one).
    Free decoding: every position is unconstrained (empty allowed sets, full softmax).

    Raises:
        ValueError: constrained decoding and ``action`` is not admissible in ``state``.
    """
    target = policy.action_token_ids(action)
    if policy.decoding == "free":
        allowed: list[list[int]] = [[] for _ in target]
    else:
        if action not in state.admissible_actions:
            raise ValueError(f"action {action!r} is not admissible in the state")
        cands = [policy.action_token_ids(a) for a in state.admissible_actions]
        allowed = [
            sorted({c[t] for c in cands if len(c) > t and c[:t] == target[:t]})
            for t in range(len(target))
        ]
    return Decision(
        action=action,
        prompt_ids=policy.prompt_ids(state, history),
        completion_ids=target,
        sampled_log_probs=[0.0] * len(target),
        allowed=allowed,
    )


def action_nll(policy: LMPolicy, decisions: Sequence[Decision]) -> torch.Tensor:
    """(N,) −log π_θ(action) of each decision (sum over its choice tokens), differentiable."""
    log_probs, mask = policy.completion_log_probs(decisions)
    return -(log_probs * mask).sum(dim=1)


def train_behaviour_cloning(
    policy: LMPolicy,
    examples: Sequence[BCExample],
    config: BCConfig,
    *,
    run_dir: Path,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``policy`` on ``examples``; write the checkpoint to ``run_dir/checkpoint``.

    Args:
        policy: the policy (trained in place).
        examples: expert steps (see :func:`bc_examples`).
        config: settings.
        run_dir: output folder.
        on_epoch: callback ``(epoch, metrics)`` with ``bc/loss`` (mean action NLL of the
            epoch's minibatches, each before its step) and ``bc/nll`` (mean action NLL over all
            examples after the epoch, no grad).
        should_stop: polled between minibatches (cancellation).

    Returns:
        ``{checkpoint, examples, initial_nll, final_nll, epochs}``.

    Raises:
        ValueError: no examples.
    """
    if not examples:
        raise ValueError("no behaviour-cloning examples (no matching real trajectories stored)")
    decisions = [teacher_decision(policy, e.state, e.action, e.history) for e in examples]
    lengths = [len(d.prompt_ids) + len(d.completion_ids) for d in decisions]
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(trainable_parameters(policy.model), lr=config.learning_rate)

    def mean_nll() -> float:
        policy.model.eval()
        total = 0.0
        with torch.no_grad():
            for idx in length_grouped_batches(lengths, config.minibatch_size, random.Random(0)):
                total += float(action_nll(policy, [decisions[i] for i in idx]).sum())
        return total / len(decisions)

    initial = mean_nll()
    epochs_done = 0
    for epoch in range(config.epochs):
        policy.model.train()
        losses: list[float] = []
        for idx in length_grouped_batches(lengths, config.minibatch_size, rng):
            if should_stop is not None and should_stop():
                break
            loss = action_nll(policy, [decisions[i] for i in idx]).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable_parameters(policy.model), config.max_grad_norm)
            optimizer.step()
            losses.append(float(loss.detach()))
        epochs_done = epoch + 1
        nll = mean_nll()
        if on_epoch is not None:
            on_epoch(
                epoch,
                {"bc/loss": sum(losses) / max(1, len(losses)), "bc/nll": nll},
            )
        if should_stop is not None and should_stop():
            break
    policy.model.eval()
    path = Path(run_dir) / "checkpoint"
    save_policy_model(
        policy.model,
        policy.tokenizer,
        path,
        base_model=config.policy.model,
        init_seed=config.policy.init_seed,
    )
    return {
        "checkpoint": str(path),
        "examples": len(examples),
        "initial_nll": initial,
        "final_nll": mean_nll(),
        "epochs": epochs_done,
    }
