"""Teams on the experience model, through the HTTP API with a real key registry (PostgreSQL).

Every episode belongs to the team whose key reset it: another team gets 404 ``episode_not_found``
for it on every route, exactly as for an unknown id, on both episode stores (in memory and a real
Redis). The per-team live-episode quota answers 429 with ``Retry-After`` (across replicas on
Redis); retrieval acts as the caller's team; SFT jobs are scoped like trainer jobs; OpenEnv needs
a key (HTTP 401, WebSocket close 1008); model reload is for admin teams only (403).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from dreamgym.clients.replay_store import AsyncReplayStoreClient
from dreamgym.replay_types import RetrievedTransition
from dreamgym.testing.fakes import FakeLLMBackend
from dreamgym.testing.live import serve_app
from experience_model.adapters.retrieval import ReplayStoreRetriever
from experience_model.main import create_app

from ..factories import make_task, scripted_responder, task_json
from .helpers import assert_envelope

pytestmark = pytest.mark.integration

UNKNOWN_ID = "ep-00000000000000000000000000000000"
SFT = {"replay_store_url": "http://127.0.0.1:9", "output_dir": "/tmp/sft-out", "steps": 5}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(params=["memory", "redis"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings of the episode store under test: in memory, or a real Redis (own prefix)."""
    if request.param == "memory":
        return {"redis_url": None}
    return {
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_key_prefix": f"test:teams:{uuid.uuid4().hex[:8]}",
    }


@pytest.fixture()
def team_client(make_client, auth_database_url) -> Callable[..., TestClient]:
    """Factory: a started app with authentication on the session's key registry."""

    def make(**overrides: Any) -> TestClient:
        auth = {
            "auth_enabled": True,
            "auth_database_url": auth_database_url,
            "auth_cache_ttl_s": 0,
        }
        return make_client(**(auth | overrides))  # type: ignore[no-any-return]

    return make


@pytest.fixture()
def two_teams(make_team) -> tuple[tuple[str, dict[str, str]], tuple[str, dict[str, str]]]:
    """``((team_a, headers_a), (team_b, headers_b))`` of two new teams."""
    (team_a, key_a), (team_b, key_b) = make_team("em-a"), make_team("em-b")
    return (team_a, bearer(key_a)), (team_b, bearer(key_b))


def reset_as(client: TestClient, headers: dict[str, str], index: int = 0, **fields: Any) -> str:
    body = {"task": task_json(make_task(index)), **fields}
    response = client.post("/v1/episodes", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["episode_id"])


def requests_on(client: TestClient, episode_id: str, headers: dict[str, str]) -> dict[str, Any]:
    """Every episode route on ``episode_id``: the responses (batch step: its one item)."""
    step = {"action": "move north"}
    batch = {"steps": [{"episode_id": episode_id, **step}]}
    return {
        "get": client.get(f"/v1/episodes/{episode_id}", headers=headers),
        "step": client.post(f"/v1/episodes/{episode_id}/step", json=step, headers=headers),
        "batch": client.post("/v1/episodes:step", json=batch, headers=headers),
        "close": client.delete(f"/v1/episodes/{episode_id}", headers=headers),
    }


def error_of(name: str, response: httpx.Response) -> dict[str, Any]:
    if name == "batch":
        assert response.status_code == 200, response.text
        error = response.json()["results"][0]["error"]
        assert error is not None
        return dict(error)
    return assert_envelope(response, 404, "episode_not_found", "episode_id")


# -- episodes ----------------------------------------------------------------------------------


def test_another_teams_episode_is_404_like_an_unknown_id_on_every_route(
    team_client, store_settings, two_teams
):
    client = team_client(**store_settings)
    (team_a, a), (_, b) = two_teams
    episode_id = reset_as(client, a)

    other = requests_on(client, episode_id, b)
    unknown = requests_on(client, UNKNOWN_ID, b)
    own = client.get(f"/v1/episodes/{episode_id}", headers=a)

    for name in other:
        theirs, missing = error_of(name, other[name]), error_of(name, unknown[name])
        assert theirs["type"] == "episode_not_found" and theirs["code"] == 404, name
        assert theirs == json.loads(json.dumps(missing).replace(UNKNOWN_ID, episode_id)), name
    assert own.status_code == 200
    assert own.json()["state"]["step"] == 0 and own.json()["transitions"] == []  # B changed nothing
    stored = client.app.state.runtime.store.get(episode_id, team=team_a)
    assert stored.team == team_a
    assert requests_on(client, episode_id, a)["step"].status_code == 200  # still A's to play


