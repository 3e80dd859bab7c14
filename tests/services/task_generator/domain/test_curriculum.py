"""Unit tests of task_generator.domain.curriculum (in-memory repository, no HTTP)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dreamgym.errors import InvalidRequestError
from dreamgym.task_types import TaskSampleRequest
from task_generator.domain.curriculum import (
    Curriculum,
    CurriculumConfig,
    check_registration,
    sample_eval_task_ids,
    score_tasks,
    score_weights,
    task_content_hash,
)
from task_generator.domain.errors import NoTasksAvailableError, TaskNotFoundError
from task_generator.domain.ports import TaskOutcomes

from ..factories import make_task
from .memory_repository import TEAM, InMemoryTaskRepository


def outcomes(task_id: str, *groups: list[float]) -> TaskOutcomes:
    return TaskOutcomes(
        task_id=task_id,
        origin="seed",
        split="train",
        recent_groups=list(groups),
        num_groups=len(groups),
    )


def curriculum_with(tasks, **config) -> Curriculum:
    return Curriculum(InMemoryTaskRepository(tasks), CurriculumConfig(**config))


def mixed_pool(num_seed: int = 20, num_generated: int = 20):
    seeds = [make_task(i) for i in range(num_seed)]
    generated = [make_task(100 + i, origin="generated") for i in range(num_generated)]
    return seeds + generated


# -- content hash ------------------------------------------------------------------------------


def test_task_content_hash_equal_content_equal_hash():
    assert task_content_hash(make_task(1)) == task_content_hash(make_task(1))


def test_task_content_hash_metadata_change_changes_hash():
    assert task_content_hash(make_task(1)) != task_content_hash(make_task(1, metadata={"x": 1}))


# -- scores (Eq. 7) ----------------------------------------------------------------------------


def test_score_tasks_binary_half_success_group_is_quarter():
    assert score_tasks([outcomes("a", [1, 0, 1, 0])]) == {"a": 0.25}


def test_score_tasks_uniform_group_is_zero():
    assert score_tasks([outcomes("a", [1, 1, 1, 1])]) == {"a": 0.0}


def test_score_tasks_window_averages_group_variances_not_pooled():
    scores = score_tasks([outcomes("a", [1, 0], [1, 1])])

    assert scores["a"] == pytest.approx((0.25 + 0.0) / 2)  # pooled variance would be 0.1875


def test_score_tasks_ragged_groups_across_tasks():
    scores = score_tasks([outcomes("a", [1, 0, 0, 0]), outcomes("b", [0.5]), outcomes("c", [2, 0])])

    assert scores == pytest.approx({"a": 0.1875, "b": 0.0, "c": 1.0})


def test_score_tasks_task_without_groups_is_unscored():
    assert score_tasks([outcomes("a"), outcomes("b", [1, 0])]) == {"b": 0.25}


def test_score_weights_adds_floor_and_prior_for_unscored():
    weights = score_weights(["a", "b"], {"a": 0.25}, floor=0.05, unscored_score=0.1)

    np.testing.assert_allclose(weights, [0.30, 0.15])


# -- registration rules ------------------------------------------------------------------------


def test_check_registration_self_parent_names_field():
    with pytest.raises(InvalidRequestError) as info:
        check_registration([make_task(0), make_task(1, parent_task_id="twx-coin/train/1")])

    assert info.value.param == "body.tasks.1.parent_task_id"


def test_check_registration_same_id_different_content_names_field():
    with pytest.raises(InvalidRequestError) as info:
        check_registration([make_task(1), make_task(1, instruction="Other.")])

    assert info.value.param == "body.tasks.1.task_id"


def test_check_registration_generated_eval_task_names_split():
    with pytest.raises(InvalidRequestError) as info:
        check_registration([make_task(1, origin="generated", split="eval")])

    assert info.value.param == "body.tasks.0.split"


def test_check_registration_same_id_same_content_is_allowed():
    check_registration([make_task(1), make_task(1)])


# -- outcomes and ranking ----------------------------------------------------------------------


def test_record_outcome_returns_variance_and_group_count():
    curriculum = curriculum_with([make_task(1)])

    curriculum.record_outcome("twx-coin/train/1", [1.0, 1.0], None, team=TEAM)
    result = curriculum.record_outcome("twx-coin/train/1", [1.0, 0.0, 1.0, 0.0], "v1", team=TEAM)

    assert (result.score, result.num_groups) == (0.25, 2)


def test_record_outcome_unknown_task_raises_not_found():
    with pytest.raises(TaskNotFoundError) as info:
        curriculum_with([]).record_outcome("nope", [1.0], None, team=TEAM)

    assert info.value.param == "task_id"


def test_record_outcome_window_two_averages_last_two_groups():
    curriculum = curriculum_with([make_task(1)], score_window=2)
    for group in ([1.0, 0.0], [1.0, 1.0], [0.0, 1.0]):
        result = curriculum.record_outcome("twx-coin/train/1", group, None, team=TEAM)

    assert result.score == pytest.approx(0.125)
    assert result.num_groups == 3


def test_ranking_orders_by_score_then_id_and_counts_before_limit():
    curriculum = curriculum_with([make_task(i) for i in range(4)])
    for i, group in enumerate(([1, 1], [1, 0], [1, 0, 0, 0], [0, 1])):
        curriculum.record_outcome(f"twx-coin/train/{i}", group, None, team=TEAM)

    ranking = curriculum.ranking(team=TEAM, limit=3)

    assert [r.task_id for r in ranking.data] == [
        "twx-coin/train/1",
        "twx-coin/train/3",
        "twx-coin/train/2",
    ]
    assert ranking.count == 4


# -- sampling (λ cap) --------------------------------------------------------------------------


@pytest.mark.parametrize(("lam", "batch_size", "cap"), [(0.25, 8, 2), (0.0, 8, 0), (0.5, 7, 3)])
def test_sample_train_generated_share_never_exceeds_lambda(lam, batch_size, cap):
    curriculum = curriculum_with(mixed_pool(), max_generated_fraction=lam)

    for seed in range(20):
        batch = curriculum.sample(TaskSampleRequest(batch_size=batch_size, seed=seed), team=TEAM)

        assert len(batch.tasks) == batch_size
        assert batch.num_generated == sum(t.origin == "generated" for t in batch.tasks)
        assert batch.num_generated <= cap


def test_sample_train_same_seed_same_batch():
    curriculum = curriculum_with(mixed_pool())
    request = TaskSampleRequest(batch_size=8, seed=3)

    assert curriculum.sample(request, team=TEAM) == curriculum.sample(request, team=TEAM)


def test_sample_train_without_seed_tasks_raises_no_tasks():
    curriculum = curriculum_with([make_task(1, origin="generated")], max_generated_fraction=0.5)

    with pytest.raises(NoTasksAvailableError, match="train seed"):
        curriculum.sample(TaskSampleRequest(batch_size=4), team=TEAM)


def test_sample_eval_never_returns_generated_or_train_tasks():
    tasks = mixed_pool() + [make_task(i, split="eval") for i in range(3)]
    curriculum = curriculum_with(tasks, max_generated_fraction=1.0)

    batch = curriculum.sample(TaskSampleRequest(batch_size=10, split="eval", seed=0), team=TEAM)

    assert batch.num_generated == 0
    assert {t.split for t in batch.tasks} == {"eval"}
    assert {t.task_id for t in batch.tasks} == {f"twx-coin/eval/{i}" for i in range(3)}


def test_sample_eval_empty_pool_raises_no_tasks():
    with pytest.raises(NoTasksAvailableError, match="eval seed"):
        curriculum_with(mixed_pool()).sample(
            TaskSampleRequest(batch_size=2, split="eval"), team=TEAM
        )


def test_sample_score_weighting_prefers_high_variance_seed():
    curriculum = curriculum_with([make_task(0), make_task(1)], sample_weighting="score")
    curriculum.record_outcome(
        "twx-coin/train/0", [1, 0, 1, 0], None, team=TEAM
    )  # weight 0.05 + 0.25
    curriculum.record_outcome("twx-coin/train/1", [1, 1, 1, 1], None, team=TEAM)  # weight 0.05 + 0

    batch = curriculum.sample(TaskSampleRequest(batch_size=602, seed=0), team=TEAM)

    counts = Counter(t.task_id for t in batch.tasks)
    assert counts["twx-coin/train/0"] > 450  # expected 1 + 600 * 6/7 ≈ 515


def test_sample_eval_task_ids_without_replacement_when_pool_suffices():
    ids = sample_eval_task_ids(["a", "b", "c", "d"], 4, np.random.default_rng(0))

    assert sorted(ids) == ["a", "b", "c", "d"]


def test_curriculum_config_lambda_outside_unit_interval_raises():
    with pytest.raises(ValueError, match="λ"):
        CurriculumConfig(max_generated_fraction=1.5)


# -- teams and quotas --------------------------------------------------------------------------


def test_curriculum_sees_only_the_callers_team():
    repository = InMemoryTaskRepository([make_task(0)])
    repository.register_tasks("lab-b", [make_task(1)])
    curriculum = Curriculum(repository, CurriculumConfig())
    curriculum.record_outcome("twx-coin/train/0", [1, 0], None, team=TEAM)

    with pytest.raises(TaskNotFoundError):
        curriculum.task_detail("twx-coin/train/1", team=TEAM)
    with pytest.raises(TaskNotFoundError):
        curriculum.record_outcome("twx-coin/train/0", [1, 0], None, team="lab-b")
    batch = curriculum.sample(TaskSampleRequest(batch_size=4, seed=0), team="lab-b")

    assert {t.task_id for t in batch.tasks} == {"twx-coin/train/1"}
    assert curriculum.ranking(team="lab-b").count == 0
    assert curriculum.list_tasks(team=TEAM).count == 1


def test_register_over_team_quota_raises_429_and_stores_nothing():
    from task_generator.domain.errors import TaskQuotaExceededError
    from task_generator.domain.quota import TaskQuota

    repository = InMemoryTaskRepository([make_task(0)])
    quota = TaskQuota(max_tasks_per_team=2, retry_after_s=30)
    curriculum = Curriculum(repository, CurriculumConfig(), quota)

    with pytest.raises(TaskQuotaExceededError) as info:
        curriculum.register([make_task(1), make_task(2)], team=TEAM)
    again = curriculum.register([make_task(0), make_task(1)], team=TEAM)  # one new: fits
    other = curriculum.register([make_task(5), make_task(6)], team="lab-b")

    assert (info.value.status_code, info.value.retry_after_s, info.value.stored) == (429, 30, 1)
    assert (again.inserted, again.duplicates) == (1, 1)
    assert other.inserted == 2


def test_task_quota_rejects_non_positive_limits():
    from task_generator.domain.quota import TaskQuota

    with pytest.raises(ValueError, match="max_tasks_per_team"):
        TaskQuota(max_tasks_per_team=0)
