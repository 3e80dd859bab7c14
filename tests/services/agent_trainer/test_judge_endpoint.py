"""The LLM judge of the ``fidelity`` job against a real OpenAI-compatible server on loopback.

One FastAPI app under a real uvicorn thread plays two parts: an OpenAI-compatible
``/v1/chat/completions`` judge answering scripted rubric replies (some malformed) in arrival
order, and the experience model's ``/v1/transitions:predict`` (a deterministic fake, some
predictions failed). The fidelity job runs for real on 2 held-out TextWorldExpress Coin Collector
games: in-process, and once through the trainer's job API (a spawned job process).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from agent_trainer.jobs import fidelity as fidelity_job
from agent_trainer.jobs.schemas import VALIDATORS
from agent_trainer.judge import CRITERIA, JudgeRequestError
from agent_trainer.judge_client import ChatJudge, chat_base_url
from agent_trainer.main import create_app
from agent_trainer.settings import Settings
from dreamgym.clients.base import API_KEY_ENV
from dreamgym.jobs import JobContext, JobRecord
from dreamgym.testing.live import serve_app

KEY = "sk-judge-0123456789abcdef"
JUDGE_MODEL = "rubric-judge-test"


def rubric(*scores: int) -> str:
    return json.dumps({"rubric_scores": dict(zip(CRITERIA, scores, strict=True))})


# (reply text, the scores it means — written by hand — or None for a malformed reply)
REPLIES: list[tuple[str, tuple[int, ...] | None]] = [
    (rubric(2, 2, 1, 2), (2, 2, 1, 2)),
    (f"```json\n{rubric(1, 0, 1, 2)}\n```", (1, 0, 1, 2)),
    ("The predicted state seems reasonable.", None),
    (f"Verdict: {rubric(2, 1, 2, 1)} (done)", (2, 1, 2, 1)),
    (rubric(3, 1, 1, 1), None),
    ('{"rubric_scores": {"causal_consistency": 2}}', None),
]


class Script:
    """What the fake server answers and records (shared by its request threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self, failures: tuple[int, ...] = ()) -> None:
        with self.lock:
            self.failures = list(failures)  # statuses answered before any reply
            self.chat: list[dict[str, Any]] = []  # {"authorization", "body", "reply"}
            self.predicted: list[dict[str, Any]] = []  # {"query", "failed"}


def failed_query(query: dict[str, Any]) -> bool:
    return query["seed"] % 5 == 2


def make_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any], request: Request) -> Any:
        with script.lock:
            entry: dict[str, Any] = {
                "authorization": request.headers.get("authorization"),
                "body": body,
                "reply": None,
            }
            script.chat.append(entry)
            if body.get("model") == "denied":
                error = {"message": "invalid api key", "type": "invalid_request_error"}
                return JSONResponse({"error": error}, status_code=401)
            if script.failures:
                status = script.failures.pop(0)
                error = {"message": "busy", "type": "rate_limit_error"}
                return JSONResponse(
                    {"error": error}, status_code=status, headers={"Retry-After": "0"}
                )
            given = sum(e["reply"] is not None for e in script.chat)
            entry["reply"] = given % len(REPLIES)
        return {
            "id": f"chatcmpl-{len(script.chat)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REPLIES[entry["reply"]][0]},
                    "finish_reason": "stop",
                }
            ],
        }

    @app.post("/v1/transitions:predict")
    def predict(body: dict[str, Any]) -> dict[str, Any]:
        predictions = []
        with script.lock:
            for q in body["queries"]:
                script.predicted.append({"query": q, "failed": failed_query(q)})
                if failed_query(q):
                    error = {"type": "malformed_transition", "message": "unparseable", "code": 502}
                    predictions.append({"error": error})
                else:
                    predictions.append(
                        {
                            "observation": f"After '{q['action']}' you are somewhere else.",
                            "admissible_actions": list(q["admissible_actions"]),
                            "reward": 0.0,
                            "terminated": False,
                        }
                    )
        return {"predictions": predictions}

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Script]]:
    """``(root_url, script)`` of the fake server on a free loopback port (real uvicorn)."""
    script = Script()
    with serve_app(make_app(script)) as url:
        yield url, script


def expected_judge(script: Script) -> dict[str, Any]:
    """Means and failure counts from the replies the server actually gave (hand-written scores)."""
    given = [REPLIES[e["reply"]][1] for e in script.chat if e["reply"] is not None]
    valid = [s for s in given if s is not None]
    return {
        "judged": len(valid),
        "parse_failures": len(given) - len(valid),
        "means": {c: sum(s[i] for s in valid) / len(valid) for i, c in enumerate(CRITERIA)},
    }


