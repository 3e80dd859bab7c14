"""Tests of agent_trainer.jobs.schemas: job configs are validated at submit time.

Errors must be located at the offending field (``grpo.group_size``), so the API's 422 names it.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_trainer.config import GRPOConfig, LoRAConfig, PolicyConfig, PPOConfig
from agent_trainer.jobs.schemas import VALIDATORS, evaluate_config, grpo_config, ppo_config


def error_locations(kind: str, config: dict) -> list[tuple]:
    with pytest.raises(ValidationError) as info:
        VALIDATORS[kind](config)
    return [e["loc"] for e in info.value.errors()]


@pytest.mark.parametrize(
    ("grpo", "loc"),
    [
        ({"group_size": 1}, ("grpo", "group_size")),
        ({"learning_rate": 0.0}, ("grpo", "learning_rate")),
        ({"group_size": "eight"}, ("grpo", "group_size")),
        ({"grup_size": 4}, ("grpo", "grup_size")),
        ({"policy": {"history_length": -1}}, ("grpo", "policy", "history_length")),
        ({"policy": {"modle": "tiny"}}, ("grpo", "policy", "modle")),
        ({"policy": {"model": "tiny:hidden=big"}}, ("grpo", "policy", "model")),
    ],
)
def test_grpo_validator_bad_config_is_located_at_the_field(grpo, loc):
    assert error_locations("grpo", {"grpo": grpo}) == [loc]


def test_grpo_validator_range_error_message_names_the_values():
    with pytest.raises(ValidationError, match="'group_size': 1"):
        VALIDATORS["grpo"]({"grpo": {"group_size": 1}})


def test_grpo_validator_valid_config_normalises_job_fields():
    config = VALIDATORS["grpo"]({"grpo": {"group_size": 2}, "services": {"replay_store": "u"}})

    assert config == {
        "grpo": {"group_size": 2},
        "resume": True,
        "services": {
            "experience_model": None,
            "replay_store": "u",
            "task_generator": None,
            "api_key": None,  # filled by the job API from the caller's key, never returned
        },
    }
    assert grpo_config(config) == GRPOConfig(group_size=2)


def test_grpo_validator_unknown_job_field_is_located_at_it():
    assert error_locations("grpo", {"grpo": {}, "resum": False}) == [("resum",)]


@pytest.mark.parametrize(
    ("evaluate", "loc"),
    [
        ({"episodes": 0}, ("evaluate", "episodes")),
        ({"concurrency": 0}, ("evaluate", "concurrency")),
        ({"episode": 5}, ("evaluate", "episode")),
        ({"environment": "twx-nowhere"}, ("evaluate", "environment")),
        ({"policy": "tiny:layer=2"}, ("evaluate", "policy")),
        ({"first_seed_index": -1}, ("evaluate", "first_seed_index")),
    ],
)
def test_evaluate_validator_bad_config_is_located_at_the_field(evaluate, loc):
    assert error_locations("evaluate", {"evaluate": evaluate}) == [loc]


def test_evaluate_config_reads_the_evaluate_section():
    config = evaluate_config({"evaluate": {"policy": "random", "episodes": 5}})

    assert (config.policy, config.episodes, config.environment) == ("random", 5, "twx-coin")


@pytest.mark.parametrize(
    ("kind", "config", "loc"),
    [
        ("collect", {"train_seeds": 0}, ("train_seeds",)),
        ("collect", {"policies": []}, ("policies",)),
        ("collect", {"policies": ["expert", "greedy"]}, ("policies", 1)),
        ("collect", {"policies": ["epsilon_greedy:x"]}, ("policies", 0)),
        ("collect", {"environment": "twx-nowhere"}, ("environment",)),
        ("fidelity", {"episodes": 0}, ("episodes",)),
        ("fidelity", {"environment": "twx-nowhere"}, ("environment",)),
    ],
)
def test_collect_and_fidelity_validators_locate_bad_fields(kind, config, loc):
    assert error_locations(kind, config) == [loc]


@pytest.mark.parametrize(
    ("ppo", "loc"),
    [
        ({"gamma": 1.5}, ("ppo", "gamma")),
        ({"gae_lambda": -0.1}, ("ppo", "gae_lambda")),
        ({"vf_clip": -0.2}, ("ppo", "vf_clip")),
        ({"vf_coef": "half"}, ("ppo", "vf_coef")),
        ({"advantage_scale": "group"}, ("ppo", "advantage_scale")),
        ({"policy": {"lora": {"r": 0}}}, ("ppo", "policy", "lora", "r")),
        ({"policy": {"lora": {"rank": 8}}}, ("ppo", "policy", "lora", "rank")),
    ],
)
def test_ppo_validator_bad_config_is_located_at_the_field(ppo, loc):
    assert error_locations("ppo", {"ppo": ppo}) == [loc]


def test_ppo_validator_valid_config_reads_the_ppo_section_with_lora():
    raw = {"ppo": {"group_size": 1, "vf_clip": None, "policy": {"lora": {"r": 8}}}}

    config = ppo_config(VALIDATORS["ppo"](raw))

    assert config == PPOConfig(
        group_size=1, vf_clip=None, policy=PolicyConfig(lora=LoRAConfig(r=8))
    )
    assert config.policy.lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]


def test_ppo_validator_unknown_job_field_is_located_at_it():
    assert error_locations("ppo", {"ppo": {}, "grpo": {}}) == [("grpo",)]


@pytest.mark.parametrize("kind", sorted(VALIDATORS))
def test_every_kind_rejects_an_unknown_top_level_field(kind):
    assert error_locations(kind, {"no_such_field": 1}) == [("no_such_field",)]


def test_validators_cover_every_job_kind():
    from agent_trainer.jobs import JOB_KINDS

    assert set(VALIDATORS) == set(JOB_KINDS)
