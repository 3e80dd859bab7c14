"""Train a tiny policy with TRL's GRPO trainer against the DreamGym experience model.

The experience model is the environment; the policy never touches a real game:

1. each prompt renders one task (instruction, initial observation, admissible actions);
2. the policy completes it with a **plan**, one action per line (``num_generations``
   completions per prompt form a GRPO group: same task, same initial state);
3. the reward function plays every plan in the experience model through the SDK
   (:class:`dreamgym.clients.ExperienceModelClient`): one reset per completion, then all plans
   advanced in lockstep with one ``POST /v1/episodes:step`` per step index, until the episode
   terminates, is truncated or the plan runs out. **Reward = imagined episode return.**
   A plan whose step came back ``malformed_transition`` gets ``None`` (TRL leaves it out of the
   group statistics) rather than a made-up 0.

TRL's ``environment_factory`` (multi-turn tool calling) needs a chat template with tool calls;
the tiny offline policy's tokenizer has none, so this example uses the reward-function route.

Run it against a running experience model (``dreamgym up`` or ``python -m experience_model``)::

    python examples/trl_grpo_experience_model.py \\
        --experience_model_url http://127.0.0.1:8001 --task_generator_url http://127.0.0.1:8003 \\
        --max_steps 20 --output_dir runs/trl-grpo

or with tasks from a JSONL file of :class:`dreamgym.types.Task` (``--tasks_file tasks.jsonl``).
Tested at tiny size by ``tests/examples/test_trl_grpo_example.py``.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import HfArgumentParser
from trl import GRPOConfig, GRPOTrainer

from dreamgym.clients import ExperienceModelClient, TaskGeneratorClient
from dreamgym.errors import DreamGymError
from dreamgym.experience_types import MAX_ACTION_CHARS
from dreamgym.llm.models import load_causal_lm
from dreamgym.types import Task


@dataclass
class ExampleArgs:
    """Arguments of the example (``--name value`` on the command line)."""

    experience_model_url: str = field(
        default="http://127.0.0.1:8001", metadata={"help": "experience model service URL"}
    )
    task_generator_url: str | None = field(
        default=None, metadata={"help": "sample training tasks from this task generator"}
    )
    tasks_file: str | None = field(default=None, metadata={"help": "JSONL file of tasks"})
    num_tasks: int = field(default=8, metadata={"help": "training tasks (prompts)"})
    api_key: str | None = field(default=None, metadata={"help": "default: $DREAMGYM_API_KEY"})
    model: str = field(default="tiny", metadata={"help": "policy: 'tiny[:...]' or a checkpoint"})
    output_dir: str = field(default="runs/trl-grpo")
    max_steps: int = field(default=10, metadata={"help": "GRPO optimizer steps"})
    num_generations: int = field(default=4, metadata={"help": "group size G"})
    per_device_train_batch_size: int = field(default=4)
    max_completion_length: int = field(default=32, metadata={"help": "plan length, tokens"})
    max_plan_actions: int = field(default=4, metadata={"help": "actions played per plan"})
    episode_max_steps: int = field(default=10, metadata={"help": "imagined episode step limit"})
    learning_rate: float = field(default=1e-4)
    beta: float = field(default=0.0, metadata={"help": "KL coefficient"})
    seed: int = field(default=0)


def render_prompt(task: Task) -> str:
    """The policy prompt of a task: instruction, observation, admissible actions, plan header."""
    actions = " | ".join(task.initial_admissible_actions) or "(any)"
    return (
        f"Task: {task.instruction}\nObservation: {task.initial_observation}\n"
        f"Admissible actions: {actions}\nPlan (one action per line):\n"
    )


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_plan(completion: str, max_actions: int) -> list[str]:
    """The actions of a completion: non-empty lines without bullets, at most ``max_actions``.

    >>> parse_plan("1. go north\\n\\n- take coin\\nlook", 2)
    ['go north', 'take coin']
    """
    lines = (_BULLET.sub("", line).strip() for line in completion.splitlines())
    return [line[:MAX_ACTION_CHARS] for line in lines if line][:max_actions]


def imagined_returns(
    client: ExperienceModelClient,
    tasks: Sequence[Task],
    plans: Sequence[list[str]],
    *,
    max_steps: int,
    seed: int = 0,
) -> tuple[list[float | None], int]:
    """Play each plan in its task in the experience model; return (episode returns, steps).

    Plans advance in lockstep: one batch step request per step index. An empty plan returns 0;
    a plan hit by a per-item error (e.g. ``malformed_transition``) returns ``None``.
    """
    returns: list[float | None] = [0.0] * len(plans)
    live: dict[int, str] = {}
    for i, (task, plan) in enumerate(zip(tasks, plans, strict=True)):
        if plan:
            live[i] = client.reset(task, seed=seed + i, max_steps=max_steps).episode_id
    episodes, steps = dict(live), 0
    try:
        for t in range(max(map(len, plans), default=0)):
            batch = [i for i in live if t < len(plans[i])]
            if not batch:
                break
            results = client.step_many([(live[i], plans[i][t], None) for i in batch])
            steps += len(batch)
            for i, result in zip(batch, results, strict=True):
                if isinstance(result, DreamGymError):
                    returns[i] = None
                    del live[i]
                    continue
                returns[i] = (returns[i] or 0.0) + result.reward
                if result.terminated or result.truncated:
                    del live[i]
    finally:
        for episode_id in episodes.values():
            _close_quietly(client, episode_id)
    return returns, steps


def _close_quietly(client: ExperienceModelClient, episode_id: str) -> None:
    with contextlib.suppress(DreamGymError):
        client.close_episode(episode_id)


class ImaginedEpisodeReturn:
    """TRL reward function: the experience model's return of each completion's plan."""

    def __init__(self, client: ExperienceModelClient, max_plan_actions: int, max_steps: int):
        self.client = client
        self.max_plan_actions = max_plan_actions
        self.max_steps = max_steps
        self.calls = 0

    def __call__(
        self, prompts: list[str], completions: list[str], task: list[str], **kwargs: Any
    ) -> list[float | None]:
        del prompts  # the task column carries everything the environment needs
        tasks = [Task.model_validate_json(t) for t in task]
        plans = [parse_plan(c, self.max_plan_actions) for c in completions]
        returns, steps = imagined_returns(
            self.client, tasks, plans, max_steps=self.max_steps, seed=1000 * self.calls
        )
        self.calls += 1
        if "log_metric" in kwargs:
            kwargs["log_metric"]("imagined/steps", float(steps))
            kwargs["log_metric"]("imagined/masked", float(sum(r is None for r in returns)))
        return returns


def load_tasks(args: ExampleArgs) -> list[Task]:
    """Training tasks from ``--tasks_file`` or the task generator.

    Raises:
        ValueError: neither source given, or no task found.
    """
    if args.tasks_file:
        lines = Path(args.tasks_file).read_text().splitlines()
        tasks = [Task.model_validate_json(line) for line in lines if line.strip()]
    elif args.task_generator_url:
        with TaskGeneratorClient(args.task_generator_url, api_key=args.api_key) as generator:
            tasks = generator.sample(batch_size=args.num_tasks, split="train", seed=args.seed)
    else:
        raise ValueError("give --tasks_file or --task_generator_url")
    if not tasks:
        raise ValueError("no training tasks found")
    return tasks[: args.num_tasks]


def build_trainer(args: ExampleArgs, client: ExperienceModelClient) -> GRPOTrainer:
    """The GRPO trainer: tiny policy, one prompt per task, the imagined-return reward."""
    tasks = load_tasks(args)
    dataset = Dataset.from_list(
        [{"prompt": render_prompt(t), "task": t.model_dump_json()} for t in tasks]
    )
    model, tokenizer = load_causal_lm(args.model, seed=args.seed)
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.per_device_train_batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        beta=args.beta,
        seed=args.seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        bf16=False,
        use_cpu=True,
    )
    reward = ImaginedEpisodeReturn(client, args.max_plan_actions, args.episode_max_steps)
    return GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def run(args: ExampleArgs) -> GRPOTrainer:
    """Train and return the trainer (its ``state.log_history`` holds the metrics)."""
    with ExperienceModelClient(args.experience_model_url, api_key=args.api_key) as client:
        trainer = build_trainer(args, client)
        trainer.train()
    return trainer


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` and train."""
    parser = HfArgumentParser(ExampleArgs)  # type: ignore[arg-type]
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    trainer = run(args)
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    print(f"trained {trainer.state.global_step} steps; mean imagined return per step: {rewards}")


if __name__ == "__main__":
    main(sys.argv[1:])
