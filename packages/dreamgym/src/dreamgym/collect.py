"""Offline seed-data collection: expert, random and ε-greedy episodes in real environments.

DreamGym seeds its experience replay buffer (and the experience model's training data) with
offline real-environment trajectories: expert demonstrations plus oracle/random exploration, a few
thousand transitions (arXiv 2511.03773 Appendix A.1-A.3; see ``shared/design/paper.md`` §5.2).
This module plays those episodes and returns :class:`~dreamgym.types.Trajectory` objects with
:class:`~dreamgym.types.Provenance` ``source="real"``.

Policies (``parse_policy`` names): ``"expert"`` (first action of ``env.expert_actions()``, random
fallback when the oracle has no plan), ``"random"`` (uniform over admissible actions) and
``"epsilon_greedy:<ε>"`` (random with probability ε, else expert).

Re-collection is idempotent: trajectory ids are derived from ``(environment, split, seed,
policy, episode index)`` and every episode's random stream from ``rng_seed`` and the same key, so
collecting again yields the same ids, and the same trajectories wherever the oracle is
deterministic (TextWorld, single-room TWX games; TWX samples Coin Collector's gold path afresh in
every process, see :mod:`dreamgym.envs.twx`).

>>> from dreamgym.envs import make_env, seeds
>>> env = make_env("twx-coin")                                                 # doctest: +SKIP
>>> trajs = collect(env, seeds("train", 100), {"expert": 0.5, "random": 0.5})  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from dreamgym.envs.base import RealEnv
from dreamgym.types import AbstractState, Provenance, Split, Trajectory, Transition

__all__ = [
    "EpsilonGreedyPolicy",
    "ExpertPolicy",
    "Policy",
    "PolicySpec",
    "ProgressCallback",
    "RandomPolicy",
    "collect",
    "parse_policy",
    "run_episode",
    "summarize",
    "trajectory_id",
]

_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://dreamgym/collect/trajectory")


@runtime_checkable
class Policy(Protocol):
    """A behaviour policy for data collection."""

    def act(self, state: AbstractState, env: RealEnv, rng: random.Random) -> str:
        """Choose the next action in ``state`` (``env`` gives access to the oracle)."""
        ...


class RandomPolicy:
    """Uniform over the admissible actions.

    Raises:
        ValueError: from :meth:`act` when ``state`` has no admissible actions.
    """

    def act(self, state: AbstractState, env: RealEnv, rng: random.Random) -> str:  # noqa: ARG002
        """A uniformly random admissible action."""
        if not state.admissible_actions:
            raise ValueError(f"no admissible actions at step {state.step}")
        return rng.choice(state.admissible_actions)


class ExpertPolicy:
    """The environment oracle: first action of ``env.expert_actions()``, random when it is empty."""

    def act(self, state: AbstractState, env: RealEnv, rng: random.Random) -> str:
        """The oracle's next action (uniformly random admissible action without a plan)."""
        plan = env.expert_actions()
        return plan[0] if plan else RandomPolicy().act(state, env, rng)


class EpsilonGreedyPolicy:
    """Random with probability ε, else expert.

    Args:
        epsilon: exploration probability ε in [0, 1]. With ε = 0 no random number is drawn, so
            the policy behaves exactly like :class:`ExpertPolicy`.

    Raises:
        ValueError: ε outside [0, 1].
    """

    def __init__(self, epsilon: float):
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = float(epsilon)

    def act(self, state: AbstractState, env: RealEnv, rng: random.Random) -> str:
        """Random admissible action with probability ε, else the expert's."""
        if self.epsilon > 0.0 and rng.random() < self.epsilon:
            return RandomPolicy().act(state, env, rng)
        return ExpertPolicy().act(state, env, rng)


def parse_policy(name: str) -> Policy:
    """Build a policy from its name: ``"expert"``, ``"random"`` or ``"epsilon_greedy:<ε>"``.

    Raises:
        ValueError: unknown name or malformed/out-of-range ε.
    """
    if name == "expert":
        return ExpertPolicy()
    if name == "random":
        return RandomPolicy()
    kind, _, arg = name.partition(":")
    if kind == "epsilon_greedy" and arg:
        try:
            epsilon = float(arg)
        except ValueError:
            raise ValueError(f"bad epsilon in policy name {name!r}") from None
        return EpsilonGreedyPolicy(epsilon)
    raise ValueError(
        f"unknown policy {name!r}; valid: 'expert', 'random', 'epsilon_greedy:<epsilon>'"
    )


def trajectory_id(
    environment: str, split: str, seed: int, policy_name: str, episode_index: int
) -> str:
    """Deterministic trajectory id (UUID5 string) of one collected episode."""
    return str(
        uuid.uuid5(_ID_NAMESPACE, f"{environment}|{split}|{seed}|{policy_name}|{episode_index}")
    )


