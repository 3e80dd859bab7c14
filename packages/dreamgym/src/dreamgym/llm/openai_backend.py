"""Backend for any OpenAI-compatible ``/v1/completions`` endpoint (vLLM, SGLang, ...).

This is how GPU deployments run the experience model: a vLLM server holds the weights and this
backend sends the exact same prompts the in-process backend would, so prompts, parsing and — at
temperature 0 — results are the same across backends. Prompts of one batch are sent as concurrent
requests (the server batches them), each with its own ``seed``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from dreamgym.llm.base import Completion, SamplingParams

__all__ = ["OpenAICompatibleBackend"]


class OpenAICompatibleBackend:
    """Generate through an OpenAI-compatible completions API.

    Args:
        base_url: server root, e.g. ``http://vllm:8000`` (``/v1`` is appended when missing).
        model: the served model name.
        api_key: optional bearer token.
        timeout_s: per-request timeout.
        max_concurrency: concurrent requests per :meth:`generate` call.
        max_retries: retries on connection errors and 5xx.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_concurrency: int = 64,
        max_retries: int = 3,
    ) -> None:
        root = base_url.rstrip("/")
        self.url = root if root.endswith("/v1") else root + "/v1"
        self.model = model
        self.max_retries = max_retries
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout_s, headers=headers)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency)

    def _payload(self, prompt: str, p: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": p.max_new_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.seed is not None:
            body["seed"] = p.seed
        if p.stop:
            body["stop"] = list(p.stop)
        return body

    def _one(self, prompt: str, p: SamplingParams) -> Completion:
        for attempt in Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential(multiplier=0.2, max=5),
            retry=retry_if_exception_type((httpx.TransportError, _ServerError)),
            reraise=True,
        ):
            with attempt:
                r = self._http.post(f"{self.url}/completions", json=self._payload(prompt, p))
                if r.status_code >= 500:
                    raise _ServerError(f"{r.status_code}: {r.text[:300]}")
                r.raise_for_status()
        choice = r.json()["choices"][0]
        usage = r.json().get("usage") or {}
        return Completion(
            text=choice.get("text", ""),
            num_prompt_tokens=int(usage.get("prompt_tokens", 0)),
            num_completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        )

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Generate one completion per prompt (concurrent requests).

        Raises:
            ValueError: ``len(prompts) != len(params)``.
            httpx.HTTPError: the server failed after retries.
        """
        if len(prompts) != len(params):
            raise ValueError(f"got {len(prompts)} prompts but {len(params)} sampling params")
        return list(self._pool.map(self._one, prompts, params))

    def close(self) -> None:
        """Close the HTTP pool and worker threads."""
        self._http.close()
        self._pool.shutdown(wait=False)


class _ServerError(Exception):
    pass
