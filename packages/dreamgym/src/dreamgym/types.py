"""Wire types shared by every DreamGym service.

These are the nouns of the platform (Gymnasium / Reverb vocabulary, see ``shared/design/style.md``):

- :class:`AbstractState` — the paper's *abstract textual state* (DreamGym, arXiv 2511.03773, §4.1):
  task instruction, current observation, admissible actions and step count. Real environments are
  mapped into it by :mod:`dreamgym.envs.abstraction`; the experience model reads and writes it
  unchanged, so real and imagined episodes share one state space.
- :class:`Transition` — one ``(observation, action, reward, next_observation, terminated,
  truncated)`` step, with the admissible actions on both sides and an optional reasoning trace.
- :class:`Trajectory` — the ordered transitions of one episode plus its task and
  :class:`Provenance` (environment, game seed, policy, real vs synthetic).
- :class:`Task` — an instruction plus the initial abstract state it starts from.

All models forbid unknown fields (``extra="forbid"``) so a typo in a client request is a 422 naming
the field rather than silently ignored data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AbstractState",
    "DataSource",
    "Provenance",
    "Split",
    "Task",
    "TaskOrigin",
    "Trajectory",
    "Transition",
    "WireModel",
]

DataSource = Literal["real", "synthetic"]
Split = Literal["train", "eval"]
TaskOrigin = Literal["seed", "generated"]

NonEmptyStr = Annotated[str, Field(min_length=1)]

#: Size limits of text a client sends (a 5 MB observation once made one step take 22 GB).
MAX_TEXT_CHARS = 32_768  # one observation or instruction
MAX_ACTION_TEXT_CHARS = 2_000  # one admissible action
MAX_ADMISSIBLE_ACTIONS = 1_024  # admissible actions of one state
MAX_SEED = 2**63 - 1  # seeds are 64-bit (torch.Generator.manual_seed)

BoundedText = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
ActionList = Annotated[
    list[Annotated[str, Field(max_length=MAX_ACTION_TEXT_CHARS)]],
    Field(max_length=MAX_ADMISSIBLE_ACTIONS),
]


class WireModel(BaseModel):
    """Base for every request/response body: unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid")


class AbstractState(WireModel):
    """The abstract textual state shared by real and imagined episodes (arXiv 2511.03773 §4.1).

    Attributes:
        task: the natural-language task instruction τ.
        observation: the current observation, already mapped to the abstract format.
        admissible_actions: actions the agent may take now (may be empty for terminal states).
        step: number of actions taken so far in the episode (0 at reset).
    """

    task: NonEmptyStr
    observation: str
    admissible_actions: list[str] = Field(default_factory=list)
    step: int = Field(default=0, ge=0)


class Transition(WireModel):
    """One environment step ``s_t, a_t -> s_{t+1}, r_{t+1}``.

    Attributes:
        step: index t of this transition inside its trajectory (0-based).
        observation: abstract observation of s_t.
        admissible_actions: admissible actions in s_t.
        action: the action a_t taken.
        next_observation: abstract observation of s_{t+1}.
        next_admissible_actions: admissible actions in s_{t+1}.
        reward: r_{t+1} (outcome reward: 1.0 on success, else 0.0 in the paper's setting).
        terminated: s_{t+1} is an MDP terminal state (won or lost).
        truncated: the episode was cut by a step limit after this transition.
        won: whether the task was completed at s_{t+1}; ``None`` when unknown.
        reasoning: optional reasoning trace R_t (why a_t in s_t leads to s_{t+1}, r_{t+1}).
    """

    step: int = Field(ge=0)
    observation: str
    admissible_actions: list[str] = Field(default_factory=list)
    action: NonEmptyStr
    next_observation: str
    next_admissible_actions: list[str] = Field(default_factory=list)
    reward: float
    terminated: bool = False
    truncated: bool = False
    won: bool | None = None
    reasoning: str | None = None


