"""Per-run episode options of imagined rollouts (``episode_options``): validated in the config and
sent with every reset (``POST /v1/episodes`` ``options``)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agent_trainer.config import ConfigValueError, GRPOConfig
from agent_trainer.env_pools import ImaginedEnvPool
from dreamgym.clients.experience_model import AsyncExperienceModelClient

from .factories import make_task


def test_episode_options_accept_the_ablation_switches():
    cfg = GRPOConfig(episode_options={"use_reasoning": False, "use_retrieval": False})

    assert cfg.to_dict()["episode_options"] == {"use_reasoning": False, "use_retrieval": False}


@pytest.mark.parametrize("options", [{"use_memory": True}, {"history_length": -1}])
def test_episode_options_invalid_is_named(options):
    with pytest.raises(ConfigValueError) as info:
        GRPOConfig(episode_options=options)

    assert info.value.fields == ["episode_options"]


@pytest.mark.parametrize(("options", "sent"), [({"use_reasoning": False}, True), ({}, False)])
def test_imagined_pool_sends_the_options_with_every_reset(options, sent):
    bodies: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        state = make_task(0).initial_state().model_dump(mode="json")
        return httpx.Response(
            201, json={"episode_id": "ep-1", "task_id": "t", "state": state, "max_steps": 3}
        )

    async def reset() -> None:
        client = AsyncExperienceModelClient("http://em", transport=httpx.MockTransport(answer))
        async with client:
            await ImaginedEnvPool(client, options=options).reset(make_task(0), seed=1, max_steps=3)

    asyncio.run(reset())

    assert ("options" in bodies[0]) is sent
    if sent:
        assert bodies[0]["options"] == {"use_reasoning": False}
