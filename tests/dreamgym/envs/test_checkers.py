"""The RealEnv contract checker (dreamgym.testing.checkers.check_real_env) must catch breakage."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dreamgym.envs import StepResult, TWXEnv
from dreamgym.testing.checkers import check_real_env

pytestmark = pytest.mark.envs


class _Broken:
    """Delegates to a real adapter, then applies one contract violation."""

    def __init__(self, env: TWXEnv, fault: str):
        self._env, self._fault = env, fault
        self.environment_id, self.max_steps = env.environment_id, env.max_steps
        self._calls = 0

    def reset(self, seed: int, split: str = "train") -> tuple[Any, dict[str, Any]]:
        state, info = self._env.reset(seed, split)
        self._calls += 1
        if self._fault == "unsorted":
            state = state.model_copy(update={"admissible_actions": state.admissible_actions[::-1]})
        if self._fault == "nondeterministic_reset":
            state = state.model_copy(update={"observation": f"{state.observation} {self._calls}"})
        return state, info

    def step(self, action: str) -> StepResult:
        if self._fault == "no_raise_after_end":
            try:
                result = self._env.step(action)
            except RuntimeError:
                return self._last
        else:
            result = self._env.step(action)
        if self._fault == "half_reward" and result.won:
            result = dataclasses.replace(result, reward=0.5)
        if self._fault == "never_truncates":
            result = dataclasses.replace(result, truncated=False)
        if self._fault == "int_flags":
            result = dataclasses.replace(result, terminated=int(result.terminated))
        self._last = result
        return result

    def expert_actions(self) -> list[str]:
        return self._env.expert_actions()

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def coin_env():
    with TWXEnv("coin") as env:
        yield env


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("unsorted", "not sorted"),
        ("nondeterministic_reset", "not deterministic"),
        ("half_reward", "winning step reward is 0.5"),
        ("never_truncates", "truncated=False"),
        ("int_flags", "terminated is int"),
        ("no_raise_after_end", "did not raise RuntimeError"),
    ],
)
def test_check_real_env_contract_violation_raises_assertion_error(coin_env, fault, message):
    with pytest.raises(AssertionError, match=message):
        check_real_env(_Broken(coin_env, fault), seed=0)


def test_check_real_env_conforming_env_passes(coin_env):
    check_real_env(_Broken(coin_env, "none"), seed=0)
