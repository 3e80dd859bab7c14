"""``examples/trl_grpo_experience_model.py`` at tiny size against a live experience model."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dreamgym.llm.base import SamplingParams
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from dreamgym.types import Task

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.slow, pytest.mark.model]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_experience_model.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trl_grpo_experience_model", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def length_reward(prompt: str, params: SamplingParams) -> str:
    """A terminal step whose reward depends on the action's length: returns vary in a group."""
    from experience_model.domain.prompts import render_step_target

    del params
    action = next(line for line in prompt.splitlines() if line.startswith("Action: "))
    reward = (len(action) % 7) / 7
    return render_step_target(
        next_observation="The episode ends.",
        next_admissible_actions=[],
        reward=reward,
        terminated=True,
    )


def test_example_parses_plans() -> None:
    example = load_example()

    assert example.parse_plan("1) go north\n* take coin\n\n  look  \n", 5) == [
        "go north",
        "take coin",
        "look",
    ]
    assert example.parse_plan("   \n", 3) == []


def test_grpo_trains_a_tiny_policy_on_imagined_returns(tmp_path: Path) -> None:
    from dreamgym.llm.models import load_causal_lm
    from experience_model.main import create_app
    from experience_model.settings import Settings

    example = load_example()
    tasks = [
        Task(
            task_id=f"twx-coin/train/{i}",
            environment="twx-coin",
            instruction=f"Find the coin in game {i}.",
            initial_observation="You are in the kitchen.",
            initial_admissible_actions=["move north", "take coin"],
        )
        for i in range(2)
    ]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    fake = FakeLLMBackend(responder=length_reward)
    settings = Settings(
        backend="fake",
        data_dir=tmp_path / "em",
        json_logs=False,
        log_level="WARNING",
        replay_store_url=None,
        parse_retries=0,
        max_batch_wait_ms=1.0,
    )
    initial = dict(load_causal_lm("tiny", seed=0)[0].named_parameters())

    with serve_app(create_app(settings, backend=fake)) as url:
        args = example.ExampleArgs(
            experience_model_url=url,
            tasks_file=str(tasks_file),
            num_tasks=2,
            max_steps=2,
            num_generations=4,
            per_device_train_batch_size=4,
            max_completion_length=12,
            output_dir=str(tmp_path / "out"),
        )
        trainer = example.run(args)

    logs = [log for log in trainer.state.log_history if "reward" in log]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert all(math.isfinite(log["reward"]) and 0.0 <= log["reward"] < 1.0 for log in logs)
    assert sum(log["imagined/steps"] for log in logs) == len(fake.calls) > 0
    changed = [
        name
        for name, p in trainer.model.named_parameters()
        if not torch.equal(p.detach().cpu(), initial[name].detach())
    ]
    assert changed, "GRPO left every parameter unchanged"
