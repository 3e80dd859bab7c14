"""Teacher annotation (experience_model.training.annotate) and SFT data with reasoning traces,
against a real replay store (uvicorn, real PostgreSQL + pgvector, hash embedder)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from dreamgym.types import Trajectory
from experience_model.domain.prompts import NEXT_STATE_HEADER_NO_REASONING
from experience_model.training.annotate import (
    AnnotateConfig,
    LLMTeacher,
    RuleTeacher,
    annotate_replay_store,
    build_teacher,
)
from experience_model.training.sft import SFTConfig, build_examples

pytestmark = pytest.mark.integration

TASK = "Your task is to search the environment and find the coin. Once you find the coin, take it."
KITCHEN = "You are in the kitchen. To the North you see the pantry."
PANTRY = "You are in the pantry. You see a coin. To the South you see the kitchen."


def coin_trajectory(source: str = "real", index: int = 0) -> Trajectory:
    """A real Coin Collector episode: move north, take coin (won)."""
    return Trajectory.model_validate(
        {
            "task": TASK,
            "transitions": [
                {
                    "step": 0,
                    "observation": f"{KITCHEN} Game {index}.",
                    "admissible_actions": ["look around", "move north"],
                    "action": "move north",
                    "next_observation": PANTRY,
                    "next_admissible_actions": ["move south", "take coin"],
                    "reward": 0.0,
                    "terminated": False,
                },
                {
                    "step": 1,
                    "observation": PANTRY,
                    "admissible_actions": ["move south", "take coin"],
                    "action": "take coin",
                    "next_observation": "You take the coin.",
                    "next_admissible_actions": [],
                    "reward": 1.0,
                    "terminated": True,
                    "won": True,
                },
            ],
            "provenance": {
                "environment": "twx-coin",
                "policy": "expert" if source == "real" else "agent",
                "source": source,
                "game_seed": index,
                "split": "train",
            },
        }
    )


@pytest.fixture(scope="module")
def live_replay(postgres: Any) -> Iterator[tuple[str, Any]]:
    """(URL, app) of a replay store served by uvicorn on its own new database."""
    from replay_store.main import create_app
    from replay_store.settings import Settings

    name = f"em_annot_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    settings = Settings(
        database_url=postgres.url(name),
        embedding_model="hash",
        embedding_dim=384,
        json_logs=False,
        log_level="WARNING",
    )
    app = create_app(settings)
    with serve_app(app) as url:
        yield url, app
    postgres.drop_database(name)


@pytest.fixture()
def replay_url(live_replay: tuple[str, Any]) -> str:
    """The live store's URL, its tables emptied."""
    url, app = live_replay
    with app.state.repository.engine.begin() as conn:
        conn.execute(text("TRUNCATE trajectories, transitions RESTART IDENTITY CASCADE"))
    return url


@pytest.fixture()
def replay(replay_url: str) -> Iterator[ReplayStoreClient]:
    """A client of the store holding 3 real episodes (6 transitions) and 1 synthetic one."""
    with ReplayStoreClient(replay_url, max_retries=0, timeout_s=30) as client:
        client.ingest([coin_trajectory(index=i) for i in range(3)])
        client.ingest([coin_trajectory("synthetic", 9)])
        yield client


def config(url: str, **overrides: Any) -> AnnotateConfig:
    return AnnotateConfig(**({"replay_store_url": url, "batch_size": 4} | overrides))


def test_rule_annotation_traces_every_real_transition_once(replay, replay_url):
    cfg = config(replay_url)

    first = annotate_replay_store(cfg, replay, RuleTeacher())
    second = annotate_replay_store(cfg, replay, RuleTeacher())

    assert (first["pending"], first["annotated"], first["no_trace"]) == (6, 6, 0)
    assert (second["pending"], second["annotated"]) == (0, 0)
    real = list(replay.iter_transitions(source="real"))
    assert all(r.reasoning for r in real)
    take = next(r for r in real if r.action == "take coin")
    assert "inventory" in take.reasoning and "ends in success" in take.reasoning
    synthetic = list(replay.iter_transitions(source="synthetic"))
    assert [r.reasoning for r in synthetic] == [None, None]


