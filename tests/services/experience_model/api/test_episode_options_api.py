"""API tests of per-episode prompt switches (``options`` of a reset: reasoning, retrieval, history)
and of the service-wide switches (``EXPERIENCE_MODEL_USE_REASONING``), with the scripted fake."""

from __future__ import annotations

import pytest

from dreamgym.testing.fakes import FakeLLMBackend

from ..factories import WIN, FakeRetriever, make_example, make_task, scripted_responder, task_json
from .helpers import assert_envelope, reset, step


@pytest.fixture()
def fake() -> FakeLLMBackend:
    return FakeLLMBackend(responder=scripted_responder)


def test_reset_option_use_reasoning_false_marks_prompts_and_drops_the_trace(make_client, fake):
    client = make_client(fake)
    plain = reset(client)
    silent = reset(client, options={"use_reasoning": False})

    with_trace = step(client, plain["episode_id"], WIN).json()
    without = step(client, silent["episode_id"], WIN).json()

    assert with_trace["info"]["reasoning"] == "coin taken"
    assert with_trace["transition"]["reasoning"] == "coin taken"
    assert without["info"]["reasoning"] == ""
    assert without["transition"]["reasoning"] is None
    assert fake.prompts[0].endswith("### Next state\n")
    assert fake.prompts[1].endswith("### Next state (no reasoning)\n")


def test_reset_option_use_retrieval_false_skips_retrieval_for_that_episode(make_client, fake):
    retriever = FakeRetriever([make_example("traj-7#1")])
    client = make_client(fake, retriever)
    plain = reset(client)
    blind = reset(client, options={"use_retrieval": False})

    seen = step(client, plain["episode_id"], "move north").json()
    unseen = step(client, blind["episode_id"], "move north").json()

    assert seen["info"]["retrieved"] == ["traj-7#1"]
    assert unseen["info"]["retrieved"] == []
    assert "Examples:" in fake.prompts[0] and "Examples:" not in fake.prompts[1]


def test_reset_option_history_length_zero_drops_history(make_client, fake):
    client = make_client(fake)
    ep = reset(client, options={"history_length": 0})

    step(client, ep["episode_id"], "move north")
    step(client, ep["episode_id"], "move east")

    assert "History:" not in fake.prompts[1]


def test_reset_option_history_length_out_of_range_is_422(client):
    body = {"task": task_json(make_task()), "options": {"history_length": 65}}

    response = client.post("/v1/episodes", json=body)

    assert_envelope(response, 422, "invalid_request", "body.options.history_length")


def test_service_use_reasoning_false_applies_to_every_episode_and_is_reported(make_client, fake):
    client = make_client(fake, use_reasoning=False)
    ep = reset(client)

    body = step(client, ep["episode_id"], WIN).json()
    info = client.get("/v1/model").json()

    assert body["info"]["reasoning"] == ""
    assert fake.prompts[0].endswith("### Next state (no reasoning)\n")
    assert info["use_reasoning"] is False and info["use_retrieval"] is True


def test_reset_option_can_turn_reasoning_back_on(make_client, fake):
    client = make_client(fake, use_reasoning=False)
    ep = reset(client, options={"use_reasoning": True})

    body = step(client, ep["episode_id"], WIN).json()

    assert body["info"]["reasoning"] == "coin taken"