# -- the endpoint adapter -------------------------------------------------------------------------


def test_chat_base_url_appends_v1_only_to_a_bare_root():
    assert chat_base_url("http://vllm:8000") == "http://vllm:8000/v1"
    assert chat_base_url("http://vllm:8000/") == "http://vllm:8000/v1"
    assert chat_base_url("https://api.openai.com/v1/") == "https://api.openai.com/v1"
    assert chat_base_url("http://gw/openai/v2") == "http://gw/openai/v2"


def test_chat_judge_retries_429_and_5xx_and_sends_the_key_as_bearer(server):
    url, script = server
    script.reset(failures=(429, 503))
    messages = [{"role": "system", "content": "rubric"}, {"role": "user", "content": "state"}]

    with ChatJudge(url, JUDGE_MODEL, api_key=KEY, backoff_s=0.01) as ask:
        body = ask(messages)

    assert len(script.chat) == 3  # 429, 503, then the answer
    assert [e["authorization"] for e in script.chat] == [f"Bearer {KEY}"] * 3
    sent = script.chat[-1]["body"]
    assert (sent["model"], sent["messages"], sent["temperature"]) == (JUDGE_MODEL, messages, 0)
    assert body["choices"][0]["message"]["content"] == REPLIES[0][0]


def test_chat_judge_without_a_key_never_sends_the_team_key(server, monkeypatch):
    url, script = server
    script.reset()
    monkeypatch.setenv(API_KEY_ENV, "team-key-must-not-leak")

    with ChatJudge(url, JUDGE_MODEL) as ask:
        ask([{"role": "user", "content": "x"}])

    assert script.chat[0]["authorization"] is None


def test_chat_judge_rejected_request_is_one_request_error_without_the_key(server):
    url, script = server
    script.reset()

    with (
        ChatJudge(url, "denied", api_key=KEY, backoff_s=0.01) as ask,
        pytest.raises(JudgeRequestError) as info,
    ):
        ask([{"role": "user", "content": "x"}])

    assert len(script.chat) == 1  # a 401 is not retried
    assert "401" in str(info.value) and "invalid api key" in str(info.value)
    assert KEY not in str(info.value)


# -- the fidelity job -----------------------------------------------------------------------------


def fidelity_config(url: str, judge: dict[str, Any] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "environment": "twx-coin",
        "episodes": 2,
        "max_steps": 10,
        "seed": 0,
        "services": {"experience_model": url},
    }
    if judge is not None:
        config["judge"] = judge
    return config


def judge_section(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": f"{url}/v1",
        "model": JUDGE_MODEL,
        "api_key": KEY,
        "max_transitions": 8,
        "concurrency": 3,
        **extra,
    }


