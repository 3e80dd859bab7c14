"""Small helpers shared by the environment tests."""

from __future__ import annotations

import random

from dreamgym.envs import RealEnv, StepResult


def play_expert(env: RealEnv, seed: int, split: str = "train") -> list[StepResult]:
    """Follow ``expert_actions()`` from reset until the episode ends."""
    env.reset(seed, split)
    results: list[StepResult] = []
    while not results or not (results[-1].terminated or results[-1].truncated):
        results.append(env.step(env.expert_actions()[0]))
    return results


def play_random(env: RealEnv, seed: int, rng: random.Random, split: str = "train") -> bool:
    """One uniformly random episode; returns whether it was won."""
    state, _ = env.reset(seed, split)
    while True:
        result = env.step(rng.choice(state.admissible_actions))
        state = result.state
        if result.terminated or result.truncated:
            return result.won