def test_owner_plays_every_route_and_teams_may_share_an_episode_id(
    team_client, store_settings, two_teams
):
    client = team_client(**store_settings)
    (team_a, a), (team_b, b) = two_teams

    shared_a = reset_as(client, a, 0, episode_id="shared")
    shared_b = reset_as(client, b, 1, episode_id="shared")  # no 409: ids are per team
    stepped = client.post("/v1/episodes/shared/step", json={"action": "move north"}, headers=a)
    read_a = client.get("/v1/episodes/shared", headers=a).json()
    read_b = client.get("/v1/episodes/shared", headers=b).json()
    closed = client.delete("/v1/episodes/shared", headers=a)

    assert shared_a == shared_b == "shared"
    assert stepped.status_code == 200, stepped.text
    assert (read_a["task_id"], read_a["state"]["step"]) == (make_task(0).task_id, 1)
    assert (read_b["task_id"], read_b["state"]["step"]) == (make_task(1).task_id, 0)
    assert closed.status_code == 204
    assert client.get("/v1/episodes/shared", headers=a).status_code == 404
    assert client.get("/v1/episodes/shared", headers=b).status_code == 200
    store = client.app.state.runtime.store
    assert (store.live_count(team_a), store.live_count(team_b)) == (0, 1)


def test_without_authentication_every_episode_is_the_default_teams(client):
    response = client.post("/v1/episodes", json={"task": task_json(make_task())})
    episode_id = response.json()["episode_id"]

    assert response.status_code == 201
    assert client.app.state.runtime.store.get(episode_id).team == "default"
    assert client.get(f"/v1/episodes/{episode_id}").status_code == 200


# -- live-episode quota ------------------------------------------------------------------------


def test_live_episode_quota_is_429_with_retry_after_per_team(
    team_client, store_settings, two_teams
):
    client = team_client(**store_settings, max_live_episodes_per_team=2, quota_retry_after_s=7)
    (team_a, a), (_, b) = two_teams
    first = reset_as(client, a, 0)
    reset_as(client, a, 1)

    refused = client.post("/v1/episodes", json={"task": task_json(make_task(2))}, headers=a)
    other_team = client.post("/v1/episodes", json={"task": task_json(make_task(2))}, headers=b)
    client.delete(f"/v1/episodes/{first}", headers=a)
    after_close = client.post("/v1/episodes", json={"task": task_json(make_task(3))}, headers=a)

    error = assert_envelope(refused, 429, "quota_exceeded")
    assert refused.headers["retry-after"] == "7"
    assert team_a in error["message"] and "limit 2" in error["message"]
    assert other_team.status_code == 201  # quotas are per team
    assert after_close.status_code == 201  # a closed episode frees its slot


def test_live_episode_quota_holds_across_replicas(team_client, redis_url, two_teams):
    shared = {
        "redis_url": redis_url,
        "redis_key_prefix": "test:teams:replicas",
        "max_live_episodes_per_team": 2,
    }
    one, two = team_client(**shared), team_client(**shared)
    (_, a), (_, b) = two_teams
    episode_id = reset_as(one, a, 0)
    reset_as(two, a, 1)

    refused = one.post("/v1/episodes", json={"task": task_json(make_task(2))}, headers=a)
    read_on_two = two.get(f"/v1/episodes/{episode_id}", headers=a)
    other_team_on_two = two.get(f"/v1/episodes/{episode_id}", headers=b)

    assert_envelope(refused, 429, "quota_exceeded")
    assert read_on_two.status_code == 200
    assert_envelope(other_team_on_two, 404, "episode_not_found")
    assert reset_as(two, b, 3)


# -- retrieval as the caller -------------------------------------------------------------------


