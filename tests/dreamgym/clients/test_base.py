"""Retries, backoff, Retry-After, timeouts and API key of the SDK clients (httpx MockTransport)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from dreamgym.clients import (
    AgentTrainerClient,
    AsyncAgentTrainerClient,
    AsyncExperienceModelClient,
    AsyncReplayStoreClient,
    AsyncTaskGeneratorClient,
    ExperienceModelClient,
    ReplayStoreClient,
    TaskGeneratorClient,
)
from dreamgym.clients.base import (
    API_KEY_ENV,
    AsyncServiceClient,
    ServiceClient,
    parse_retry_after,
    retry_wait_s,
)
from dreamgym.errors import (
    AuthenticationError,
    BackendUnavailableError,
    CapacityError,
    DreamGymError,
    NotFoundError,
    envelope,
)

BASE = "http://service.test"


class Script:
    """A MockTransport handler answering from a list of responses and recording requests."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def error(status: int, error_type: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json=envelope(error_type, "nope", status), headers=headers)


def ok(body: Any = None) -> httpx.Response:
    return httpx.Response(200, json=body if body is not None else {"ok": True})


def sync_client(script: Script, **kwargs: Any) -> ServiceClient:
    kwargs = {"max_retries": 3, "backoff_s": 0.001, **kwargs}
    return ServiceClient(BASE, transport=script.transport(), **kwargs)


# --- pure helpers -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("3", 3.0), ("0.25", 0.25), ("-4", 0.0)])
def test_parse_retry_after_delta_seconds(value: str, expected: float) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date_is_relative_to_now() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=7), usegmt=True)

    assert parse_retry_after(header, now=now) == pytest.approx(7.0)


@pytest.mark.parametrize("value", [None, "", "soon"])
def test_parse_retry_after_missing_or_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value) is None


def test_retry_wait_backs_off_exponentially_up_to_the_cap() -> None:
    waits = [retry_wait_s(a, backoff_s=0.5, max_backoff_s=3.0) for a in range(1, 6)]

    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_retry_wait_prefers_the_server_hint_capped() -> None:
    assert retry_wait_s(1, backoff_s=0.5, max_backoff_s=30.0, retry_after_s=4.0) == 4.0
    assert retry_wait_s(3, backoff_s=0.5, max_backoff_s=30.0, retry_after_s=0.0) == 0.0
    assert retry_wait_s(1, backoff_s=0.5, max_backoff_s=2.0, retry_after_s=9.0) == 2.0


def test_retry_wait_rejects_attempt_zero() -> None:
    with pytest.raises(ValueError, match="attempt"):
        retry_wait_s(0, backoff_s=1.0, max_backoff_s=1.0)


# --- sync client ----------------------------------------------------------------------------


