"""API keys on the experience model: /v1 routes need a team's key when auth is enabled.

This checks the shared wiring only; what each team may see and do is in ``test_teams_api.py``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture()
def auth_client(make_client, auth_database_url):
    return make_client(auth_enabled=True, auth_database_url=auth_database_url, auth_cache_ttl_s=0)


def test_v1_routes_without_key_are_401(auth_client):
    model = auth_client.get("/v1/model")
    reset = auth_client.post("/v1/episodes", json={"task": {"instruction": "x"}})

    assert (model.status_code, reset.status_code) == (401, 401)
    assert model.json()["error"]["type"] == "unauthenticated"


def test_valid_key_is_served_and_health_needs_none(auth_client, make_team):
    _, key = make_team("em")

    assert auth_client.get("/v1/model", headers={"X-API-Key": key}).status_code == 200
    assert auth_client.get("/healthz").status_code == 200
    assert auth_client.get("/readyz").status_code == 200