def trajectory_of(key: str | None) -> str:
    """The trajectory id the fake replay store answers a key with (not the key itself)."""
    return "traj-" + hashlib.sha256(str(key).encode()).hexdigest()[:12]


class RecordingReplayStore:
    """A fake replay store behind ``httpx.MockTransport``: records each request's key and
    answers every query with one transition of trajectory :func:`trajectory_of` the key."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/retrieve"
        auth = request.headers.get("authorization")
        key = auth.removeprefix("Bearer ") if auth else None
        self.keys.append(key)
        queries = json.loads(request.content)["queries"]
        hit = RetrievedTransition(
            id=1,
            trajectory_id=trajectory_of(key),
            task="t",
            environment="twx-coin",
            source="real",
            policy="expert",
            step=0,
            observation="o",
            admissible_actions=["a"],
            action="a",
            next_observation="n",
            next_admissible_actions=["b"],
            reward=0.0,
            terminated=False,
            score=0.9,
        ).model_dump(mode="json")
        return httpx.Response(200, json={"results": [[hit] for _ in queries]})


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.getMessage()} {record.__dict__}")


@pytest.fixture()
def record_logs() -> Iterator[Callable[[], list[str]]]:
    """``record_logs()`` starts recording every log record (message and fields, DEBUG and up);
    call it after the app's lifespan configured logging. Returns the recorded lines."""
    recorder, root = Recorder(), logging.getLogger()
    level = root.level

    def start() -> list[str]:
        root.addHandler(recorder)
        root.setLevel(logging.DEBUG)
        return recorder.lines

    yield start
    root.removeHandler(recorder)
    root.setLevel(level)


def test_retrieval_sends_the_callers_key_and_caches_per_team(team_client, make_team, record_logs):
    replay = RecordingReplayStore()
    client_of_replay = AsyncReplayStoreClient(
        "http://replay-store", transport=httpx.MockTransport(replay), max_retries=0
    )
    retriever = ReplayStoreRetriever(client_of_replay, source="real", cache_ttl_s=300)
    client = team_client(retriever=retriever, retrieval_k=1)
    log_lines = record_logs()
    (_, key_a), (_, key_b) = make_team("ret-a"), make_team("ret-b")

    def play(key: str) -> list[str]:
        episode_id = reset_as(client, bearer(key))  # same task, state and action for everyone
        body = {"action": "move north"}
        response = client.post(f"/v1/episodes/{episode_id}/step", json=body, headers=bearer(key))
        assert response.status_code == 200, response.text
        return list(response.json()["info"]["retrieved"])

    first_a, first_b, again_a, again_b = play(key_a), play(key_b), play(key_a), play(key_b)

    assert replay.keys == [key_a, key_b]  # one request per team, each with its own key
    assert first_a == again_a == [f"{trajectory_of(key_a)}#0"]  # the cache never crosses teams
    assert first_b == again_b == [f"{trajectory_of(key_b)}#0"]
    assert log_lines  # the service did log (at DEBUG) ...
    assert not [line for line in log_lines if key_a in line or key_b in line]  # ... never a key


def test_predict_retrieves_as_the_caller(team_client, make_team):
    replay = RecordingReplayStore()
    retriever = ReplayStoreRetriever(
        AsyncReplayStoreClient(
            "http://replay-store", transport=httpx.MockTransport(replay), max_retries=0
        ),
        source="real",
    )
    client = team_client(retriever=retriever, retrieval_k=1)
    _, key = make_team("pred")
    query = {"task": "t", "observation": "o", "admissible_actions": ["a"], "action": "a"}

    response = client.post(
        "/v1/transitions:predict", json={"queries": [query]}, headers=bearer(key)
    )

    assert response.status_code == 200, response.text
    assert replay.keys == [key]


# -- SFT training jobs -------------------------------------------------------------------------


@pytest.fixture()
def jobs_client(team_client, redis_url) -> Callable[..., TestClient]:
    """Factory: an app whose SFT jobs are queued on Celery (no worker: they stay queued)."""

    def make(**overrides: Any) -> TestClient:
        return team_client(job_backend="celery", redis_url=redis_url, **overrides)

    return make


