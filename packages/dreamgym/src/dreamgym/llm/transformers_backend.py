"""In-process Hugging Face backend with batched, per-request-seeded sampling.

One left-padded prefill over the whole batch, then a KV-cached decode loop. Each row has its own
temperature, top-p, token budget, stop strings and ``torch.Generator`` seeded from the request's
``seed``, so a request's sample does not depend on what else shares its batch (up to float
rounding of padded attention). Works with any ``AutoModelForCausalLM`` checkpoint: the tiny
from-config models of the CPU demo, SmolLM2, Qwen or Llama on a GPU.

>>> backend = TransformersBackend(model_path="tiny")  # doctest: +SKIP
>>> params = [SamplingParams(max_new_tokens=8, temperature=0.0)]
>>> backend.generate(["Hello"], params)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
import threading
from pathlib import Path
from typing import Any

import torch

from dreamgym.llm.base import Completion, SamplingParams
from dreamgym.llm.models import load_causal_lm

__all__ = ["TransformersBackend", "sample_next_tokens"]


def sample_next_tokens(
    logits: torch.Tensor,
    *,
    temperatures: list[float],
    top_ps: list[float],
    generators: list[torch.Generator | None],
) -> torch.Tensor:
    """Sample one token per row, vectorised over the batch.

    Each sampled row draws one uniform number from its own generator and picks its token by
    inverse-CDF lookup in its own (temperature-scaled, nucleus-truncated) distribution, so a row's
    sample depends only on its logits and its generator, not on the other rows of the batch. The
    softmax, the top-p cut and the lookup run on the whole batch at once: the per-row work is one
    scalar draw (a per-row ``torch.multinomial`` over a 49k vocabulary made sampling ~95% of
    decode time at batch 32 on CPU).

    Args:
        logits: (B, V) next-token logits.
        temperatures: B temperatures; 0 → greedy for that row.
        top_ps: B nucleus masses in (0, 1].
        generators: B generators on ``logits``' device (``None`` → global RNG).

    Returns:
        (B,) int64 token ids (on the CPU).
    """
    logits = logits.float()
    device = logits.device
    out = torch.argmax(logits, dim=-1)
    rows = [i for i, t in enumerate(temperatures) if t != 0.0]
    if not rows:
        return out.cpu()
    index = torch.tensor(rows, device=device)
    temps = torch.tensor([temperatures[i] for i in rows], device=device)
    probs = torch.softmax(logits[index] / temps[:, None], dim=-1)  # (R, V)
    top_p = torch.tensor([top_ps[i] for i in rows], device=device)
    if bool((top_p < 1.0).any()):
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p[:, None]  # top token always kept
        probs = torch.zeros_like(probs).scatter(1, order, sorted_p * keep)
    cdf = torch.cumsum(probs, dim=-1)  # (R, V), unnormalised after the top-p cut
    uniform = torch.cat(
        [torch.rand(1, generator=generators[i], device=device) for i in rows]
    )  # (R,) in [0, 1)
    targets = (uniform * cdf[:, -1]).unsqueeze(1)
    picked = torch.searchsorted(cdf, targets, right=True).squeeze(1)
    out[index] = picked.clamp(max=logits.shape[1] - 1)
    return out.cpu()


@functools.cache
def _cache_keyword(model_type: type) -> str:
    params = inspect.signature(model_type.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def kv_cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """The forward keyword that passes a KV cache to ``model``: ``cache`` in newer transformers
    (``past_key_values`` is deprecated there, to be removed in 5.40), ``past_key_values`` before.
    A peft wrapper forwards keywords to its base model, which decides."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {_cache_keyword(type(base)): cache}


