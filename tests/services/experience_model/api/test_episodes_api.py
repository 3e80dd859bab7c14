"""API tests of the episode routes: reset, step, read, close and their error envelopes."""

from __future__ import annotations

import pytest

from dreamgym.testing.fakes import FakeLLMBackend

from ..factories import GARBAGE, WIN, FakeRetriever, make_example, make_task, task_json
from .helpers import assert_envelope, reset, step


def test_episode_lifecycle_reset_step_get_delete(client):
    task = make_task(4)

    created = client.post("/v1/episodes", json={"task": task_json(task), "seed": 3})
    episode_id = created.json()["episode_id"]
    stepped = step(client, episode_id, "move north")
    read = client.get(f"/v1/episodes/{episode_id}")
    deleted = client.delete(f"/v1/episodes/{episode_id}")
    gone = client.get(f"/v1/episodes/{episode_id}")

    assert created.status_code == 201
    assert created.json()["state"] == task.initial_state().model_dump(mode="json")
    assert created.json()["task_id"] == task.task_id
    assert stepped.status_code == 200, stepped.text
    assert stepped.json()["observation"] == "You did move north."
    assert stepped.json()["state"]["step"] == 1
    assert read.status_code == 200
    assert read.json()["state"] == stepped.json()["state"]
    assert read.json()["transitions"] == [stepped.json()["transition"]]
    assert deleted.status_code == 204 and deleted.content == b""
    error = assert_envelope(gone, 404, "episode_not_found", "episode_id")
    assert episode_id in error["message"]


def test_step_response_carries_transition_and_info(make_client):
    client = make_client(retriever=FakeRetriever([make_example("traj-1#2")]))
    ep = reset(client)

    body = step(client, ep["episode_id"], WIN).json()

    assert body["terminated"] is True and body["truncated"] is False
    assert body["reward"] == 1.0
    assert body["admissible_actions"] == []
    assert body["transition"]["action"] == WIN
    assert body["transition"]["won"] is True
    assert body["info"]["won"] is True
    assert body["info"]["reasoning"] == "coin taken"
    assert body["info"]["retrieved"] == ["traj-1#2"]
    assert body["info"]["attempts"] == 1


def test_step_after_terminated_is_409_episode_finished(client):
    ep = reset(client)
    step(client, ep["episode_id"], WIN)

    response = step(client, ep["episode_id"], "move north")

    error = assert_envelope(response, 409, "episode_finished", "episode_id")
    assert "terminated" in error["message"]


def test_step_reaching_max_steps_sets_truncated(client):
    ep = reset(client, max_steps=2)

    first = step(client, ep["episode_id"], "move north").json()
    second = step(client, ep["episode_id"], "move south").json()
    third = step(client, ep["episode_id"], "look")

    assert first["truncated"] is False
    assert second["truncated"] is True and second["terminated"] is False
    assert client.get(f"/v1/episodes/{ep['episode_id']}").json()["truncated"] is True
    error = assert_envelope(third, 409, "episode_finished", "episode_id")
    assert "truncated" in error["message"]


def test_reset_without_max_steps_uses_service_default(make_client):
    client = make_client(default_max_steps=4)

    ep = reset(client)

    assert ep["max_steps"] == 4


@pytest.mark.parametrize("method", ["get", "delete"])
def test_unknown_episode_read_or_delete_is_404(client, method):
    response = getattr(client, method)("/v1/episodes/ep-does-not-exist")

    error = assert_envelope(response, 404, "episode_not_found", "episode_id")
    assert "ep-does-not-exist" in error["message"]


def test_unknown_episode_step_is_404(client):
    response = step(client, "ep-does-not-exist", "look")

    assert_envelope(response, 404, "episode_not_found", "episode_id")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        pytest.param({"action": "look", "colour": "red"}, "body.colour", id="extra-field"),
        pytest.param({"action": ""}, "body.action", id="empty-action"),
        pytest.param({}, "body.action", id="missing-action"),
        pytest.param({"action": "look", "seed": -1}, "body.seed", id="negative-seed"),
        pytest.param({"action": "x" * 2001}, "body.action", id="action-too-long"),
    ],
)
def test_step_malformed_body_is_422_naming_field(client, body, param):
    ep = reset(client)

    response = client.post(f"/v1/episodes/{ep['episode_id']}/step", json=body)

    error = assert_envelope(response, 422, "invalid_request", param)
    assert param in error["message"]


