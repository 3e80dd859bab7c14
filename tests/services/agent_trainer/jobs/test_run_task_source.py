"""RunTaskSource: an RL run's own task pool (seed tasks + the variations it generated, λ-capped)."""

from __future__ import annotations

import pytest

from agent_trainer.jobs.training import RunTaskSource
from dreamgym.task_types import TaskGenerateResponse, TaskListResponse

from ..factories import make_task


class PagedTaskGenerator:
    """Five train seed tasks (one without a game seed), served two per page; records calls."""

    def __init__(self) -> None:
        self.seeds = [make_task(i) for i in range(4)] + [make_task(9, game_seed=None)]
        self.pages: list[int] = []
        self.reports: list[tuple] = []
        self.generations = 0

    def list_tasks(self, *, split, origin, environment, limit, offset):
        assert (split, origin, environment) == ("train", "seed", "twx-coin")
        self.pages.append(offset)
        return TaskListResponse(data=self.seeds[offset : offset + limit], count=len(self.seeds))

    def report_outcomes(self, task_id, rewards, policy_version):
        self.reports.append((task_id, rewards, policy_version))

    def generate(self, num_seed_tasks, variations_per_task, *, environment, seed, timeout_s):
        self.generations += 1
        created = [
            make_task(
                100 + 10 * self.generations + k,
                game_seed=None,
                origin="generated",
                task_id=f"gen-{self.generations}-{k}",
            )
            for k in range(variations_per_task)
        ]
        return TaskGenerateResponse(created=created, rejected=[], seed_task_ids=[])


def test_run_source_pages_through_seed_tasks_with_a_game_seed():
    client = PagedTaskGenerator()
    source = RunTaskSource(client, "twx-coin", generated_fraction=0.0, page_size=2)

    seeds = source.seed_tasks()
    source.sample(3, seed=0)

    assert sorted(seeds) == [f"twx-coin/train/{i}" for i in range(4)]
    assert client.pages == [0, 2, 4]  # fetched once


def test_run_source_samples_only_its_own_generated_tasks_within_lambda():
    client = PagedTaskGenerator()
    source = RunTaskSource(client, "twx-coin", generated_fraction=0.5, page_size=10)
    before = source.sample(4, seed=1)

    created = source.generate(2, 3, seed=0)
    batches = [source.sample(4, seed=s) for s in range(20)]

    assert created == 3 and all(t.origin == "seed" for t in before)
    generated = [t for b in batches for t in b if t.origin == "generated"]
    assert all(sum(t.origin == "generated" for t in b) == 2 for b in batches)  # floor(0.5·4)
    assert {t.task_id for t in generated} == {"gen-1-0", "gen-1-1", "gen-1-2"}


def test_run_source_same_seed_same_batch():
    source = RunTaskSource(PagedTaskGenerator(), "twx-coin", generated_fraction=0.25)

    assert source.sample(8, seed=3) == source.sample(8, seed=3)


def test_run_source_without_curriculum_never_reports_or_generates():
    client = PagedTaskGenerator()
    source = RunTaskSource(client, "twx-coin", generated_fraction=0.0, curriculum=False)

    source.report("twx-coin/train/0", [1.0, 0.0], "run@0")
    assert source.generate(2, 2, seed=0) == 0
    assert (client.reports, client.generations) == ([], 0)


def test_run_source_reports_outcomes_with_curriculum():
    client = PagedTaskGenerator()
    source = RunTaskSource(client, "twx-coin", generated_fraction=0.25)

    source.report("twx-coin/train/0", [1.0, 0.0], "run@0")

    assert client.reports == [("twx-coin/train/0", [1.0, 0.0], "run@0")]


def test_run_source_without_seed_tasks_says_to_collect_first():
    client = PagedTaskGenerator()
    client.seeds = []

    with pytest.raises(RuntimeError, match="run a collect job first"):
        RunTaskSource(client, "twx-coin", generated_fraction=0.0).sample(2, seed=0)