def output_kv_cache(out: Any) -> Any:
    """The KV cache a forward returned (``out.cache``, or ``out.past_key_values`` before 5.x)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


class TransformersBackend:
    """Batched generation with a local ``transformers`` causal LM.

    Args:
        model_path: model spec for :func:`dreamgym.llm.models.load_causal_lm` (a checkpoint
            directory, ``"smollm2-135m"`` or ``"tiny[:...]"``).
        device: torch device (``"cpu"``, ``"cuda"``).
        dtype: optional torch dtype name (``"bfloat16"`` on GPUs).
        max_batch_size: larger request batches are split into chunks of this size.
        model / tokenizer: pass an already-loaded pair instead of ``model_path`` (tests, trainers).
        static_cache: decode with a preallocated KV cache (2x faster on CPU for long prompts);
            models that do not support it fall back to the dynamic cache.
    """

    name = "transformers"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        max_batch_size: int = 64,
        model: Any = None,
        tokenizer: Any = None,
        static_cache: bool = True,
    ) -> None:
        if model is None:
            if model_path is None:
                raise ValueError("TransformersBackend needs model_path or model+tokenizer")
            model, tokenizer = load_causal_lm(str(model_path), device=device, dtype=dtype)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self.device = torch.device(device)
        self.max_batch_size = max_batch_size
        self.static_cache = static_cache
        self.model_path = str(model_path) if model_path is not None else "<in-memory>"
        self._lock = threading.Lock()  # one generate at a time per model

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Generate one completion per prompt (see :class:`dreamgym.llm.base.LLMBackend`).

        Raises:
            ValueError: ``len(prompts) != len(params)``.
        """
        if len(prompts) != len(params):
            raise ValueError(f"got {len(prompts)} prompts but {len(params)} sampling params")
        results: list[Completion] = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(prompts), self.max_batch_size):
                chunk = slice(start, start + self.max_batch_size)
                results.extend(self._generate_batch(prompts[chunk], params[chunk]))
        return results

    def _new_cache(self, max_len: int) -> Any:
        """A preallocated KV cache (no per-token reallocation); ``None`` → dynamic cache."""
        if not self.static_cache:
            return None
        try:
            from transformers import StaticCache  # noqa: PLC0415

            return StaticCache(config=self.model.config, max_cache_len=max_len)
        except Exception:  # architectures without static-cache support fall back to dynamic
            return None

    def _generate_batch(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        tok = self.tokenizer
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = enc.input_ids.to(self.device)
        prompt_mask = enc.attention_mask.to(self.device)
        batch, width = input_ids.shape
        prompt_lens = prompt_mask.sum(dim=1).tolist()
        gens = [self._generator(p.seed) for p in params]
        budget = max(p.max_new_tokens for p in params)
        eos = tok.eos_token_id
        out_ids: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        reasons = ["length"] * len(prompts)
        cache = self._new_cache(width + budget)
        mask = torch.zeros((batch, width + budget), dtype=prompt_mask.dtype, device=self.device)
        mask[:, :width] = prompt_mask
        position_ids = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask[:, :width],
            position_ids=position_ids,
            **kv_cache_kwargs(self.model, cache),
            cache_position=torch.arange(width, device=self.device),
            use_cache=True,
            logits_to_keep=1,
        )
        cache = output_kv_cache(out)
        for step in range(budget):
            nxt = sample_next_tokens(
                out.logits[:, -1, :],
                temperatures=[p.temperature for p in params],
                top_ps=[p.top_p for p in params],
                generators=gens,
            )
            for i, token in enumerate(nxt.tolist()):
                if done[i]:
                    continue
                if token == eos:
                    done[i], reasons[i] = True, "stop"
                    continue
                out_ids[i].append(token)
                if len(out_ids[i]) >= params[i].max_new_tokens:
                    done[i] = True
                elif params[i].stop and self._hit_stop(out_ids[i], params[i].stop):
                    done[i], reasons[i] = True, "stop"
            if all(done):
                break
            mask[:, width + step] = 1
            position_ids = position_ids[:, -1:] + 1
            out = self.model(
                input_ids=nxt.to(self.device)[:, None],
                attention_mask=mask[:, : width + step + 1],
                position_ids=position_ids,
                **kv_cache_kwargs(self.model, cache),
                cache_position=torch.tensor([width + step], device=self.device),
                use_cache=True,
            )
        return [
            self._completion(ids, params[i], prompt_lens[i], reasons[i])
            for i, ids in enumerate(out_ids)
        ]

    def _generator(self, seed: int | None) -> torch.Generator | None:
        if seed is None:
            return None
        gen = torch.Generator(device=self.device)  # multinomial needs it on the logits' device
        gen.manual_seed(int(seed) % (2**63))
        return gen

    def _hit_stop(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(ids[-16:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    def _completion(
        self, ids: list[int], params: SamplingParams, prompt_len: int, reason: str
    ) -> Completion:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for s in params.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        return Completion(
            text=text,
            num_prompt_tokens=int(prompt_len),
            num_completion_tokens=len(ids),
            finish_reason="stop" if reason == "stop" else "length",
        )