def test_client_honours_retry_after_on_429(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(
        error(429, "capacity_reached", "0.3"), error(429, "capacity_reached", "0.3"), ok()
    )
    caplog.set_level(logging.WARNING, logger="dreamgym.clients")

    start = time.monotonic()
    with sync_client(script) as client:
        body = client.request("GET", "/v1/model")

    assert body == {"ok": True}
    assert len(script.requests) == 3
    assert time.monotonic() - start >= 0.6
    assert [r.retry_wait_s for r in caplog.records] == [0.3, 0.3]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_client_retries_5xx_then_succeeds(status: int) -> None:
    script = Script(error(status, "internal_error"), ok())

    with sync_client(script) as client:
        body = client.request("POST", "/v1/episodes", json={})

    assert body == {"ok": True}
    assert len(script.requests) == 2


def test_client_gives_up_after_max_retries_with_the_typed_error() -> None:
    script = Script(error(503, "backend_unavailable", "0"))

    with (
        sync_client(script, max_retries=2) as client,
        pytest.raises(BackendUnavailableError) as info,
    ):
        client.request("GET", "/v1/model")

    assert len(script.requests) == 3
    assert info.value.status_code == 503
    assert info.value.retry_after_s == 0.0


def test_client_backoff_grows_without_a_hint(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(error(502, "bad_gateway"))
    caplog.set_level(logging.WARNING, logger="dreamgym.clients")

    with sync_client(script, max_retries=3, backoff_s=0.01) as client, pytest.raises(DreamGymError):
        client.request("GET", "/x")

    waits = [r.retry_wait_s for r in caplog.records]
    assert len(waits) == 3
    # base * 2**(n-1) plus jitter in [0, base): the intervals never overlap
    for n, wait in enumerate(waits, start=1):
        assert 0.01 * 2 ** (n - 1) <= wait < 0.01 * 2 ** (n - 1) + 0.01


@pytest.mark.parametrize(
    ("status", "error_type", "exc"),
    [(404, "not_found", NotFoundError), (502, "malformed_transition", DreamGymError)],
)
def test_client_does_not_retry_final_errors(status: int, error_type: str, exc: type) -> None:
    script = Script(error(status, error_type), ok())

    with sync_client(script) as client, pytest.raises(exc) as info:
        client.request("GET", "/x")

    assert len(script.requests) == 1
    assert info.value.error_type == error_type


def test_client_maps_a_plain_string_error_body_to_the_status_class() -> None:
    script = Script(httpx.Response(401, json={"error": "invalid api key"}))

    with sync_client(script) as client, pytest.raises(AuthenticationError) as info:
        client.request("GET", "/x")

    assert info.value.message == "invalid api key"
    assert info.value.status_code == 401


def test_client_retries_connection_errors_then_reraises() -> None:
    script = Script(httpx.ConnectError("refused"))

    with sync_client(script, max_retries=2) as client, pytest.raises(httpx.ConnectError):
        client.request("GET", "/x")

    assert len(script.requests) == 3


def test_client_sends_its_timeout_on_every_request() -> None:
    script = Script(ok())

    with sync_client(script, timeout_s=7.5) as client:
        client.request("GET", "/x")

    timeout = script.requests[0].extensions["timeout"]
    assert timeout["read"] == 7.5
    assert timeout["connect"] == 7.5


def test_client_sends_api_key_as_bearer_on_retries_too() -> None:
    script = Script(error(429, "capacity_reached", "0"), ok())

    with sync_client(script, api_key="s3cret") as client:
        client.request("GET", "/x")

    assert [r.headers["Authorization"] for r in script.requests] == ["Bearer s3cret"] * 2


def test_client_api_key_defaults_to_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    script = Script(ok())

    with sync_client(script) as client:
        client.request("GET", "/x")

    assert script.requests[0].headers["Authorization"] == "Bearer from-env"


def test_client_without_api_key_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    script = Script(ok())

    with sync_client(script) as client:
        client.request("GET", "/x")

    assert "Authorization" not in script.requests[0].headers


# --- async client ---------------------------------------------------------------------------


async def test_async_client_honours_retry_after_and_sends_api_key() -> None:
    script = Script(error(429, "capacity_reached", "0.2"), ok())

    start = time.monotonic()
    async with AsyncServiceClient(
        BASE, transport=script.transport(), api_key="k", backoff_s=0.001
    ) as client:
        body = await client.request("GET", "/x")

    assert body == {"ok": True}
    assert time.monotonic() - start >= 0.2
    assert [r.headers["Authorization"] for r in script.requests] == ["Bearer k"] * 2


async def test_async_client_gives_up_with_capacity_error() -> None:
    script = Script(error(429, "capacity_reached", "0"))

    async with AsyncServiceClient(BASE, transport=script.transport(), max_retries=1) as client:
        with pytest.raises(CapacityError):
            await client.request("GET", "/x")

    assert len(script.requests) == 2


# --- every service client, sync and async ---------------------------------------------------

MODEL_INFO = {
    "backend": "fake",
    "model_path": "tiny",
    "format_version": "v1",
    "retrieval_k": 0,
    "retrieval_source": "real",
    "history_length": 2,
    "live_episodes": 0,
}
STATS = {
    "trajectories": 0,
    "transitions": 0,
    "by_source": {},
    "by_environment": {},
    "by_policy": {},
    "success_rate_by_policy": {},
}
SYNC_CALLS: list[tuple[type, Callable[[Any], Any], dict[str, Any]]] = [
    (ExperienceModelClient, lambda c: c.model_info(), MODEL_INFO),
    (ReplayStoreClient, lambda c: c.stats(), STATS),
    (TaskGeneratorClient, lambda c: c.scores(), {"data": [], "count": 0}),
    (AgentTrainerClient, lambda c: c.list_jobs(), {"data": []}),
]
ASYNC_CALLS: list[tuple[type, Callable[[Any], Any], dict[str, Any]]] = [
    (AsyncExperienceModelClient, lambda c: c.model_info(), MODEL_INFO),
    (AsyncReplayStoreClient, lambda c: c.stats(), STATS),
    (AsyncTaskGeneratorClient, lambda c: c.scores(), {"data": [], "count": 0}),
    (AsyncAgentTrainerClient, lambda c: c.list_jobs(), {"data": []}),
]


@pytest.mark.parametrize(
    ("cls", "call", "body"), SYNC_CALLS, ids=lambda x: getattr(x, "__name__", "-")
)
def test_every_sync_client_retries_and_authenticates(cls: type, call: Callable, body: Any) -> None:
    script = Script(error(503, "backend_unavailable", "0"), ok(body))

    with cls(BASE, transport=script.transport(), api_key="k", backoff_s=0.001) as client:
        result = call(client)

    assert result is not None
    assert len(script.requests) == 2
    assert all(r.headers["Authorization"] == "Bearer k" for r in script.requests)


@pytest.mark.parametrize(
    ("cls", "call", "body"), ASYNC_CALLS, ids=lambda x: getattr(x, "__name__", "-")
)
async def test_every_async_client_retries_and_authenticates(
    cls: type, call: Callable, body: Any
) -> None:
    script = Script(error(503, "backend_unavailable", "0"), ok(body))

    async with cls(BASE, transport=script.transport(), api_key="k", backoff_s=0.001) as client:
        result = await call(client)

    assert result is not None
    assert len(script.requests) == 2
    assert all(r.headers["Authorization"] == "Bearer k" for r in script.requests)
