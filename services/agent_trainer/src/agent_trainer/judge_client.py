"""Adapter: the LLM judge behind any OpenAI-compatible ``/chat/completions`` endpoint.

Built on :class:`dreamgym.clients.base.ServiceClient` (httpx, explicit timeout, retries on 429 /
5xx / connection errors honouring ``Retry-After``). The optional API key is sent as
``Authorization: Bearer <key>``; without one no ``Authorization`` header is sent at all (the
team's ``$DREAMGYM_API_KEY`` is never forwarded to a third-party judge). Errors raised from here
carry the status and the server's message, never the key.
"""

from __future__ import annotations

from typing import Any, Self
from urllib.parse import urlsplit

import httpx

from agent_trainer.judge import JudgeParseError, JudgeRequestError, Message
from dreamgym.clients.base import ServiceClient
from dreamgym.errors import DreamGymError

__all__ = ["ChatJudge", "chat_base_url"]


def chat_base_url(base_url: str) -> str:
    """The API root that ``/chat/completions`` is appended to.

    A bare server root (``http://vllm:8000``) gets ``/v1``, like
    :class:`dreamgym.llm.openai_backend.OpenAICompatibleBackend`; a URL with a path
    (``https://api.openai.com/v1``, ``http://gw/openai/v1``) is used as given.
    """
    root = base_url.rstrip("/")
    return root + "/v1" if urlsplit(root).path in ("", "/") else root


class ChatJudge:
    """The judge endpoint as a callable, ``judge(messages) -> response body``.

    An :data:`~agent_trainer.judge.Ask` for :func:`~agent_trainer.judge.judge_transitions`.

    Args:
        base_url: OpenAI-compatible API root (see :func:`chat_base_url`).
        model: the judge model's name, sent as ``model``.
        api_key: optional bearer token.
        timeout_s: per-attempt timeout, seconds.
        max_retries: retries after the first attempt (429, 5xx, connection errors).
        max_tokens: reply length limit, tokens.
        backoff_s: base of the retries' exponential backoff, seconds.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        max_tokens: int = 512,
        backoff_s: float = 0.25,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self._client = ServiceClient(
            chat_base_url(base_url),
            api_key=api_key or "",  # "" (not None): no fallback to $DREAMGYM_API_KEY
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            transport=transport,
        )

    def __call__(self, messages: list[Message]) -> Any:
        """POST the messages at temperature 0; the decoded response body.

        Raises:
            JudgeRequestError: an error status or connection failure after the retries.
            JudgeParseError: a success status whose body is not JSON.
        """
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        try:
            return self._client.request("POST", "/chat/completions", json=body)
        except DreamGymError as exc:
            raise JudgeRequestError(
                f"judge endpoint answered {exc.status_code}: {exc.message[:200]}"
            ) from None
        except httpx.HTTPError as exc:
            raise JudgeRequestError(
                f"judge endpoint unreachable: {type(exc).__name__}: {exc}"[:300]
            ) from None
        except ValueError:
            raise JudgeParseError("response body is not JSON") from None

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
