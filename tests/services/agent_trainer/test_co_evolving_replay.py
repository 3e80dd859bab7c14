"""The co-evolving replay buffer end to end (paper §2, §4.3): a GRPO step in a real experience-model
service pushes its imagined trajectories into a real replay store tagged ``synthetic`` with the
policy version, with the experience model's reasoning on every transition; the experience model
then retrieves them beside real transitions (``retrieval_source=mix``); per-run episode options
reach the service.

Real parts: PostgreSQL + pgvector replay store, the experience-model service (uvicorn) with a
scripted fake LLM, a tiny real policy; only the LLM of the experience model is faked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_trainer.env_pools import ImaginedEnvPool
from agent_trainer.jobs.training import RestReplaySink
from agent_trainer.trainer import GRPOTrainer
from dreamgym.clients.experience_model import AsyncExperienceModelClient, ExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.llm.base import SamplingParams
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from dreamgym.types import Trajectory

from .factories import RecordingTaskSource, make_task
from .test_em_refresh import config as grpo_config

pytestmark = [pytest.mark.integration, pytest.mark.model]


def imagined(prompt: str, params: SamplingParams) -> str:
    """Scripted dynamics with a reasoning trace: ``take coin`` wins, anything else moves on."""
    del params
    fields = dict(line.split(": ", 1) for line in prompt.splitlines() if ": " in line)
    action = fields["Action"]
    if action == "take coin":
        return (
            "<think>the coin is taken</think>\n<observation>You take the coin.</observation>\n"
            "<actions></actions>\n<reward>1</reward>\n<terminated>true</terminated>"
        )
    return (
        f"<think>{action} changes the room</think>\n<observation>You did {action}."
        f"</observation>\n<actions>{fields['Actions']}</actions>\n<reward>0</reward>\n"
        "<terminated>false</terminated>"
    )


@pytest.fixture(scope="module")
def replay_url(postgres: Any) -> Iterator[str]:
    from replay_store.main import create_app
    from replay_store.settings import Settings

    name = f"co_evolve_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    settings = Settings(
        database_url=postgres.url(name),
        embedding_model="hash",
        embedding_dim=384,
        json_logs=False,
        log_level="WARNING",
    )
    with serve_app(create_app(settings)) as url:
        yield url
    postgres.drop_database(name)


@pytest.fixture(scope="module")
def services(replay_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Replay store with one real episode, and an experience model retrieving a 50/50 mix."""
    from experience_model.main import create_app
    from experience_model.settings import Settings

    real = Trajectory.model_validate(
        {
            "task": "Find the coin in game 0.",
            "transitions": [
                {
                    "step": 0,
                    "observation": "You are in the kitchen.",
                    "admissible_actions": ["take coin", "move north"],
                    "action": "take coin",
                    "next_observation": "You take the coin.",
                    "next_admissible_actions": [],
                    "reward": 1.0,
                    "terminated": True,
                    "won": True,
                }
            ],
            "provenance": {"environment": "twx-coin", "policy": "expert", "source": "real"},
        }
    )
    with ReplayStoreClient(replay_url) as replay:
        replay.ingest([real])
    llm = FakeLLMBackend(responder=imagined)
    settings = Settings(
        backend="fake",
        data_dir=Path(tmp_path_factory.mktemp("em")),
        json_logs=False,
        log_level="WARNING",
        replay_store_url=replay_url,
        retrieval_k=2,
        retrieval_source="mix",
        retrieval_synthetic_fraction=0.5,
        retrieval_cache_ttl_s=0,
        max_batch_wait_ms=1.0,
    )
    with serve_app(create_app(settings, backend=llm)) as em_url:
        yield {"replay": replay_url, "em": em_url, "llm": llm}


def test_imagined_rollouts_flow_back_tagged_and_are_retrieved_in_the_mix(
    services, make_policy, tmp_path
):
    em = AsyncExperienceModelClient(services["em"], timeout_s=60)
    with ReplayStoreClient(services["replay"]) as replay:
        trainer = GRPOTrainer(
            grpo_config(iterations=1, em_refresh_every=0, max_steps=3),
            policy=make_policy(seed=0),
            pool=ImaginedEnvPool(em, options={"history_length": 0}),
            task_source=RecordingTaskSource([make_task(0), make_task(1)]),
            replay=RestReplaySink(replay),
            run_dir=tmp_path / "run-co",
        )
        try:
            metrics = trainer.step()
        finally:
            trainer.run_async(em.aclose())
            trainer.close()

        synthetic = replay.list_trajectories(source="synthetic", limit=100)
        transitions = list(replay.iter_transitions(source="synthetic"))

    assert metrics["replay/pushed_trajectories"] == synthetic.count == 4  # 2 tasks x group 2
    assert {t.policy_version for t in synthetic.data} == {"run-co@0"}
    assert {t.policy for t in synthetic.data} == {"agent"}
    assert all(
        t.reasoning and t.reasoning.endswith(("changes the room", "taken")) for t in transitions
    )
    assert not any("History:" in p for p in services["llm"].prompts)  # the run's reset options

    with ExperienceModelClient(services["em"]) as client:
        ep = client.reset(make_task(5), seed=1, max_steps=3)
        out = client.step(ep.episode_id, "take coin")
    synthetic_ids = {t.trajectory_id for t in synthetic.data}
    retrieved = [ref.split("#")[0] for ref in out.info.retrieved]
    assert len(retrieved) == 2
    assert sum(r in synthetic_ids for r in retrieved) == 1  # round(2 x 0.5) synthetic, 1 real