class Provenance(WireModel):
    """Where a trajectory came from.

    Attributes:
        environment: environment id, e.g. ``"twx-coin"`` or ``"tw-cooking"``.
        game_seed: seed of the real game the trajectory was played in (``None`` if imagined).
        split: the split of that game seed (``"train"`` or ``"eval"``).
        policy: the behaviour policy, e.g. ``"expert"``, ``"random"``, ``"epsilon_greedy:0.3"`` or
            ``"agent"``.
        source: ``"real"`` for real-environment interaction, ``"synthetic"`` for experience-model
            rollouts.
        policy_version: checkpoint/version tag of the policy that produced it, if any.
    """

    environment: NonEmptyStr
    game_seed: int | None = None
    split: Split | None = None
    policy: NonEmptyStr
    source: DataSource
    policy_version: str | None = None


class Trajectory(WireModel):
    """The ordered transitions of one episode plus task and provenance.

    Validation (each error names the offending field):

    - ``transitions`` is non-empty and ``transitions[i].step == i``;
    - consecutive transitions chain: ``transitions[i].next_observation ==
      transitions[i+1].observation``;
    - only the last transition may be ``terminated`` or ``truncated``.

    Attributes:
        trajectory_id: optional client-chosen id; also the idempotency key. When omitted the
            replay store derives one from the content, so ingesting the same trajectory twice
            stores it once.
        task: the task instruction τ.
        task_id: optional id of the task in the task generator.
        transitions: the steps, in order.
        provenance: where the trajectory came from.
    """

    trajectory_id: str | None = Field(default=None, min_length=1, max_length=200)
    task: NonEmptyStr
    task_id: str | None = None
    transitions: list[Transition] = Field(min_length=1)
    provenance: Provenance

    @model_validator(mode="after")
    def _check_chain(self) -> Trajectory:
        last = len(self.transitions) - 1
        for i, tr in enumerate(self.transitions):
            if tr.step != i:
                raise ValueError(f"transitions[{i}].step must be {i}, got {tr.step}")
            if i < last:
                nxt = self.transitions[i + 1]
                if tr.next_observation != nxt.observation:
                    raise ValueError(
                        f"transitions[{i}].next_observation must equal "
                        f"transitions[{i + 1}].observation"
                    )
                if tr.terminated or tr.truncated:
                    raise ValueError(
                        f"transitions[{i}] is terminated/truncated but is not the last transition"
                    )
        return self

    @property
    def episode_return(self) -> float:
        """Undiscounted sum of rewards."""
        return float(sum(t.reward for t in self.transitions))

    @property
    def success(self) -> bool:
        """True when the final transition reports ``won``."""
        return bool(self.transitions[-1].won)


class Task(WireModel):
    """A task: an instruction τ plus the initial abstract state it starts from.

    Attributes:
        task_id: unique id (seed tasks: ``"<environment>/<split>/<game_seed>"``).
        environment: environment id the task belongs to.
        instruction: the task instruction τ.
        initial_observation: abstract observation at reset.
        initial_admissible_actions: admissible actions at reset.
        game_seed: seed of the real game, ``None`` for generated tasks.
        split: ``"train"`` or ``"eval"``; generated tasks are always ``"train"``.
        origin: ``"seed"`` (from the real environment) or ``"generated"`` (curriculum).
        parent_task_id: for generated tasks, the task it is a variation of.
        metadata: free-form extra data (e.g. generator prompt id).
    """

    task_id: NonEmptyStr = Field(max_length=200)
    environment: NonEmptyStr
    instruction: NonEmptyStr = Field(max_length=MAX_TEXT_CHARS)
    initial_observation: BoundedText
    initial_admissible_actions: ActionList = Field(default_factory=list)
    game_seed: int | None = None
    split: Split = "train"
    origin: TaskOrigin = "seed"
    parent_task_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def initial_state(self) -> AbstractState:
        """The :class:`AbstractState` an episode of this task starts in."""
        return AbstractState(
            task=self.instruction,
            observation=self.initial_observation,
            admissible_actions=list(self.initial_admissible_actions),
            step=0,
        )
