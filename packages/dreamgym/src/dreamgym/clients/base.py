"""Typed HTTP client base shared by the per-service clients.

- ``httpx`` for transport, one connection pool per client, explicit timeouts;
- ``tenacity`` retries with exponential backoff and jitter on 429/502/503/504 and connection
  errors, honouring ``Retry-After``; 4xx other than 429 are never retried;
- error envelopes are mapped back to :mod:`dreamgym.errors` classes, so callers catch
  ``EpisodeNotFoundError`` rather than parse JSON.

Every service client subclasses :class:`ServiceClient` (sync) or :class:`AsyncServiceClient`.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from dreamgym.errors import DreamGymError, error_class_for

__all__ = ["AsyncServiceClient", "ServiceClient", "raise_for_envelope"]

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
NON_RETRYABLE_TYPES = frozenset({"malformed_transition", "llm_backend_not_configured"})


class _RetryableHTTPError(Exception):
    def __init__(self, error: DreamGymError, retry_after_s: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after_s


def raise_for_envelope(response: httpx.Response) -> None:
    """Raise the :class:`DreamGymError` subclass matching an error response.

    Args:
        response: any httpx response.

    Raises:
        DreamGymError: a subclass chosen from the envelope ``type`` / HTTP status, carrying
            ``message``, ``param`` and ``retry_after_s``; ``status_code`` is the response's.
    """
    if response.status_code < 400:
        return
    error_type, message, param = "http_error", response.text[:500], None
    try:
        body = response.json()
        info = body.get("error", {}) if isinstance(body, dict) else {}
        error_type = info.get("type", error_type)
        message = info.get("message", message)
        param = info.get("param")
    except ValueError:
        pass
    retry_after = response.headers.get("Retry-After")
    cls = error_class_for(error_type, response.status_code)
    err = cls.__new__(cls)
    DreamGymError.__init__(
        err, message, param=param, retry_after_s=float(retry_after) if retry_after else None
    )
    err.status_code = response.status_code
    err.error_type = error_type
    raise err


def _should_retry(exc: BaseException) -> bool:
    return isinstance(exc, (_RetryableHTTPError, httpx.TransportError))


class _Common:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.25,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _retrying_kwargs(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.max_retries + 1),
            "wait": wait_exponential_jitter(initial=self.backoff_s, max=10.0),
            "retry": retry_if_exception(_should_retry),
            "reraise": True,
        }

    @staticmethod
    def _check(response: httpx.Response) -> httpx.Response:
        try:
            raise_for_envelope(response)
        except DreamGymError as err:
            if (
                response.status_code in RETRYABLE_STATUS
                and err.error_type not in NON_RETRYABLE_TYPES
            ):
                raise _RetryableHTTPError(err, err.retry_after_s) from err
            raise
        return response


class ServiceClient(_Common):
    """Synchronous client base. Use as a context manager or call :meth:`close`."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(
            base_url=self.base_url, timeout=self.timeout, headers=self.headers
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request with retries; return the decoded JSON body (``None`` for 204)."""
        try:
            for attempt in Retrying(**self._retrying_kwargs()):
                with attempt:
                    response = self._check(self._http.request(method, path, **kwargs))
        except _RetryableHTTPError as exc:
            raise exc.error from None
        return None if response.status_code == 204 else response.json()

    def wait_ready(self, timeout_s: float = 120.0, interval_s: float = 0.5) -> None:
        """Poll ``/readyz`` until it answers 200.

        Raises:
            TimeoutError: not ready within ``timeout_s``; the message holds the last answer.
        """
        deadline, last = time.monotonic() + timeout_s, "no answer"
        while time.monotonic() < deadline:
            try:
                r = self._http.get("/readyz", timeout=5.0)
                if r.status_code == 200:
                    return
                last = r.text[:300]
            except httpx.TransportError as exc:
                last = repr(exc)
            time.sleep(interval_s)
        raise TimeoutError(f"{self.base_url} not ready after {timeout_s:.0f}s: {last}")

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncServiceClient(_Common):
    """Asynchronous client base. Use as an async context manager or call :meth:`aclose`."""

    def __init__(self, base_url: str, *, max_connections: int = 256, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=self.timeout, headers=self.headers, limits=limits
        )

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request with retries; return the decoded JSON body (``None`` for 204)."""
        try:
            async for attempt in AsyncRetrying(**self._retrying_kwargs()):
                with attempt:
                    response = self._check(await self._http.request(method, path, **kwargs))
        except _RetryableHTTPError as exc:
            raise exc.error from None
        return None if response.status_code == 204 else response.json()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncServiceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
