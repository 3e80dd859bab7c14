"""Shared assertions and request helpers of the experience model API tests."""

from __future__ import annotations

from typing import Any

from ..factories import make_task, task_json


def assert_envelope(
    response, status: int, error_type: str, param: str | None = None
) -> dict[str, Any]:
    """Assert the status and the error envelope; return the ``error`` object."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["code"] == status
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    return error


def reset(client, task=None, **fields) -> dict[str, Any]:
    """Start an episode and return the response body (asserting 201)."""
    response = client.post("/v1/episodes", json={"task": task_json(task or make_task()), **fields})
    assert response.status_code == 201, response.text
    return response.json()


def step(client, episode_id: str, action: str, **fields):
    """Send one action; return the raw response."""
    return client.post(f"/v1/episodes/{episode_id}/step", json={"action": action, **fields})
