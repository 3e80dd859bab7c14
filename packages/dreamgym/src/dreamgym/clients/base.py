"""Typed HTTP client base shared by the per-service clients.

- ``httpx`` for transport, one connection pool per client, explicit timeouts;
- ``tenacity`` retries on 429, 500, 502, 503, 504 and connection errors: the wait honours the
  server's ``Retry-After`` (seconds or an HTTP date) and otherwise backs off exponentially with
  jitter (:func:`retry_wait_s`); other 4xx are never retried, nor are 5xx whose envelope type
  says a retry cannot help (``malformed_transition``: the caller masks the rollout instead);
- ``api_key`` (or ``$DREAMGYM_API_KEY``) is sent as ``Authorization: Bearer <key>``;
- error envelopes are mapped back to :mod:`dreamgym.errors` classes, so callers catch
  ``NotFoundError`` rather than parse JSON.

Every service client subclasses :class:`ServiceClient` (sync) or :class:`AsyncServiceClient`.

>>> with ServiceClient("http://localhost:8001", api_key="k", timeout_s=30) as c:  # doctest: +SKIP
...     c.request("GET", "/v1/model")
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from datetime import UTC, datetime
from typing import Any, Self

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from dreamgym.errors import DreamGymError, error_class_for

__all__ = [
    "API_KEY_ENV",
    "RETRYABLE_STATUS",
    "AsyncServiceClient",
    "ServiceClient",
    "parse_retry_after",
    "raise_for_envelope",
    "retry_wait_s",
]

logger = logging.getLogger("dreamgym.clients")

API_KEY_ENV = "DREAMGYM_API_KEY"
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
NON_RETRYABLE_TYPES = frozenset({"malformed_transition", "llm_backend_not_configured"})


class _RetryableHTTPError(Exception):
    def __init__(self, error: DreamGymError, retry_after_s: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value.

    Args:
        value: the header: delta-seconds (``"3"``, ``"0.5"``) or an HTTP date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``).
        now: the current time for HTTP dates (default: now, UTC).

    Returns:
        Seconds >= 0, or ``None`` when the header is absent or unparseable.
    """
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retry_wait_s(
    attempt: int,
    *,
    backoff_s: float,
    max_backoff_s: float,
    retry_after_s: float | None = None,
    jitter: float = 0.0,
) -> float:
    """Seconds to wait before retry number ``attempt``.

    With a server hint the wait is ``min(retry_after_s, max_backoff_s)``; otherwise it is the
    exponential backoff ``min(backoff_s * 2**(attempt-1) + jitter, max_backoff_s)``.

    Args:
        attempt: 1 for the first retry, 2 for the second, ...
        backoff_s: base of the exponential backoff, seconds.
        max_backoff_s: upper bound of any wait, seconds.
        retry_after_s: the server's ``Retry-After`` in seconds, if it sent one.
        jitter: extra seconds added to the backoff (callers draw it in ``[0, backoff_s)``).

    Returns:
        The wait in seconds, in ``[0, max_backoff_s]``.

    Raises:
        ValueError: ``attempt < 1``.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), max_backoff_s)
    return min(backoff_s * 2 ** (attempt - 1) + jitter, max_backoff_s)


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
        if not isinstance(info, dict):  # e.g. ``{"error": "text"}`` from a foreign server
            info = {"message": str(info)}
        error_type = info.get("type", error_type)
        message = info.get("message", message)
        param = info.get("param")
    except ValueError:
        pass
    cls = error_class_for(error_type, response.status_code)
    err = cls.__new__(cls)
    DreamGymError.__init__(
        err,
        message,
        param=param,
        retry_after_s=parse_retry_after(response.headers.get("Retry-After")),
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
        max_backoff_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hint = exc.retry_after_s if isinstance(exc, _RetryableHTTPError) else None
        return retry_wait_s(
            state.attempt_number,
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
            retry_after_s=hint,
            jitter=random.uniform(0.0, self.backoff_s),
        )

    def _retrying_kwargs(self, method: str, path: str) -> dict[str, Any]:
        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            logger.warning(
                "retrying %s %s in %.3fs after attempt %d: %s",
                method,
                path,
                wait,
                state.attempt_number,
                exc,
                extra={"retry_wait_s": wait, "attempt": state.attempt_number},
            )

        return {
            "stop": stop_after_attempt(self.max_retries + 1),
            "wait": self._wait,
            "retry": retry_if_exception(_should_retry),
            "before_sleep": log_retry,
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
    """Synchronous client base. Use as a context manager or call :meth:`close`.

    Args:
        base_url: the service root, e.g. ``"http://experience-model:8001"``.
        api_key: sent as ``Authorization: Bearer <key>`` (default: ``$DREAMGYM_API_KEY``).
        timeout_s: read/write/pool timeout of one attempt, seconds (connect: at most 10 s).
        max_retries: retries after the first attempt (0 disables retrying).
        backoff_s: base of the exponential backoff, seconds.
        max_backoff_s: cap of one wait, also of a server's ``Retry-After``, seconds.
        transport: an httpx transport (e.g. ``httpx.MockTransport`` in tests).
    """

    def __init__(
        self, base_url: str, *, transport: httpx.BaseTransport | None = None, **kwargs: Any
    ) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(
            base_url=self.base_url, timeout=self.timeout, headers=self.headers, transport=transport
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request with retries; return the decoded JSON body (``None`` for 204).

        Raises:
            DreamGymError: the error envelope of the last attempt, as its class.
            httpx.TransportError: the connection kept failing.
        """
        try:
            for attempt in Retrying(**self._retrying_kwargs(method, path)):
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncServiceClient(_Common):
    """Asynchronous client base. Use as an async context manager or call :meth:`aclose`.

    Args:
        base_url: the service root.
        max_connections: size of the connection pool.
        transport: an async httpx transport (e.g. ``httpx.MockTransport`` in tests).
        **kwargs: ``api_key``, ``timeout_s``, ``max_retries``, ``backoff_s``, ``max_backoff_s``
            (see :class:`ServiceClient`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(base_url, **kwargs)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self.timeout,
            headers=self.headers,
            limits=limits,
            transport=transport,
        )

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request with retries; return the decoded JSON body (``None`` for 204).

        Raises:
            DreamGymError: the error envelope of the last attempt, as its class.
            httpx.TransportError: the connection kept failing.
        """
        try:
            async for attempt in AsyncRetrying(**self._retrying_kwargs(method, path)):
                with attempt:
                    response = self._check(await self._http.request(method, path, **kwargs))
        except _RetryableHTTPError as exc:
            raise exc.error from None
        return None if response.status_code == 204 else response.json()

    async def wait_ready(self, timeout_s: float = 120.0, interval_s: float = 0.5) -> None:
        """Poll ``/readyz`` until it answers 200 (see :meth:`ServiceClient.wait_ready`)."""
        deadline, last = time.monotonic() + timeout_s, "no answer"
        while time.monotonic() < deadline:
            try:
                r = await self._http.get("/readyz", timeout=5.0)
                if r.status_code == 200:
                    return
                last = r.text[:300]
            except httpx.TransportError as exc:
                last = repr(exc)
            await asyncio.sleep(interval_s)
        raise TimeoutError(f"{self.base_url} not ready after {timeout_s:.0f}s: {last}")

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