def test_annotation_limit_and_progress(replay, replay_url):
    reports: list[float] = []

    summary = annotate_replay_store(
        config(replay_url, limit=3, batch_size=2),
        replay,
        RuleTeacher(),
        progress=lambda p, msg, m: reports.append(p),
    )

    assert summary["annotated"] == 3
    assert len(list(replay.iter_transitions(has_reasoning=False, source="real"))) == 3
    assert reports == sorted(reports) and reports[-1] == pytest.approx(0.99)


def test_llm_teacher_unusable_answers_store_nothing_for_those(replay, replay_url):
    answers = iter(["<think>north leads to the pantry</think>", "", "<think>coin taken</think>"])
    fake = FakeLLMBackend(responder=lambda prompt, params: next(answers, "<think>ok</think>"))
    teacher = LLMTeacher(fake, max_new_tokens=32, temperature=0.0, seed=5)

    summary = annotate_replay_store(config(replay_url, batch_size=3), replay, teacher)

    assert (summary["annotated"], summary["no_trace"]) == (5, 1)
    assert teacher.unparseable == 1
    assert "Action: move north" in fake.prompts[0] and "Reward: 0" in fake.prompts[0]
    assert [c.params.seed for c in fake.calls][:2] == [6, 7]  # seed + transition id
    first = next(iter(replay.iter_transitions(source="real")))
    assert first.reasoning == "north leads to the pantry"


def test_overwrite_replaces_existing_traces(replay, replay_url):
    annotate_replay_store(config(replay_url), replay, RuleTeacher())
    fake = FakeLLMBackend(responder=lambda prompt, params: "<think>new</think>")

    summary = annotate_replay_store(
        config(replay_url, overwrite=True),
        replay,
        LLMTeacher(fake, max_new_tokens=8, temperature=0),
    )

    assert summary["pending"] == 6 and summary["annotated"] == 6
    assert {r.reasoning for r in replay.iter_transitions(source="real")} == {"new"}


def test_sft_examples_carry_traces_only_with_use_reasoning(replay, replay_url, tmp_path):
    annotate_replay_store(config(replay_url), replay, RuleTeacher())
    base = {"replay_store_url": replay_url, "output_dir": str(tmp_path), "retrieval_k": 1}

    with_traces = build_examples(SFTConfig(**base), replay)
    without = build_examples(SFTConfig(**base, use_reasoning=False), replay)

    assert len(with_traces) == len(without) == 6
    assert all(e.target.startswith("<think>") for e in with_traces)
    assert all(e.prompt.endswith("### Next state\n") for e in with_traces)
    assert not any("<think>" in e.target for e in without)
    assert all(e.prompt.endswith(NEXT_STATE_HEADER_NO_REASONING + "\n") for e in without)
    assert [e.target.split("</think>\n")[1] for e in with_traces] == [e.target for e in without]


def test_sft_examples_from_the_grown_buffer_include_synthetic(replay, replay_url, tmp_path):
    base = {"replay_store_url": replay_url, "output_dir": str(tmp_path), "use_retrieval": False}

    real_only = build_examples(SFTConfig(**base), replay)
    grown = build_examples(SFTConfig(**base, data_source="any"), replay)

    assert (len(real_only), len(grown)) == (6, 8)


def test_annotate_config_requires_the_teachers_endpoint():
    with pytest.raises(ValueError, match="openai_base_url"):
        AnnotateConfig(replay_store_url="http://x", teacher="openai", openai_model="m")
    with pytest.raises(ValueError, match="model_path"):
        AnnotateConfig(replay_store_url="http://x", teacher="local")


def test_build_teacher_openai_reads_the_key_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("MY_TEACHER_KEY", "sk-test")
    cfg = AnnotateConfig(
        replay_store_url="http://x",
        teacher="openai",
        openai_base_url="http://teacher:8000",
        openai_model="big",
        openai_api_key_env="MY_TEACHER_KEY",
    )

    teacher = build_teacher(cfg)

    assert teacher.name == "llm:openai"
    backend = teacher.backend  # type: ignore[attr-defined]
    assert backend.url == "http://teacher:8000/v1"
    assert backend._http.headers["Authorization"] == "Bearer sk-test"
    backend.close()


