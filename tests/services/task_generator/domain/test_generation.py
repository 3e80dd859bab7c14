"""Unit tests of task_generator.domain.generation (in-memory repository, FakeLLMBackend)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dreamgym.llm.base import Completion
from dreamgym.prompts.task_variation import NEW_TASK_MARKER
from dreamgym.task_types import TaskGenerateRequest
from dreamgym.testing.fakes import FakeLLMBackend
from task_generator.domain.errors import LLMBackendNotConfiguredError, LLMGenerationError
from task_generator.domain.generation import (
    GenerationConfig,
    TaskGenerator,
    select_seed_task_ids,
    variation_key,
    variation_task_id,
)

from ..factories import make_task, variation
from .memory_repository import TEAM, InMemoryTaskRepository

HIGH, LOW, FLAT = "twx-coin/train/0", "twx-coin/train/1", "twx-coin/train/2"


def scored_repository() -> InMemoryTaskRepository:
    repository = InMemoryTaskRepository([make_task(0), make_task(1), make_task(2)])
    repository.add_outcome(TEAM, HIGH, [1, 0, 1, 0], None)  # 0.25
    repository.add_outcome(TEAM, LOW, [1, 0, 0, 0], None)  # 0.1875
    repository.add_outcome(TEAM, FLAT, [1, 1, 1, 1], None)  # 0
    return repository


def generator_with(backend, repository=None, **config) -> TaskGenerator:
    return TaskGenerator(repository or scored_repository(), backend, GenerationConfig(**config))


def request(m: int = 1, n: int = 1, **kwargs) -> TaskGenerateRequest:
    return TaskGenerateRequest(num_seed_tasks=m, variations_per_task=n, **kwargs)


def test_variation_task_id_is_deterministic_short_hash():
    key = variation_key("twx-coin", "Find two coins.", "You are in the pantry.")

    assert variation_task_id(key) == variation_task_id(key)
    assert re.fullmatch(r"gen-[0-9a-f]{16}", variation_task_id(key))
    assert variation_task_id(key) != variation_task_id(("twx-cooking", *key[1:]))


def test_select_seed_task_ids_top_k_excludes_zero_score():
    scores = {"a": 0.1, "b": 0.25, "c": 0.0, "d": 0.2}

    picked = select_seed_task_ids(scores, 5, rng=np.random.default_rng(0), temperature=None)

    assert picked == ["b", "d", "a"]


def test_select_seed_task_ids_ties_go_to_smaller_id():
    picked = select_seed_task_ids(
        {"z": 0.25, "a": 0.25}, 1, rng=np.random.default_rng(0), temperature=None
    )

    assert picked == ["a"]


def test_generate_without_backend_raises_not_configured():
    with pytest.raises(LLMBackendNotConfiguredError) as info:
        generator_with(None).generate(request(), team=TEAM)

    assert info.value.status_code == 503


def test_generate_no_positive_score_returns_message_without_llm_call():
    repository = InMemoryTaskRepository([make_task(0)])
    repository.add_outcome(TEAM, "twx-coin/train/0", [0, 0], None)
    fake = FakeLLMBackend()

    result = generator_with(fake, repository).generate(request(), team=TEAM)

    assert result.created == [] and result.seed_task_ids == []
    assert "score > 0" in result.message
    assert fake.calls == []


def test_generate_prompts_one_per_variation_of_highest_variance_task():
    fake = FakeLLMBackend(responder=lambda prompt, params: "garbage")

    result = generator_with(fake).generate(request(m=1, n=3, seed=10), team=TEAM)

    assert result.seed_task_ids == [HIGH]
    assert len(fake.prompts) == 3
    assert all("Task: Find the coin in game 0." in p for p in fake.prompts)
    assert all(p.endswith(NEW_TASK_MARKER + "\n") for p in fake.prompts)
    assert [p.seed for p in fake.params] == [10, 11, 12]


def test_generate_sampling_params_from_config_and_request_temperature():
    fake = FakeLLMBackend(responder=lambda prompt, params: "garbage")
    generator = generator_with(fake, max_new_tokens=64, temperature=0.9, top_p=0.8)

    generator.generate(request(temperature=0.3), team=TEAM)

    (params,) = fake.params
    assert (params.max_new_tokens, params.temperature, params.top_p, params.seed) == (
        64,
        0.3,
        0.8,
        None,
    )


def test_generate_stores_valid_variation_with_lineage_fields():
    repository = scored_repository()
    fake = FakeLLMBackend([variation("Find two coins.")])

    result = generator_with(fake, repository).generate(request(), team=TEAM)

    (task,) = result.created
    assert (task.origin, task.split, task.parent_task_id) == ("generated", "train", HIGH)
    assert task.environment == "twx-coin" and task.game_seed is None
    assert task.initial_admissible_actions == ["move south", "take coin"]
    assert task.metadata["parent_score"] == 0.25
    assert repository.tasks[task.task_id] == task


def test_generate_rejects_malformed_and_duplicates_with_reasons():
    repository = scored_repository()
    parent = repository.tasks[HIGH]
    fake = FakeLLMBackend(
        [
            variation("New task A."),
            "<task>No observation.</task>",
            variation("New task A."),  # same as the first of this round
            variation(parent.instruction, parent.initial_observation),  # same as the parent
        ]
    )

    result = generator_with(fake, repository).generate(request(m=1, n=4), team=TEAM)

    assert [t.instruction for t in result.created] == ["New task A."]
    reasons = [r.reason for r in result.rejected]
    assert reasons[0] == "missing <observation> tag"
    assert reasons[1].startswith("duplicate of variation 'gen-")
    assert reasons[2] == f"duplicate of existing task '{HIGH}'"
    assert {r.parent_task_id for r in result.rejected} == {HIGH}
    assert result.rejected[0].completion == "<task>No observation.</task>"


def test_generate_backend_exception_becomes_generation_error_and_stores_nothing():
    repository = scored_repository()
    fake = FakeLLMBackend([RuntimeError("connection refused")])

    with pytest.raises(LLMGenerationError, match="connection refused"):
        generator_with(fake, repository).generate(request(), team=TEAM)

    assert len(repository.tasks) == 3


def test_generate_backend_wrong_completion_count_raises():
    class ShortBackend:
        name = "short"

        def generate(self, prompts, params):
            return [Completion(text="x")]

    with pytest.raises(LLMGenerationError, match="1 completions for 2 prompts"):
        generator_with(ShortBackend()).generate(request(m=1, n=2), team=TEAM)


def test_generate_uses_and_checks_only_the_callers_tasks():
    repository = scored_repository()
    parent = repository.tasks[HIGH]
    # lab-b stores the same variation the LLM will produce: not a duplicate for lab-a
    repository.insert_generated("lab-b", [make_task(7, origin="generated", instruction="Two.")])
    fake = FakeLLMBackend([variation("Two.", parent.initial_observation)] * 2)
    generator = generator_with(fake, repository)

    empty = generator.generate(request(), team="lab-b")  # lab-b has no scored task
    calls_for_lab_b = len(fake.calls)
    result = generator.generate(request(), team=TEAM)

    assert empty.seed_task_ids == [] and calls_for_lab_b == 0
    assert [t.instruction for t in result.created] == ["Two."]
    assert result.created[0].task_id in repository.tasks
    assert result.created[0].task_id not in repository.by_team["lab-b"]


def test_generate_with_full_quota_raises_429_before_calling_the_llm():
    from task_generator.domain.errors import TaskQuotaExceededError
    from task_generator.domain.quota import TaskQuota

    fake = FakeLLMBackend([variation("New.")])
    generator = TaskGenerator(
        scored_repository(), fake, GenerationConfig(), TaskQuota(max_tasks_per_team=3)
    )

    with pytest.raises(TaskQuotaExceededError) as info:
        generator.generate(request(), team=TEAM)

    assert info.value.status_code == 429 and fake.calls == []


def test_generate_variations_over_quota_store_nothing():
    from task_generator.domain.errors import TaskQuotaExceededError
    from task_generator.domain.quota import TaskQuota

    repository = scored_repository()
    fake = FakeLLMBackend([variation("New A."), variation("New B.")])
    generator = TaskGenerator(repository, fake, GenerationConfig(), TaskQuota(max_tasks_per_team=4))

    with pytest.raises(TaskQuotaExceededError):
        generator.generate(request(m=1, n=2), team=TEAM)

    assert len(repository.tasks) == 3
