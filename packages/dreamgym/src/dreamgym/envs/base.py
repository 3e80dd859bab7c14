"""The real-environment adapter interface (Gymnasium semantics over the abstract text state).

Every real text environment (TextWorld, TextWorldExpress, ...) is wrapped by an adapter that

- ``reset(seed)`` builds/loads the game for that seed and returns the initial
  :class:`~dreamgym.types.AbstractState` (task, observation, admissible actions, step 0);
- ``step(action)`` returns a :class:`StepResult` with the next abstract state, the outcome reward,
  ``terminated`` (won or lost), ``truncated`` (step limit) and ``won``;
- ``expert_actions()`` returns the environment's own oracle plan (walkthrough / gold path) for the
  current game, from the current state.

Raw observations are mapped to the abstract format by :mod:`dreamgym.envs.abstraction`; the raw
text stays available in ``info["raw_observation"]``.

Reward: DreamGym's outcome reward (arXiv 2511.03773 §4.1.1): 1.0 on the step that completes the
task, else 0.0. The environment's native score delta is kept in ``info["native_reward"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from dreamgym.types import AbstractState

__all__ = ["RealEnv", "StepResult"]


@dataclass(frozen=True)
class StepResult:
    """Result of one real-environment step.

    Attributes:
        state: the next abstract state (its ``step`` is the number of actions taken so far).
        reward: outcome reward (1.0 on the winning step, else 0.0).
        terminated: the game ended (won or lost).
        truncated: the step limit was reached without the game ending.
        won: the task was completed.
        info: diagnostics: ``raw_observation``, ``native_reward``, ``score``, ...
    """

    state: AbstractState
    reward: float
    terminated: bool
    truncated: bool
    won: bool
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RealEnv(Protocol):
    """A real text environment behind the abstract state format.

    Attributes:
        environment_id: stable id used in provenance and task ids, e.g. ``"twx-coin"``.
        max_steps: episodes are truncated after this many actions.
    """

    environment_id: str
    max_steps: int

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Start the game identified by ``(split, seed)``.

        Returns:
            ``(state, info)``; ``info["raw_observation"]`` holds the unmapped text.
        """
        ...

    def step(self, action: str) -> StepResult:
        """Apply ``action``.

        Raises:
            RuntimeError: when called before ``reset`` or after the episode ended.
        """
        ...

    def expert_actions(self) -> list[str]:
        """The oracle's remaining plan from the current state (may be empty if unknown)."""
        ...

    def close(self) -> None:
        """Release the underlying game/JVM resources."""
        ...
