"""End to end through all four services on a few real games (the main job's quick preset).

Starts the real local stack (PostgreSQL + pgvector, replay store, task generator, experience model,
agent trainer as separate processes), collects real seed data, trains a small experience model,
trains the policy with GRPO in the imagined environment and evaluates it on held-out real games,
then checks the report and the services' side effects through their APIs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dreamgym.cli.demo import default_stack, preset, run_demo
from dreamgym.clients.agent_trainer import AgentTrainerClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.clients.task_generator import TaskGeneratorClient
from dreamgym.stack.local import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("demo")
    stack = default_stack(out)
    try:
        paths = run_demo(preset("quick"), out, keep_running=True, stack=stack)
        report = json.loads(paths["json"].read_text())
        yield {"report": report, "paths": paths, "stack": stack, "out": out}
    finally:
        LocalStack(stack).down()


def test_main_job_report_has_every_policy_with_intervals(demo_run: dict) -> None:
    policies = demo_run["report"]["policies"]

    assert set(policies) == {"random", "before_rl", "dreamgym"}
    for entry in policies.values():
        assert entry["episodes"] == preset("quick").eval_episodes
        assert 0.0 <= entry["ci95_low"] <= entry["success_rate"] <= entry["ci95_high"] <= 1.0
        assert entry["real_steps"] >= entry["episodes"]


def test_main_job_takes_no_real_steps_during_rl(demo_run: dict) -> None:
    report = demo_run["report"]

    assert report["real_interactions_rl"] == 0
    assert report["real_interactions"]["seed_data"] > 0


def test_main_job_writes_markdown_png_and_curve(demo_run: dict) -> None:
    paths, report = demo_run["paths"], demo_run["report"]

    assert paths["md"].read_text().startswith("# DreamGym report")
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert len(report["training_curve"]) == preset("quick").grpo["iterations"]
    assert {"reward_accuracy", "termination_accuracy", "next_observation_exact_match"} <= set(
        report["experience_model"]["fidelity"]
    )


def test_main_job_fills_replay_store_with_real_and_synthetic_data(demo_run: dict) -> None:
    stack = demo_run["stack"]

    with ReplayStoreClient(stack.url("replay_store")) as client:
        stats = client.stats()

    assert stats["by_source"].get("real", 0) == demo_run["report"]["seed_data"]["trajectories"]
    assert stats["by_source"].get("synthetic", 0) > 0


def test_main_job_reports_group_outcomes_to_the_curriculum(demo_run: dict) -> None:
    stack = demo_run["stack"]

    with TaskGeneratorClient(stack.url("task_generator")) as client:
        scores = client.scores(environment="twx-coin")
        train = client.list_tasks(split="train", origin="seed", limit=1)

    assert train.count == preset("quick").train_seeds
    assert scores.count > 0  # tasks that received group rewards have a curriculum score


def test_main_job_checkpoints_load_as_policies(demo_run: dict) -> None:
    training = demo_run["report"]["training"]

    for key in ("initial_checkpoint", "final_checkpoint"):
        assert (Path(training[key]) / "config.json").exists()


def test_main_job_ran_every_job_on_the_celery_worker_of_its_queue(demo_run: dict) -> None:
    stack = demo_run["stack"]

    with AgentTrainerClient(stack.url("agent_trainer")) as client:
        jobs = client.list_jobs()
    status = LocalStack(stack).status()

    assert stack.job_backend == "celery"
    assert (status["worker-gpu"], status["worker-cpu"]) == ("up", "up")
    on = {(job.kind, job.worker.split("@")[0]) for job in jobs}  # type: ignore[union-attr]
    assert on == {
        ("collect", "cpu"),
        ("evaluate", "cpu"),
        ("fidelity", "gpu"),
        ("grpo", "gpu"),
        ("evaluate", "gpu"),
    }
    assert {job.state for job in jobs} == {"succeeded"}