def run_episode(
    env: RealEnv,
    policy: Policy,
    seed: int,
    split: Split,
    rng: random.Random,
    policy_name: str,
    episode_index: int = 0,
) -> Trajectory:
    """Play one episode of game ``(split, seed)`` until termination or truncation.

    Args:
        env: the real environment.
        policy: behaviour policy.
        seed: game seed.
        split: ``"train"`` or ``"eval"``.
        rng: random stream of the policy.
        policy_name: recorded in provenance and the trajectory id.
        episode_index: distinguishes repeated episodes of one (seed, policy).

    Returns:
        The trajectory (``1 <= len(transitions) <= env.max_steps``), id from
        :func:`trajectory_id`, provenance ``source="real"``.
    """
    state, _ = env.reset(seed, split)
    task = state.task
    transitions: list[Transition] = []
    while True:
        action = policy.act(state, env, rng)
        result = env.step(action)
        transitions.append(
            Transition(
                step=len(transitions),
                observation=state.observation,
                admissible_actions=list(state.admissible_actions),
                action=action,
                next_observation=result.state.observation,
                next_admissible_actions=list(result.state.admissible_actions),
                reward=result.reward,
                terminated=result.terminated,
                truncated=result.truncated,
                won=result.won,
            )
        )
        state = result.state
        if result.terminated or result.truncated:
            break
    provenance = Provenance(
        environment=env.environment_id,
        game_seed=seed,
        split=split,
        policy=policy_name,
        source="real",
    )
    return Trajectory(
        trajectory_id=trajectory_id(env.environment_id, split, seed, policy_name, episode_index),
        task=task,
        transitions=transitions,
        provenance=provenance,
    )


PolicySpec = tuple[str, Policy, int]
"""``(policy_name, policy, episodes_per_seed)``."""

ProgressCallback = Callable[[int, int, Trajectory], None]
"""``progress(episodes_done, episodes_total, trajectory)``, called after every episode."""


def _episode_rng(rng_seed: int, *key: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, (rng_seed, *key))).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _allocate(seeds: Sequence[int], weights: Mapping[str, float], rng_seed: int) -> list[str]:
    """One policy name per seed, in exact proportion to ``weights`` (largest remainder)."""
    if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError(f"policy weights must be >= 0 with a positive sum, got {dict(weights)}")
    total, n = sum(weights.values()), len(seeds)
    quotas = {name: n * w / total for name, w in weights.items()}
    counts = {name: int(q) for name, q in quotas.items()}
    by_remainder = sorted(quotas, key=lambda name: (counts[name] - quotas[name], name))
    for name in by_remainder[: n - sum(counts.values())]:
        counts[name] += 1
    names = [name for name in sorted(counts) for _ in range(counts[name])]
    _episode_rng(rng_seed, "allocate").shuffle(names)
    return names


def _plan(
    seeds: Sequence[int],
    policy_mix: Mapping[str, float] | Sequence[PolicySpec],
    rng_seed: int,
) -> list[tuple[int, str, Policy, int]]:
    """The episodes to play: ``(seed, policy_name, policy, episode_index)``."""
    if isinstance(policy_mix, Mapping):
        policies = {name: parse_policy(name) for name in policy_mix}
        names = _allocate(seeds, policy_mix, rng_seed)
        return [(seed, name, policies[name], 0) for seed, name in zip(seeds, names, strict=True)]
    specs = list(policy_mix)
    spec_names = [name for name, _, _ in specs]
    if len(set(spec_names)) != len(spec_names):
        raise ValueError(f"policy names must be unique (they key trajectory ids): {spec_names}")
    if any(count < 0 for _, _, count in specs):
        raise ValueError(f"episodes_per_seed must be >= 0: {specs}")
    return [
        (seed, name, policy, index)
        for seed in seeds
        for name, policy, count in specs
        for index in range(count)
    ]


def collect(
    env: RealEnv,
    seeds: Sequence[int],
    policy_mix: Mapping[str, float] | Sequence[PolicySpec],
    rng_seed: int = 0,
    *,
    split: Split = "train",
    progress: ProgressCallback | None = None,
) -> list[Trajectory]:
    """Collect real trajectories over ``seeds`` with a mix of behaviour policies.

    Args:
        env: the real environment (one adapter, reused across episodes).
        seeds: game seeds, e.g. ``dreamgym.envs.seeds("train", 500)``.
        policy_mix: either mixture weights ``{policy_name: weight}`` (names as in
            :func:`parse_policy`): one episode per seed, the policies assigned to seeds in exact
            proportion to the weights (largest remainder, shuffled with ``rng_seed``); or a list
            of :data:`PolicySpec` ``(name, policy, episodes_per_seed)``: every seed gets that many
            episodes of each policy (``episode_index`` 0..k-1).
        rng_seed: seeds the policy assignment and every episode's random stream (each episode's
            stream depends only on ``rng_seed`` and its own key, not on the order of play).
        split: split of ``seeds`` (``"train"`` or ``"eval"``).
        progress: optional :data:`ProgressCallback`.

    Returns:
        The trajectories in order of play (seed-major); ``sum(len(t.transitions))`` is the number
        of real transitions, also counted by the adapters' ``num_steps_total``.

    Raises:
        ValueError: unknown policy name, bad weights, duplicate names, negative episode counts.
    """
    episodes = _plan(seeds, policy_mix, rng_seed)
    trajectories: list[Trajectory] = []
    for seed, name, policy, index in episodes:
        rng = _episode_rng(rng_seed, env.environment_id, split, seed, name, index)
        trajectories.append(run_episode(env, policy, seed, split, rng, name, index))
        if progress is not None:
            progress(len(trajectories), len(episodes), trajectories[-1])
    return trajectories


def summarize(trajectories: Sequence[Trajectory]) -> dict[str, dict[str, float]]:
    """Per-policy statistics: ``episodes``, ``transitions``, ``success_rate``, ``mean_length``."""
    stats: dict[str, dict[str, float]] = {}
    for trajectory in trajectories:
        entry = stats.setdefault(
            trajectory.provenance.policy, {"episodes": 0, "transitions": 0, "successes": 0}
        )
        entry["episodes"] += 1
        entry["transitions"] += len(trajectory.transitions)
        entry["successes"] += trajectory.success
    for entry in stats.values():
        entry["success_rate"] = entry.pop("successes") / entry["episodes"]
        entry["mean_length"] = entry["transitions"] / entry["episodes"]
    return stats