def run_in_process(config: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    ctx = JobContext(tmp_path, "job-test")
    (ctx.workdir / "status.json").write_text(
        JobRecord(job_id="job-test", kind="fidelity").model_dump_json()
    )
    return fidelity_job.run(VALIDATORS["fidelity"](config), ctx)


@pytest.fixture(scope="module")
def judged(server, tmp_path_factory) -> tuple[dict[str, Any], Script]:
    """The in-process fidelity job with the judge, and a copy of what the server saw."""
    url, script = server
    script.reset(failures=(503,))
    result = run_in_process(
        fidelity_config(url, judge_section(url)), tmp_path_factory.mktemp("judged")
    )
    seen = Script()
    seen.chat, seen.predicted = list(script.chat), list(script.predicted)
    return result, seen


def test_fidelity_job_judges_a_sample_and_aggregates_the_scripted_scores(judged):
    result, seen = judged
    judge = result["judge"]
    parsed = sum(not p["failed"] for p in seen.predicted)

    assert len(seen.predicted) == result["transitions"] and parsed < len(seen.predicted)
    assert judge["model"] == JUDGE_MODEL
    assert judge["population"] == parsed  # failed predictions are not sampled
    assert judge["sampled"] == min(8, parsed)
    assert judge["judged"] + judge["parse_failures"] == judge["sampled"]
    assert judge["parse_failures"] > 0  # malformed replies are counted, not raised
    assert judge["request_failures"] == 0 and judge["not_asked"] == 0 and judge["error"] is None
    expected = expected_judge(seen)
    assert judge["judged"] == expected["judged"]
    assert judge["parse_failures"] == expected["parse_failures"]
    assert judge["means"] == pytest.approx(expected["means"])
    assert sum(judge["counts"]["diversity"]) == judge["judged"]


def test_fidelity_job_sends_the_judge_the_sampled_transitions_with_the_key(judged):
    result, seen = judged
    answered = [e for e in seen.chat if e["reply"] is not None]

    assert len(answered) == result["judge"]["sampled"]
    assert len(seen.chat) == len(answered) + 1  # the 503 was retried
    assert {e["authorization"] for e in seen.chat} == {f"Bearer {KEY}"}
    actions = {p["query"]["action"] for p in seen.predicted if not p["failed"]}
    for entry in answered:
        user = entry["body"]["messages"][1]["content"]
        action = user.split("## ACTION\n")[1].split("\n")[0]
        assert action in actions
        assert f"After '{action}' you are somewhere else." in user  # the prediction is shown
    assert KEY not in json.dumps(result)


def test_fidelity_job_without_judge_is_unchanged(judged, server, tmp_path):
    with_judge, _ = judged
    url, script = server
    script.reset()
    config = fidelity_config(url, None)

    result = run_in_process(config, tmp_path)

    assert "judge" not in VALIDATORS["fidelity"](config)
    assert script.chat == []
    assert set(result) == set(with_judge) - {"judge"}
    failed = sum(p["failed"] for p in script.predicted)
    assert result["transitions"] == len(script.predicted)
    assert result["parse_failure_rate"] == pytest.approx(failed / len(script.predicted))


def test_fidelity_job_api_never_shows_the_judge_key(server, tmp_path):
    url, script = server
    script.reset()
    settings = Settings(
        data_dir=tmp_path / "trainer",
        json_logs=False,
        log_level="WARNING",
        max_running_jobs=1,
        experience_model_url=url,
        replay_store_url="http://127.0.0.1:9",
        task_generator_url="http://127.0.0.1:9",
    )
    body = {
        "kind": "fidelity",
        "config": fidelity_config(url, judge_section(url, max_transitions=3, concurrency=1)),
    }

    with TestClient(create_app(settings)) as client:
        submitted = client.post("/v1/jobs", json=body)
        assert submitted.status_code == 201, submitted.text
        job_id = submitted.json()["job_id"]
        deadline = time.monotonic() + 180.0
        while (read := client.get(f"/v1/jobs/{job_id}")).json()["state"] not in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            assert time.monotonic() < deadline, read.text
            time.sleep(0.25)
        listed = client.get("/v1/jobs")

    record = read.json()
    assert record["state"] == "succeeded", record.get("error")
    assert record["result"]["judge"]["sampled"] == 3
    assert record["config"]["judge"]["model"] == JUDGE_MODEL
    for text in (submitted.text, read.text, listed.text):
        assert KEY not in text
    assert "api_key" not in record["config"]["judge"]
    assert {e["authorization"] for e in script.chat} == {f"Bearer {KEY}"}
    workdir = settings.data_dir / "jobs" / job_id
    assert KEY not in (workdir / "job.log").read_text()


@pytest.mark.parametrize(
    ("judge", "param"),
    [
        ({"model": "m"}, "config.judge.base_url"),
        ({"base_url": "ftp://judge", "model": "m"}, "config.judge.base_url"),
        ({"base_url": "http://judge/v1"}, "config.judge.model"),
        ({"base_url": "http://judge/v1", "model": ""}, "config.judge.model"),
        (
            {"base_url": "http://judge/v1", "model": "m", "max_transitions": 0},
            "config.judge.max_transitions",
        ),
        ({"base_url": "http://judge/v1", "model": "m", "timeout_s": 0}, "config.judge.timeout_s"),
        (
            {"base_url": "http://judge/v1", "model": "m", "concurrency": 0},
            "config.judge.concurrency",
        ),
        (
            {"base_url": "http://judge/v1", "model": "m", "temperature": 1},
            "config.judge.temperature",
        ),
    ],
)
def test_fidelity_job_bad_judge_config_is_422_naming_the_field(tmp_path, judge, param):
    settings = Settings(data_dir=tmp_path, json_logs=False, log_level="WARNING")
    body = {"kind": "fidelity", "config": {"judge": {**judge, "api_key": KEY}}}

    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/jobs", json=body)

    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == param
    assert KEY not in response.text
