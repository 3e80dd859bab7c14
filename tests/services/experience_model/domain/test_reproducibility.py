"""Seeded reproducibility of imagined steps with the real transformers backend (tiny model).

A group of rollouts starts from one task: every episode has the identical initial state, and two
episodes with the same seed sample the identical completion at temperature 1 — whether they share
a batch with other rows or run alone — while a different seed samples a different one. The tiny
random model's text does not parse (502), so the completions are compared where the backend
returns them.
"""

from __future__ import annotations

import pytest

from dreamgym.errors import MalformedTransitionError
from dreamgym.llm.base import Completion, SamplingParams
from dreamgym.llm.models import load_causal_lm
from dreamgym.llm.transformers_backend import TransformersBackend
from experience_model.domain.episodes import InMemoryEpisodeStore
from experience_model.domain.service import EpisodeService
from experience_model.domain.simulator import ExperienceModel, SamplingConfig

from ..factories import make_task

pytestmark = pytest.mark.model

TINY = "tiny:layers=1,hidden=32,heads=2,intermediate=64"


class RecordingBackend:
    """Wraps a real backend; records each call's rows as (seed, completion text)."""

    name = "recording"

    def __init__(self, inner: TransformersBackend) -> None:
        self.inner = inner
        self.batches: list[list[tuple[int | None, str]]] = []

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        out = self.inner.generate(prompts, params)
        self.batches.append([(p.seed, c.text) for p, c in zip(params, out, strict=True)])
        return out


@pytest.fixture(scope="module")
def tiny() -> TransformersBackend:
    model, tokenizer = load_causal_lm(TINY)
    return TransformersBackend(model=model, tokenizer=tokenizer)


@pytest.fixture()
async def make_service(tiny):
    services: list[EpisodeService] = []

    def make() -> tuple[EpisodeService, RecordingBackend]:
        backend = RecordingBackend(tiny)
        model = ExperienceModel(
            backend,
            None,
            sampling=SamplingConfig(temperature=1.0, max_new_tokens=16, parse_retries=0),
        )
        service = EpisodeService(
            InMemoryEpisodeStore(), model, max_wait_s=0.5, idle_s=0.5, max_batch_size=8
        )
        services.append(service)
        return service, backend

    yield make
    for s in services:
        await s.batcher.stop()


def texts_by_seed(batch: list[tuple[int | None, str]]) -> dict[int | None, set[str]]:
    grouped: dict[int | None, set[str]] = {}
    for seed, text in batch:
        grouped.setdefault(seed, set()).add(text)
    return grouped


async def test_group_from_one_task_same_seed_same_sample_in_or_out_of_a_batch(make_service):
    service, backend = make_service()
    task = make_task(0)
    group = [service.reset(task, seed=s) for s in (5, 5, 5, 6)]

    outcomes = await service.step_many([(ep.episode_id, "move north", None) for ep in group])
    alone = service.reset(task, seed=5)
    await service.step_many([(alone.episode_id, "move north", None)])

    assert all(ep.state == task.initial_state() for ep in group)
    assert all(isinstance(o, MalformedTransitionError) for o in outcomes)  # random model
    assert [len(b) for b in backend.batches] == [4, 1]
    grouped = texts_by_seed(backend.batches[0])
    assert set(grouped) == {5 * 1009, 6 * 1009}  # episode seed -> step-0 sampling seed
    (same,) = grouped[5 * 1009]  # three rows with seed 5: one text
    (other,) = grouped[6 * 1009]
    assert same != other
    assert backend.batches[1] == [(5 * 1009, same)]  # alone: the same sample as in the batch


async def test_explicit_step_seed_reproduces_across_episodes(make_service):
    service, backend = make_service()
    a, b = service.reset(make_task(1)), service.reset(make_task(1))

    await service.step_many([(a.episode_id, "move north", 99)])
    await service.step_many([(b.episode_id, "move north", 99)])
    await service.step_many([(b.episode_id, "move north", 100)])

    (first,), (second,), (third,) = backend.batches
    assert first == second == (99, first[1])
    assert third[0] == 100 and third[1] != first[1]
