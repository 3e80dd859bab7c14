"""Tests of agent_trainer.config: hyperparameter validation names the bad fields."""

from __future__ import annotations

import pytest

from agent_trainer.config import (
    ConfigValueError,
    EvaluateConfig,
    GRPOConfig,
    LoRAConfig,
    PolicyConfig,
    PPOConfig,
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("group_size", 1),
        ("learning_rate", 0.0),
        ("learning_rate", -1e-3),
        ("iterations", 0),
        ("epsilon_low", 1.0),
        ("temperature", -0.5),
        ("beta", -0.1),
        ("curriculum_every", -1),
        ("checkpoint_every", 0),
        ("max_grad_norm", 0.0),
    ],
)
def test_grpo_config_out_of_range_value_raises_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}': {value}"):
        GRPOConfig(**{field: value})


def test_grpo_config_several_bad_values_are_all_named():
    with pytest.raises(ValueError) as info:
        GRPOConfig(group_size=1, learning_rate=0.0)

    assert "'group_size': 1" in str(info.value)
    assert "'learning_rate': 0.0" in str(info.value)


def test_grpo_config_defaults_are_valid_and_serialise_with_policy():
    config = GRPOConfig(group_size=2, learning_rate=1e-6, curriculum_every=0)

    as_dict = config.to_dict()

    assert as_dict["group_size"] == 2
    assert as_dict["policy"]["decoding"] == "constrained"


@pytest.mark.parametrize(
    ("field", "value"), [("episodes", 0), ("max_steps", 0), ("concurrency", 0)]
)
def test_evaluate_config_out_of_range_value_raises_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"{field} must be >= 1"):
        EvaluateConfig(**{field: value})


def test_policy_config_negative_history_length_raises():
    with pytest.raises(ValueError, match="history_length must be >= 0"):
        PolicyConfig(history_length=-1)


def test_grpo_config_error_lists_bad_fields_in_declaration_order():
    with pytest.raises(ConfigValueError) as info:
        GRPOConfig(learning_rate=0.0, group_size=1)

    assert info.value.fields == ["group_size", "learning_rate"]


@pytest.mark.parametrize(
    ("cls", "field", "value"),
    [
        (EvaluateConfig, "episodes", 0),
        (EvaluateConfig, "concurrency", 0),
        (PolicyConfig, "history_length", -1),
    ],
)
def test_config_error_names_its_field(cls, field, value):
    with pytest.raises(ConfigValueError) as info:
        cls(**{field: value})

    assert info.value.fields == [field]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gamma", 1.1),
        ("gae_lambda", -0.5),
        ("vf_coef", -1.0),
        ("vf_clip", -0.1),
        ("value_learning_rate", 0.0),
        ("entropy_coef", -0.01),
        ("learning_rate", 0.0),
        ("group_size", 0),
    ],
)
def test_ppo_config_out_of_range_value_raises_naming_the_field(field, value):
    with pytest.raises(ConfigValueError, match=f"invalid PPO config values {{'{field}'") as info:
        PPOConfig(**{field: value})

    assert info.value.fields == [field]


def test_ppo_config_allows_single_rollout_groups_and_unclipped_values():
    config = PPOConfig(group_size=1, vf_clip=None, value_learning_rate=None)

    assert config.to_dict()["vf_clip"] is None
    assert "advantage_scale" not in config.to_dict()


@pytest.mark.parametrize(
    ("field", "value"), [("r", 0), ("alpha", 0), ("dropout", 1.0), ("target_modules", [])]
)
def test_lora_config_out_of_range_value_raises_naming_the_field(field, value):
    with pytest.raises(ConfigValueError) as info:
        LoRAConfig(**{field: value})

    assert info.value.fields == [field]


def test_policy_config_lora_serialises_with_the_run_config():
    config = GRPOConfig(policy=PolicyConfig(lora=LoRAConfig(r=4, target_modules=["all-linear"])))

    assert config.to_dict()["policy"]["lora"] == {
        "r": 4,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": ["all-linear"],
    }