@pytest.mark.parametrize(
    ("drop", "extra", "param"),
    [
        pytest.param("instruction", {}, "body.task.instruction", id="missing-instruction"),
        pytest.param("task_id", {}, "body.task.task_id", id="missing-task-id"),
        pytest.param(None, {"seed": -5}, "body.seed", id="negative-seed"),
        pytest.param(None, {"max_steps": 0}, "body.max_steps", id="zero-max-steps"),
        pytest.param(None, {"unknown": 1}, "body.unknown", id="extra-field"),
        pytest.param(None, {"seed": 2**64}, "body.seed", id="seed-beyond-64-bits"),
        pytest.param(None, {"episode_id": "a/b"}, "body.episode_id", id="slash-in-episode-id"),
    ],
)
def test_reset_malformed_body_is_422_naming_field(client, drop, extra, param):
    task = task_json(make_task())
    task.pop(drop, None)

    response = client.post("/v1/episodes", json={"task": task, **extra})

    assert_envelope(response, 422, "invalid_request", param)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("initial_observation", "x" * 5_000_000, id="5-MB-observation"),
        pytest.param("instruction", "y" * 40_000, id="huge-instruction"),
        pytest.param("initial_admissible_actions", ["go"] * 5_000, id="too-many-actions"),
        pytest.param("initial_admissible_actions", ["z" * 3_000], id="huge-action"),
    ],
)
def test_reset_with_oversized_task_text_is_422_and_never_reaches_the_model(
    client, fake_llm, field, value
):
    task = {**task_json(make_task()), field: value}

    response = client.post("/v1/episodes", json={"task": task})

    error = assert_envelope(response, 422, "invalid_request")
    assert error["param"].startswith(f"body.task.{field}")  # ".0" for one action of the list
    assert fake_llm.batches == []


def test_reset_missing_task_is_422(client):
    response = client.post("/v1/episodes", json={"seed": 1})

    assert_envelope(response, 422, "invalid_request", "body.task")


def test_reset_max_steps_above_limit_is_422_naming_max_steps(make_client):
    client = make_client(max_steps_limit=10)

    response = client.post("/v1/episodes", json={"task": task_json(make_task()), "max_steps": 11})

    error = assert_envelope(response, 422, "invalid_request", "max_steps")
    assert "10" in error["message"]


def test_reset_duplicate_client_episode_id_is_409(client):
    reset(client, episode_id="my-episode")

    response = client.post(
        "/v1/episodes", json={"task": task_json(make_task()), "episode_id": "my-episode"}
    )

    assert_envelope(response, 409, "conflict", "episode_id")


def test_reset_at_capacity_is_429_with_retry_after(make_client):
    client = make_client(max_live_episodes=1)
    reset(client)

    response = client.post("/v1/episodes", json={"task": task_json(make_task(1))})

    assert_envelope(response, 429, "capacity_reached")
    assert int(response.headers["Retry-After"]) >= 1


def test_reset_after_closing_frees_capacity(make_client):
    client = make_client(max_live_episodes=1)
    ep = reset(client)
    client.delete(f"/v1/episodes/{ep['episode_id']}")

    response = client.post("/v1/episodes", json={"task": task_json(make_task(1))})

    assert response.status_code == 201


def test_step_malformed_model_output_is_502_and_episode_unchanged(make_client):
    fake = FakeLLMBackend(["nonsense", "<observation>still nonsense"])
    client = make_client(fake, parse_retries=1)
    ep = reset(client)
    fake.extend(
        [
            "<observation>The pantry.</observation>\n<actions>look</actions>\n"
            "<reward>0</reward>\n<terminated>false</terminated>"
        ]
    )

    response = step(client, ep["episode_id"], "move north")
    after_failure = client.get(f"/v1/episodes/{ep['episode_id']}").json()
    retried = step(client, ep["episode_id"], "move north")

    error = assert_envelope(response, 502, "malformed_transition")
    assert "2 attempt" in error["message"]
    assert len(fake.calls) == 3
    assert after_failure["state"] == ep["state"]
    assert after_failure["transitions"] == []
    assert after_failure["terminated"] is False and after_failure["truncated"] is False
    assert retried.status_code == 200, retried.text
    assert retried.json()["transition"]["step"] == 0
    assert retried.json()["observation"] == "The pantry."


def test_step_backend_always_garbage_is_502_every_time(client):
    ep = reset(client)

    responses = [step(client, ep["episode_id"], GARBAGE) for _ in range(2)]

    for response in responses:
        assert_envelope(response, 502, "malformed_transition")
    assert client.get(f"/v1/episodes/{ep['episode_id']}").json()["state"]["step"] == 0


def test_step_backend_exception_is_500_without_traceback_and_episode_unchanged(make_client):
    fake = FakeLLMBackend([RuntimeError("CUDA out of memory at 0xdeadbeef")])
    client = make_client(fake, raise_server_exceptions=False)
    ep = reset(client)

    response = step(client, ep["episode_id"], "move north")

    error = assert_envelope(response, 500, "internal_error")
    assert "0xdeadbeef" not in error["message"]
    assert client.get(f"/v1/episodes/{ep['episode_id']}").json()["transitions"] == []