def test_training_jobs_are_invisible_to_other_teams(jobs_client, two_teams):
    client = jobs_client()
    (team_a, a), (_, b) = two_teams

    job = client.post("/v1/training-jobs", json={"config": SFT}, headers=a)
    job_id = job.json()["job_id"]
    other = {
        "get": client.get(f"/v1/training-jobs/{job_id}", headers=b),
        "cancel": client.post(f"/v1/training-jobs/{job_id}/cancel", headers=b),
    }
    unknown = client.get("/v1/training-jobs/job-000000000000", headers=b)
    listed_a = client.get("/v1/training-jobs", headers=a).json()
    listed_b = client.get("/v1/training-jobs", headers=b).json()
    still = client.get(f"/v1/training-jobs/{job_id}", headers=a).json()

    assert job.status_code == 201, job.text
    assert job.json()["team"] == team_a
    for name, response in other.items():
        error = assert_envelope(response, 404, "not_found", "job_id")
        assert error["message"] == f"job '{job_id}' does not exist", name
    assert unknown.json()["error"]["type"] == "not_found"
    assert [j["job_id"] for j in listed_a["data"]] == [job_id] and listed_a["count"] == 1
    assert listed_b == {"data": [], "count": 0}
    assert still["state"] == "queued"  # B's cancel did nothing


def test_the_submitting_key_reaches_the_job_config_but_no_response(jobs_client, make_team):
    _, key = make_team("sft")
    client = jobs_client()

    job = client.post("/v1/training-jobs", json={"config": SFT}, headers=bearer(key))
    job_id = job.json()["job_id"]
    read = client.get(f"/v1/training-jobs/{job_id}", headers=bearer(key))
    listed = client.get("/v1/training-jobs", headers=bearer(key))
    cancelled = client.post(f"/v1/training-jobs/{job_id}/cancel", headers=bearer(key))
    stored = client.app.state.training_runner.get(job_id)

    assert job.status_code == 201, job.text
    assert stored.config["api_key"] == key  # what the job's replay-store client sends
    for response in (job, read, listed, cancelled):
        assert key not in response.text and "api_key" not in response.text
    assert read.json()["config"] == SFT


def test_active_training_job_quota_is_429_per_team(jobs_client, two_teams):
    client = jobs_client(max_active_jobs_per_team=1, quota_retry_after_s=11)
    (team_a, a), (_, b) = two_teams

    first = client.post("/v1/training-jobs", json={"config": SFT}, headers=a)
    second = client.post("/v1/training-jobs", json={"config": SFT}, headers=a)
    other_team = client.post("/v1/training-jobs", json={"config": SFT}, headers=b)
    client.post(f"/v1/training-jobs/{first.json()['job_id']}/cancel", headers=a)
    after_cancel = client.post("/v1/training-jobs", json={"config": SFT}, headers=a)

    assert first.status_code == 201
    error = assert_envelope(second, 429, "quota_exceeded")
    assert second.headers["retry-after"] == "11" and team_a in error["message"]
    assert other_team.status_code == 201
    assert after_cancel.status_code == 201  # a cancelled job no longer counts


# -- OpenEnv -----------------------------------------------------------------------------------


