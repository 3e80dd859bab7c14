"""Contract checkers for DreamGym components, in the spirit of Gymnasium's ``check_env``.

:func:`check_real_env` drives a real-environment adapter through a few episodes and raises
``AssertionError`` with a message naming the violated rule of the
:class:`~dreamgym.envs.base.RealEnv` contract:

1. ``reset(seed)`` is deterministic (same state and expert plan for the same seed);
2. states are :class:`~dreamgym.types.AbstractState` with ``step`` = actions taken, a non-empty
   task, and sorted, duplicate-free, non-empty admissible actions before the episode ends;
3. ``step`` returns a :class:`~dreamgym.envs.base.StepResult` whose flags are ``bool``, whose
   reward is a float and whose ``info`` has ``raw_observation`` and ``native_reward``;
4. following ``expert_actions()`` wins, with reward exactly 1.0 on the winning step and 0.0
   before it;
5. an episode without termination is truncated exactly at ``max_steps``;
6. ``step`` after the episode ended raises ``RuntimeError``.

>>> from dreamgym.envs import make_env
>>> check_real_env(make_env("twx-coin"), seed=0)              # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from dreamgym.envs.base import RealEnv, StepResult
from dreamgym.types import AbstractState

__all__ = ["check_real_env"]

_NOOP_ACTIONS = ("look around", "look", "inventory")


def check_real_env(env: RealEnv, seed: int = 0, split: str = "train") -> None:
    """Check that ``env`` honours the :class:`~dreamgym.envs.base.RealEnv` contract.

    Uses about ``2 * max_steps`` real steps plus the expert episode of game ``(split, seed)``;
    that game's expert plan must fit in ``env.max_steps``.

    Args:
        env: the adapter under test (left reset on the last episode; not closed).
        seed: game seed to play.
        split: ``"train"`` or ``"eval"``.

    Raises:
        AssertionError: on the first violated rule, naming the environment and the rule.
    """
    name = getattr(env, "environment_id", type(env).__name__)
    _check(isinstance(env, RealEnv), name, "does not implement the RealEnv protocol")
    first, plan = _check_reset_determinism(env, name, seed, split)
    _check_expert_episode(env, name, first, plan)
    _check_step_after_end_raises(env, name)
    _check_truncation(env, name, seed, split)
    _check_step_after_end_raises(env, name)


def _check(condition: bool, name: str, message: str) -> None:
    if not condition:
        raise AssertionError(f"{name}: {message}")


def _check_state(state: Any, name: str, step: int, *, terminal: bool) -> None:
    _check(
        isinstance(state, AbstractState),
        name,
        f"state is {type(state).__name__}, expected AbstractState",
    )
    _check(state.step == step, name, f"state.step is {state.step}, expected {step}")
    _check(bool(state.task.strip()), name, "state.task is empty")
    actions = state.admissible_actions
    _check(actions == sorted(actions), name, f"admissible actions are not sorted: {actions}")
    _check(len(actions) == len(set(actions)), name, f"admissible actions repeat: {actions}")
    if not terminal:
        _check(bool(actions), name, f"no admissible actions at step {step} before the end")


def _check_reset(env: RealEnv, name: str, seed: int, split: str) -> AbstractState:
    result = env.reset(seed, split)
    _check(isinstance(result, tuple) and len(result) == 2, name, "reset must return (state, info)")
    state, info = result
    _check(
        isinstance(info, dict) and isinstance(info.get("raw_observation"), str),
        name,
        "reset info must be a dict with a str 'raw_observation'",
    )
    _check_state(state, name, 0, terminal=False)
    return state


def _check_reset_determinism(
    env: RealEnv, name: str, seed: int, split: str
) -> tuple[AbstractState, list[str]]:
    first = _check_reset(env, name, seed, split)
    plan = env.expert_actions()
    second = _check_reset(env, name, seed, split)
    _check(first == second, name, f"reset(seed={seed}) is not deterministic:\n{first}\n{second}")
    _check(env.expert_actions() == plan, name, f"expert plan differs across reset(seed={seed})")
    return second, plan


def _check_step_result(result: Any, name: str, step: int) -> StepResult:
    _check(isinstance(result, StepResult), name, f"step returned {type(result).__name__}")
    for flag in ("terminated", "truncated", "won"):
        value = getattr(result, flag)
        _check(type(value) is bool, name, f"StepResult.{flag} is {type(value).__name__}, not bool")
    _check(isinstance(result.reward, float), name, "StepResult.reward is not a float")
    _check(
        isinstance(result.info.get("raw_observation"), str),
        name,
        "step info lacks a str 'raw_observation'",
    )
    _check("native_reward" in result.info, name, "step info lacks 'native_reward'")
    _check(
        not (result.terminated and result.truncated), name, "terminated and truncated are both true"
    )
    _check_state(result.state, name, step, terminal=result.terminated)
    return result


def _check_expert_episode(env: RealEnv, name: str, state: AbstractState, plan: list[str]) -> None:
    _check(bool(plan), name, "expert_actions() is empty at reset")
    _check(
        len(plan) <= env.max_steps,
        name,
        f"expert plan has {len(plan)} actions > max_steps={env.max_steps}; pick another seed",
    )
    step = 0
    while True:
        expert = env.expert_actions()
        _check(bool(expert), name, f"expert_actions() is empty at step {step} on the expert path")
        _check(
            expert[0] in state.admissible_actions or not state.admissible_actions,
            name,
            f"expert action {expert[0]!r} is not admissible at step {step}",
        )
        result = _check_step_result(env.step(expert[0]), name, step + 1)
        step, state = step + 1, result.state
        if result.terminated or result.truncated:
            break
        _check(result.reward == 0.0, name, f"reward {result.reward} before the winning step")
    _check(
        result.won and result.terminated,
        name,
        f"following expert_actions() did not win (stopped at step {step}, "
        f"terminated={result.terminated}, truncated={result.truncated})",
    )
    _check(result.reward == 1.0, name, f"winning step reward is {result.reward}, expected 1.0")
    _check(env.expert_actions() == [], name, "expert_actions() is not empty after the episode")


def _check_step_after_end_raises(env: RealEnv, name: str) -> None:
    try:
        env.step("look")
    except RuntimeError:
        return
    raise AssertionError(f"{name}: step() after the episode ended did not raise RuntimeError")


def _safe_action(state: AbstractState, expert: list[str]) -> str:
    """An action unlikely to end the episode: a no-op if admissible, else a non-expert action."""
    for action in _NOOP_ACTIONS:
        if action in state.admissible_actions:
            return action
    avoid = expert[0] if expert else None
    candidates = [a for a in state.admissible_actions if a != avoid]
    return (candidates or state.admissible_actions)[0]


def _check_truncation(env: RealEnv, name: str, seed: int, split: str) -> None:
    state = _check_reset(env, name, seed, split)
    for step in range(1, env.max_steps + 1):
        result = _check_step_result(env.step(_safe_action(state, env.expert_actions())), name, step)
        state = result.state
        _check(
            not result.terminated,
            name,
            f"the episode terminated at step {step} under no-op actions; cannot check truncation",
        )
        _check(result.reward == 0.0, name, f"reward {result.reward} without winning")
        _check(
            result.truncated == (step == env.max_steps),
            name,
            f"truncated={result.truncated} at step {step} with max_steps={env.max_steps}",
        )