def test_annotate_job_through_the_training_jobs_api(make_client, replay, replay_url):
    client = make_client()

    response = client.post(
        "/v1/training-jobs",
        json={"kind": "annotate", "config": {"replay_store_url": replay_url, "teacher": "rule"}},
    )

    assert response.status_code == 201, response.text
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + 120
    record = response.json()
    while record["state"] not in ("succeeded", "failed", "cancelled"):
        assert time.monotonic() < deadline, record
        time.sleep(0.5)
        record = client.get(f"/v1/training-jobs/{job_id}").json()
    assert record["state"] == "succeeded", record.get("error")
    assert record["kind"] == "annotate"
    assert record["result"]["annotated"] == 6 and record["result"]["teacher"] == "rule"
    assert not list(replay.iter_transitions(source="real", has_reasoning=False))


def test_annotate_job_invalid_config_is_422_naming_the_field(make_client):
    client = make_client()

    response = client.post(
        "/v1/training-jobs",
        json={"kind": "annotate", "config": {"replay_store_url": "http://x", "teacher": "oracle"}},
    )

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "config.teacher"


def test_training_job_unknown_kind_is_422(make_client):
    response = make_client().post("/v1/training-jobs", json={"kind": "distill", "config": {}})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "body.kind"


def test_client_start_annotation_posts_the_annotate_kind():
    import httpx

    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        record = {"job_id": "job-1", "kind": body["kind"], "state": "queued", "config": {}}
        return httpx.Response(201, json=record)

    with ExperienceModelClient("http://em", transport=httpx.MockTransport(answer)) as em:
        record = em.start_annotation({"replay_store_url": "http://rs", "limit": 1})
        em.start_training({"replay_store_url": "http://rs"})

    assert record.kind == "annotate"
    assert sent == [
        {"kind": "annotate", "config": {"replay_store_url": "http://rs", "limit": 1}},
        {"kind": "sft", "config": {"replay_store_url": "http://rs"}},
    ]


@pytest.mark.model
@pytest.mark.parametrize("use_reasoning", [True, False])
def test_trained_model_emits_reasoning_only_when_trained_with_it(
    replay, replay_url, tmp_path, use_reasoning
):
    from dreamgym.llm.base import SamplingParams
    from dreamgym.llm.transformers_backend import TransformersBackend
    from experience_model.domain.prompts import parse_step_output
    from experience_model.training.sft import train_experience_model

    annotate_replay_store(config(replay_url), replay, RuleTeacher())
    cfg = SFTConfig(
        replay_store_url=replay_url,
        output_dir=str(tmp_path / "em"),
        base_model="tiny:layers=1,hidden=64,heads=2,intermediate=128",
        bpe_vocab_size=400,
        steps=150,
        batch_size=6,
        learning_rate=3e-3,
        warmup_steps=10,
        use_retrieval=False,
        use_reasoning=use_reasoning,
        holdout_fraction=0.0,
        task_synthesis_pairs=0,
    )

    summary = train_experience_model(cfg)
    backend = TransformersBackend(summary["checkpoint"], static_cache=False)
    with ReplayStoreClient(replay_url) as client:
        prompt = build_examples(cfg, client)[1].prompt  # "take coin" in the pantry
    (completion,) = backend.generate([prompt], [SamplingParams(max_new_tokens=120, temperature=0)])

    assert summary["config"]["use_reasoning"] is use_reasoning
    assert summary["reasoning_examples"] == (6 if use_reasoning else 0)
    parsed = parse_step_output(completion.text)
    assert parsed.reward == 1.0 and parsed.terminated
    if use_reasoning:
        assert "coin" in parsed.reasoning and "success" in parsed.reasoning
    else:
        assert parsed.reasoning == ""
