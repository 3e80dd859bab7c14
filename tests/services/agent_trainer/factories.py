"""Test data and scripted doubles of the agent trainer tests.

- :func:`make_state` / :func:`make_task` — valid abstract states and tasks;
- :func:`trie_decision` — the :class:`Decision` constrained decoding would record for a given
  action (allowed sets from the trie of the admissible actions), used to enumerate the policy's
  distribution over actions;
- :class:`ScriptedPool` — an async :class:`~agent_trainer.env_pools.EnvPool` with a scripted
  reward ("take coin" first wins), optional failures and a record of every call;
- :class:`RecordingTaskSource` / :class:`RecordingReplaySink` — the trainer's ports, recording.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agent_trainer.env_pools import EnvStep
from agent_trainer.policy import Decision, HistoryItem, LMPolicy
from dreamgym.types import AbstractState, Task, Trajectory

TINY = "tiny:layers=1,hidden=32,heads=2,intermediate=64"
ACTIONS = ("take coin", "move north", "move northeast", "look around")
PREFIX_ACTIONS = (
    "go",
    "go north",
    "go north east",
    "move north",
    "move northeast",
    "open",
    "open door",
    "take coin",
    "take coins",
    "look around",
)


def make_state(
    actions: Sequence[str] = ACTIONS,
    *,
    task: str = "Find the coin.",
    observation: str = "You are in the kitchen.",
    step: int = 0,
) -> AbstractState:
    """A valid abstract state."""
    return AbstractState(
        task=task, observation=observation, admissible_actions=list(actions), step=step
    )


def make_task(index: int = 0, *, actions: Sequence[str] = ACTIONS, **overrides: Any) -> Task:
    """A valid seed task; ``index`` makes its id and game seed unique."""
    fields: dict[str, Any] = {
        "task_id": f"twx-coin/train/{index}",
        "environment": "twx-coin",
        "instruction": f"Find the coin in game {index}.",
        "initial_observation": "You are in the kitchen.",
        "initial_admissible_actions": list(actions),
        "game_seed": index,
        "split": "train",
    }
    return Task.model_validate(fields | overrides)


def trie_decision(
    policy: LMPolicy, state: AbstractState, action: str, history: Sequence[HistoryItem] = ()
) -> Decision:
    """The decision that constrained decoding records when it produces ``action``."""
    cands = [policy.action_token_ids(a) for a in state.admissible_actions]
    target = policy.action_token_ids(action)
    allowed = [sorted({c[t] for c in cands if c[:t] == target[:t]}) for t in range(len(target))]
    return Decision(
        action=action,
        prompt_ids=policy.prompt_ids(state, history),
        completion_ids=target,
        sampled_log_probs=[0.0] * len(target),
        allowed=allowed,
    )


def action_probabilities(
    policy: LMPolicy, state: AbstractState, history: Sequence[HistoryItem] = ()
) -> dict[str, float]:
    """π(action | state) for every distinct admissible action (teacher-forced, no sampling)."""
    actions = list(dict.fromkeys(state.admissible_actions))
    with torch.no_grad():
        log_probs, _ = policy.completion_log_probs(
            [trie_decision(policy, state, a, history) for a in actions]
        )
    return {a: math.exp(float(row.sum())) for a, row in zip(actions, log_probs, strict=True)}


@dataclass
class _Episode:
    task: Task
    seed: int
    max_steps: int
    actions: list[str] = field(default_factory=list)


class ScriptedPool:
    """Scripted imagined environment: reward 1 iff the first action is ``winning_action``.

    Args:
        episode_length: steps until ``terminated`` (0 = never terminates).
        fail_handles: episodes (numbered by reset order) whose step ``fail_at_step`` raises.
        fail_at_step: 1-based step at which those episodes fail.
        fail_resets: episodes whose reset raises.
        max_concurrency: live episodes allowed at once (exceeding it fails the test).
        real: whether the pool claims to be a real environment.
    """

    def __init__(
        self,
        *,
        episode_length: int = 1,
        fail_handles: Sequence[int] = (),
        fail_at_step: int = 1,
        fail_resets: Sequence[int] = (),
        max_concurrency: int = 64,
        real: bool = False,
        winning_action: str = "take coin",
    ) -> None:
        self.episode_length, self.fail_at_step = episode_length, fail_at_step
        self.fail_handles, self.fail_resets = set(fail_handles), set(fail_resets)
        self.max_concurrency, self.real, self.winning_action = max_concurrency, real, winning_action
        self.episodes: list[_Episode] = []
        self.closed: list[int] = []
        self.live: set[int] = set()
        self.max_live = 0

    async def reset(self, task: Task, *, seed: int, max_steps: int) -> tuple[Any, AbstractState]:
        handle = len(self.episodes)
        self.episodes.append(_Episode(task, seed, max_steps))
        if handle in self.fail_resets:
            raise RuntimeError(f"reset of episode {handle} failed")
        self.live.add(handle)
        self.max_live = max(self.max_live, len(self.live))
        assert len(self.live) <= self.max_concurrency, "more live episodes than max_concurrency"
        return handle, task.initial_state()

    async def step(self, handle: Any, action: str) -> EnvStep:
        episode = self.episodes[handle]
        episode.actions.append(action)
        t = len(episode.actions)
        if t > episode.max_steps:  # a rollout bug: fail the episode instead of looping forever
            raise AssertionError(f"episode {handle} stepped past max_steps={episode.max_steps}")
        if handle in self.fail_handles and t == self.fail_at_step:
            raise RuntimeError(f"malformed experience-model output in episode {handle}")
        terminated = self.episode_length > 0 and t >= self.episode_length
        won = terminated and episode.actions[0] == self.winning_action
        state = make_state(
            episode.task.initial_admissible_actions,
            task=episode.task.instruction,
            observation=f"Observation {t} of episode {handle}.",
            step=t,
        )
        return EnvStep(
            state=state,
            reward=1.0 if won else 0.0,
            terminated=terminated,
            truncated=False,
            won=won,
            info={},
        )

    async def close(self, handle: Any) -> None:
        self.closed.append(handle)
        self.live.discard(handle)

    def episode_return(self, handle: int) -> float:
        """The reward the script gave episode ``handle`` (0 if it did not terminate)."""
        episode = self.episodes[handle]
        won = (
            self.episode_length > 0
            and len(episode.actions) >= self.episode_length
            and episode.actions[0] == self.winning_action
        )
        return 1.0 if won else 0.0


class RecordingTaskSource:
    """A fixed task list that records reports and curriculum calls."""

    def __init__(self, tasks: Sequence[Task], created_per_call: int = 3) -> None:
        self.tasks = list(tasks)
        self.created_per_call = created_per_call
        self.samples: list[tuple[int, int]] = []
        self.reports: list[tuple[str, list[float], str]] = []
        self.generations: list[tuple[int, int, int]] = []

    def sample(self, batch_size: int, seed: int) -> list[Task]:
        self.samples.append((batch_size, seed))
        return [self.tasks[i % len(self.tasks)] for i in range(batch_size)]

    def report(self, task_id: str, rewards: list[float], policy_version: str) -> None:
        self.reports.append((task_id, list(rewards), policy_version))

    def generate(self, num_seed_tasks: int, variations_per_task: int, seed: int) -> int:
        self.generations.append((num_seed_tasks, variations_per_task, seed))
        return self.created_per_call


class RecordingReplaySink:
    """Records every pushed trajectory batch."""

    def __init__(self) -> None:
        self.batches: list[list[Trajectory]] = []

    def push(self, trajectories: list[Trajectory]) -> None:
        self.batches.append(list(trajectories))

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for batch in self.batches for t in batch]
