"""Loading and saving policy models: full weights, or LoRA adapters over a base model (peft).

A policy checkpoint directory holds either

- a full Hugging Face checkpoint (``config.json`` + weights) and the tokenizer, or
- a LoRA adapter (``adapter_config.json`` + ``adapter_model.safetensors``), the tokenizer and
  ``base_model.json`` (``{"model": <spec>, "init_seed": <int>}``): the base model spec that
  :func:`dreamgym.llm.models.load_causal_lm` understands,

plus, for PPO, the value head (``value_head.safetensors``, see
:mod:`agent_trainer.value_head`). :func:`load_policy_model` reads both kinds, so an evaluation
job can be pointed at any of them.

Usage:
    >>> model, tokenizer = load_policy_model("tiny", lora=LoRAConfig(r=4))  # doctest: +SKIP
    >>> save_policy_model(model, tokenizer, path, base_model="tiny", init_seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from agent_trainer.config import LoRAConfig
from dreamgym.llm.models import load_causal_lm

__all__ = [
    "BASE_MODEL_FILE",
    "apply_lora",
    "is_lora_model",
    "load_policy_model",
    "save_policy_model",
    "trainable_parameters",
]

BASE_MODEL_FILE = "base_model.json"
_ADAPTER_CONFIG = "adapter_config.json"


def is_lora_model(model: Any) -> bool:
    """True for a ``peft`` model (adapters over a frozen base)."""
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates (only the adapters of a LoRA model)."""
    return [p for p in model.parameters() if p.requires_grad]


def apply_lora(model: Any, lora: LoRAConfig) -> Any:
    """Wrap ``model`` with fresh LoRA adapters (B = 0: the wrapped model starts as the base).

    Args:
        model: a ``transformers`` causal LM.
        lora: rank, alpha, dropout and target modules.

    Returns:
        A ``peft`` model whose only trainable parameters are the adapters.

    Raises:
        ValueError: no module of ``model`` matches ``lora.target_modules``.
    """
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415

    targets: list[str] | str = lora.target_modules
    if targets == ["all-linear"]:
        targets = "all-linear"
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def load_policy_model(
    spec: str,
    *,
    device: str = "cpu",
    dtype: str | None = None,
    seed: int = 0,
    lora: LoRAConfig | None = None,
) -> tuple[Any, Any]:
    """Load a policy model: a spec or full checkpoint, or a LoRA checkpoint over its base.

    Args:
        spec: a :func:`~dreamgym.llm.models.load_causal_lm` spec, a full checkpoint directory or
            a LoRA checkpoint directory (``adapter_config.json`` + ``base_model.json``).
        device: torch device.
        dtype: optional torch dtype name.
        seed: init seed of ``tiny`` models (a LoRA checkpoint uses the seed it recorded).
        lora: add fresh adapters to a spec/full checkpoint (ignored for a LoRA checkpoint,
            whose own adapters are loaded, trainable).

    Returns:
        ``(model, tokenizer)``, the model in eval mode.

    Raises:
        FileNotFoundError: a LoRA checkpoint without ``base_model.json``, or an unknown spec.
    """
    path = Path(spec)
    if not (path / _ADAPTER_CONFIG).exists():
        model, tokenizer = load_causal_lm(spec, device=device, dtype=dtype, seed=seed)
        return (apply_lora(model, lora) if lora is not None else model), tokenizer
    from peft import PeftModel  # noqa: PLC0415

    if not (path / BASE_MODEL_FILE).exists():
        raise FileNotFoundError(f"LoRA checkpoint {path} has no {BASE_MODEL_FILE}")
    base = json.loads((path / BASE_MODEL_FILE).read_text())
    model, tokenizer = load_causal_lm(
        base["model"], device=device, dtype=dtype, seed=int(base.get("init_seed", 0))
    )
    adapted = PeftModel.from_pretrained(model, str(path), is_trainable=True).to(device)
    adapted.eval()
    return adapted, tokenizer


def save_policy_model(
    model: Any, tokenizer: Any, path: Path, *, base_model: str, init_seed: int
) -> None:
    """Write the policy into ``path``: full weights, or the adapters plus ``base_model.json``.

    Args:
        model: the policy model (plain or ``peft``).
        tokenizer: its tokenizer.
        path: checkpoint directory (created).
        base_model: the spec the base was loaded from (recorded for LoRA checkpoints only).
        init_seed: the base's init seed (``tiny`` models).
    """
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if is_lora_model(model):
        base = Path(base_model)
        if (base / _ADAPTER_CONFIG).exists():  # resumed from a LoRA checkpoint: keep its base
            record = json.loads((base / BASE_MODEL_FILE).read_text())
        else:
            record = {"model": base_model, "init_seed": init_seed}
        (path / BASE_MODEL_FILE).write_text(json.dumps(record))
