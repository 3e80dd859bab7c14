"""Tests of the score grouping (task_generator.domain.scoring): per rollout group vs. per
embedding cluster (PPO, paper §4.2), hand-computed with a fixed encoder."""

from __future__ import annotations

import numpy as np
import pytest

from task_generator.domain.curriculum import Curriculum, CurriculumConfig, score_tasks
from task_generator.domain.ports import TaskOutcomes
from task_generator.domain.scoring import ScoringConfig, TaskScorer, cluster_scores, task_text

from ..factories import make_task
from .memory_repository import TEAM, InMemoryTaskRepository

# two topics: coin tasks 0, 1 and cooking tasks 2, 3
TASKS = [
    make_task(0, instruction="Find the coin in the kitchen."),
    make_task(1, instruction="Find the coin in the garden."),
    make_task(2, instruction="Cook a meal with the red potato."),
    make_task(3, instruction="Cook a meal with the yellow pepper."),
]


def topic_embed(texts: list[str]) -> np.ndarray:
    """A fixed encoder: coin texts point one way, cooking texts the other."""
    return np.array([[1.0, 0.0] if "coin" in t else [0.0, 1.0] for t in texts])


def outcomes(rewards: dict[str, list[list[float]]]) -> list[TaskOutcomes]:
    return [
        TaskOutcomes(tid, "seed", "train", groups, len(groups)) for tid, groups in rewards.items()
    ]


IDS = [t.task_id for t in TASKS]
SINGLE = {IDS[0]: [[1.0]], IDS[1]: [[0.0]], IDS[2]: [[1.0]], IDS[3]: [[1.0]]}


def test_cluster_scores_pool_single_rollouts_per_topic():
    scores = cluster_scores(
        outcomes(SINGLE), {t.task_id: t for t in TASKS}, clusters=2, embed=topic_embed
    )

    assert scores == {IDS[0]: 0.25, IDS[1]: 0.25, IDS[2]: 0.0, IDS[3]: 0.0}
    assert score_tasks(outcomes(SINGLE)) == dict.fromkeys(IDS, 0.0)  # what groups of 1 give


def test_cluster_scores_cluster_each_environment_separately():
    other = make_task(7, environment="tw-cooking", instruction="Find the coin in the hall.")
    tasks = {t.task_id: t for t in [*TASKS[:2], other]}
    rewards = {IDS[0]: [[1.0]], IDS[1]: [[1.0]], other.task_id: [[0.0]]}

    scores = cluster_scores(outcomes(rewards), tasks, clusters=1, embed=topic_embed)

    assert scores == {IDS[0]: 0.0, IDS[1]: 0.0, other.task_id: 0.0}


def test_cluster_scores_skip_tasks_without_groups_or_unknown():
    rewards = {IDS[0]: [[1.0, 0.0]], IDS[1]: [], "gen-unknown": [[1.0]]}

    scores = cluster_scores(
        outcomes(rewards), {t.task_id: t for t in TASKS}, clusters=4, embed=topic_embed
    )

    assert scores == {IDS[0]: 0.25}


def test_task_text_is_instruction_and_observation():
    assert task_text(TASKS[0]) == f"{TASKS[0].instruction}\n{TASKS[0].initial_observation}"


def repository_with(rewards: dict[str, list[float]]) -> InMemoryTaskRepository:
    repository = InMemoryTaskRepository(TASKS)
    for task_id, group in rewards.items():
        repository.add_outcome(TEAM, task_id, group, None)
    return repository


def test_scorer_cluster_mode_scores_one_task_against_all_scored_tasks():
    repository = repository_with({IDS[0]: [1.0], IDS[1]: [0.0], IDS[2]: [1.0]})
    scorer = TaskScorer(
        repository, ScoringConfig(grouping="cluster", clusters=2), embed=topic_embed
    )
    one = repository.task_outcomes(TEAM, window=1, task_ids=[IDS[0]])

    assert scorer.scores(TEAM, one) == {IDS[0]: 0.25}


def test_scorer_group_mode_is_eq7_per_task():
    repository = repository_with({IDS[0]: [1.0, 0.0], IDS[1]: [1.0]})
    scorer = TaskScorer(repository, ScoringConfig(grouping="group"))
    all_ = repository.task_outcomes(TEAM, window=1)

    assert scorer.scores(TEAM, all_) == score_tasks(all_) == {IDS[0]: 0.25, IDS[1]: 0.0}


def test_curriculum_with_cluster_scorer_ranks_and_records_by_cluster():
    repository = repository_with({IDS[2]: [1.0], IDS[3]: [1.0], IDS[1]: [0.0]})
    scorer = TaskScorer(
        repository, ScoringConfig(grouping="cluster", clusters=2), embed=topic_embed
    )
    curriculum = Curriculum(repository, CurriculumConfig(), scorer=scorer)

    recorded = curriculum.record_outcome(IDS[0], [1.0], None, team=TEAM)
    ranking = curriculum.ranking(team=TEAM)

    assert recorded.score == 0.25
    assert [(r.task_id, r.score) for r in ranking.data] == [
        (IDS[0], 0.25),
        (IDS[1], 0.25),
        (IDS[2], 0.0),
        (IDS[3], 0.0),
    ]


def test_scoring_config_rejects_zero_clusters():
    with pytest.raises(ValueError, match="clusters"):
        ScoringConfig(grouping="cluster", clusters=0)
