"""Tests of agent_trainer.policy_io: LoRA adapters via peft, and full / LoRA checkpoints.

With LoRA only the adapters train (the PPO value head too), the base with adapters off is the
reference policy, and a checkpoint holds the adapters plus the base spec and loads back.
"""

from __future__ import annotations

import json
import random

import pytest
import torch

from agent_trainer.config import GRPOConfig, LoRAConfig, PolicyConfig, PPOConfig
from agent_trainer.policy import LMPolicy
from agent_trainer.policy_io import (
    BASE_MODEL_FILE,
    is_lora_model,
    load_policy_model,
    save_policy_model,
    trainable_parameters,
)
from agent_trainer.ppo_trainer import PPOTrainer
from agent_trainer.trainer import GRPOTrainer
from agent_trainer.value_head import VALUE_HEAD_FILE
from dreamgym.llm.models import load_causal_lm

from .factories import TINY, RecordingReplaySink, RecordingTaskSource, ScriptedPool, make_task

pytestmark = pytest.mark.model

LORA = LoRAConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
COMMON = {
    "iterations": 1,
    "tasks_per_iteration": 2,
    "group_size": 4,
    "max_steps": 2,
    "learning_rate": 5e-2,
    "epochs_per_iteration": 1,
    "beta": 0.1,
    "curriculum_every": 0,
    "policy": PolicyConfig(model=TINY, init_seed=0, lora=LORA),
}


def lora_policy() -> LMPolicy:
    model, tokenizer = load_policy_model(TINY, seed=0, lora=LORA)
    return LMPolicy(model, tokenizer)


def make_trainer(trainer_cls, tmp_path, **overrides):
    config_cls = PPOConfig if trainer_cls is PPOTrainer else GRPOConfig
    return trainer_cls(
        config_cls(**(COMMON | overrides)),
        policy=lora_policy(),
        pool=ScriptedPool(),
        task_source=RecordingTaskSource([make_task(0), make_task(1)]),
        replay=RecordingReplaySink(),
        run_dir=tmp_path / "run-lora",
    )


def sample_decisions(policy: LMPolicy):
    state = make_task(0).initial_state()
    return policy.act([state] * 4, [[]] * 4, generator=torch.Generator().manual_seed(0))


def test_apply_lora_leaves_only_adapter_parameters_trainable():
    policy = lora_policy()

    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]

    assert is_lora_model(policy.model)
    assert names and all("lora_A" in n or "lora_B" in n for n in names)
    assert {n.split(".")[-4] for n in names} == {"q_proj", "v_proj"}
    assert len(trainable_parameters(policy.model)) == len(names)


@pytest.mark.parametrize("trainer_cls", [PPOTrainer, GRPOTrainer])
def test_lora_step_trains_only_the_adapters(trainer_cls, tmp_path):
    trainer = make_trainer(trainer_cls, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}

    metrics = trainer.step()

    changed = {
        n for n, p in trainer.policy.model.named_parameters() if not torch.equal(p, before[n])
    }
    assert changed and all("lora_" in n for n in changed), changed
    assert any("lora_B" in n for n in changed)  # B starts at 0: the adapters really moved
    assert trainer.reference is None  # adapters off = the reference; no copy kept
    assert torch.isfinite(torch.tensor(metrics["policy/kl"]))


def test_lora_reference_log_probs_are_the_base_models(tmp_path):
    trainer = make_trainer(PPOTrainer, tmp_path)
    trainer.step()  # the adapters now differ from zero
    decisions = sample_decisions(trainer.policy)
    base_model, tokenizer = load_causal_lm(TINY, seed=0)

    ref = trainer._reference_log_probs(decisions, [1] * len(decisions), random.Random(0))
    with torch.no_grad():
        expected, mask = LMPolicy(base_model, tokenizer).completion_log_probs(decisions)
        trained, _ = trainer.policy.completion_log_probs(decisions)

    for row, values in enumerate(ref):
        torch.testing.assert_close(values[mask[row]], expected[row][mask[row]], atol=1e-5, rtol=0)
    assert not torch.allclose(trained[mask], expected[mask], atol=1e-4)


def test_lora_checkpoint_holds_adapters_base_spec_and_value_head_and_loads_back(tmp_path):
    trainer = make_trainer(PPOTrainer, tmp_path)
    trainer.train()
    path = (trainer.run_dir / "checkpoints" / "latest").resolve()
    decisions = sample_decisions(trainer.policy)

    model, tokenizer = load_policy_model(str(path))
    with torch.no_grad():
        expected, mask = trainer.policy.completion_log_probs(decisions)
        loaded, _ = LMPolicy(model, tokenizer).completion_log_probs(decisions)

    files = {p.name for p in path.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", VALUE_HEAD_FILE} <= files
    assert not {"model.safetensors", "config.json"} & files  # the base is not copied
    assert json.loads((path / BASE_MODEL_FILE).read_text()) == {"model": TINY, "init_seed": 0}
    torch.testing.assert_close(loaded[mask], expected[mask], atol=1e-5, rtol=0)
    assert trainable_parameters(model)  # loaded adapters train on (resume)


def test_save_policy_model_from_a_lora_checkpoint_keeps_the_original_base(tmp_path):
    policy = lora_policy()
    save_policy_model(policy.model, policy.tokenizer, tmp_path / "a", base_model=TINY, init_seed=0)
    resumed, tokenizer = load_policy_model(str(tmp_path / "a"))

    save_policy_model(
        resumed, tokenizer, tmp_path / "b", base_model=str(tmp_path / "a"), init_seed=7
    )

    assert json.loads((tmp_path / "b" / BASE_MODEL_FILE).read_text()) == {
        "model": TINY,
        "init_seed": 0,
    }


def test_full_model_checkpoint_has_no_base_model_file(tmp_path, make_policy):
    policy = make_policy(seed=0)

    save_policy_model(policy.model, policy.tokenizer, tmp_path, base_model=TINY, init_seed=0)

    assert (tmp_path / "config.json").exists()
    assert not (tmp_path / BASE_MODEL_FILE).exists()


def test_load_policy_model_adapter_without_base_model_file_raises(tmp_path):
    policy = lora_policy()
    policy.model.save_pretrained(tmp_path)

    with pytest.raises(FileNotFoundError, match=BASE_MODEL_FILE):
        load_policy_model(str(tmp_path))