def test_openenv_http_needs_a_key_and_its_episodes_belong_to_the_team(team_client, two_teams):
    client = team_client()
    (_, a), (_, b) = two_teams
    body = {"task": task_json(make_task())}

    anonymous = client.post("/openenv/reset", json=body)
    mcp = client.post("/openenv/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    created = client.post("/openenv/reset", json=body, headers=a)
    episode_id = created.json()["observation"]["episode_id"]
    step = {"episode_id": episode_id, "action": {"text": "move north"}}
    state_b = client.get("/openenv/state", params={"episode_id": episode_id}, headers=b)
    step_b = client.post("/openenv/step", json=step, headers=b)
    step_a = client.post("/openenv/step", json=step, headers=a)

    assert_envelope(anonymous, 401, "unauthenticated")
    assert_envelope(mcp, 401, "unauthenticated")
    assert created.status_code == 200, created.text
    assert_envelope(state_b, 404, "episode_not_found")
    assert_envelope(step_b, 404, "episode_not_found")
    assert step_a.status_code == 200, step_a.text
    assert client.get(f"/v1/episodes/{episode_id}", headers=a).json()["state"]["step"] == 1
    assert client.get(f"/v1/episodes/{episode_id}", headers=b).status_code == 404
    for path in ("/openenv/health", "/openenv/schema", "/openenv/metadata"):
        assert client.get(path).status_code == 200, path


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer dg_0000000000000000_nope"}])
def test_openenv_websocket_without_a_valid_key_is_closed_with_1008(team_client, headers):
    client = team_client()

    with client.websocket_connect("/openenv/ws", headers=headers) as ws:
        error = ws.receive_json()
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()

    assert error["type"] == "error"
    assert (error["data"]["status"], error["data"]["error_type"]) == (401, "unauthenticated")
    assert closed.value.code == 1008
    assert client.app.state.runtime.store.live_count() == 0


def test_openenv_websocket_session_plays_as_the_keys_team(team_client, two_teams):
    client = team_client()
    (team_a, a), (_, b) = two_teams
    reset = {"type": "reset", "data": {"task": task_json(make_task())}}

    with client.websocket_connect("/openenv/ws", headers=a) as ws:
        ws.send_json(reset)
        observation = ws.receive_json()
        episode_id = observation["data"]["observation"]["episode_id"]
        ws.send_json({"type": "step", "data": {"text": "move north"}})
        stepped = ws.receive_json()
        read_a = client.get(f"/v1/episodes/{episode_id}", headers=a)
        read_b = client.get(f"/v1/episodes/{episode_id}", headers=b)
        ws.send_json({"type": "close"})

    assert observation["type"] == stepped["type"] == "observation", stepped
    assert read_a.status_code == 200 and read_a.json()["state"]["step"] == 1
    assert read_b.status_code == 404
    assert client.app.state.runtime.store.live_count(team_a) == 0  # closed with the session


async def test_typed_openenv_client_presents_its_key(settings_for, auth_database_url, make_team):
    pytest.importorskip("openenv.core")
    from dreamgym.clients.openenv import ExperienceModelEnvClient  # noqa: PLC0415

    team, key = make_team("oe")
    settings = settings_for(
        auth_enabled=True, auth_database_url=auth_database_url, auth_cache_ttl_s=0
    )
    app = create_app(settings, backend=FakeLLMBackend(responder=scripted_responder))
    with serve_app(app) as url:
        async with ExperienceModelEnvClient(f"{url}/openenv", api_key=key) as env:
            reset = await env.reset(task=make_task())
            stepped = await env.step("move north")
            live_during = app.state.runtime.store.live_count(team)
        anonymous = ExperienceModelEnvClient(f"{url}/openenv", api_key="")
        with pytest.raises(RuntimeError, match="API key"):
            await anonymous.reset(task=make_task())
        await anonymous.close()

    assert reset.observation.episode_id and stepped.observation.step == 1
    assert live_during == 1


# -- model reload ------------------------------------------------------------------------------


def test_model_reload_is_for_admin_teams_only(team_client, make_team):
    (admin, admin_key), (_, other_key) = make_team("ops"), make_team("lab")
    client = team_client(admin_teams=admin)
    body = {"model_path": "checkpoints/new"}

    refused = client.post("/v1/model:reload", json=body, headers=bearer(other_key))
    served_after_refusal = client.get("/v1/model", headers=bearer(other_key)).json()
    allowed = client.post("/v1/model:reload", json=body, headers=bearer(admin_key))

    error = assert_envelope(refused, 403, "forbidden")
    assert "operator" in error["message"]
    assert served_after_refusal["model_path"] != "checkpoints/new"
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["model_path"] == "checkpoints/new"


def test_single_user_reload_follows_the_admin_teams_setting(make_client):
    default_admin = make_client()
    no_admin = make_client(admin_teams="ops")
    body = {"model_path": "checkpoints/new"}

    assert default_admin.post("/v1/model:reload", json=body).status_code == 200
    assert_envelope(no_admin.post("/v1/model:reload", json=body), 403, "forbidden")
