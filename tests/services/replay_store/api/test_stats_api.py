"""API tests of /v1/stats, health probes and the OpenAPI schema."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_stats_counts_by_source_environment_policy_and_success_rate(
    client, make_trajectory, ingest
):
    ingest(
        make_trajectory(policy="expert"),
        make_trajectory(policy="random", actions=("look",), won=False),
        make_trajectory(policy="random", actions=("take coin",)),
        make_trajectory(policy="agent", actions=("wait",), source="synthetic", environment="e2"),
    )

    stats = client.get("/v1/stats").json()

    assert stats == {
        "trajectories": 4,
        "transitions": 5,
        "by_source": {"real": 3, "synthetic": 1},
        "by_environment": {"twx-coin": 3, "e2": 1},
        "by_policy": {"expert": 1, "random": 2, "agent": 1},
        "success_rate_by_policy": {"expert": 1.0, "random": 0.5, "agent": 1.0},
        "evicted_trajectories": 0,
        "evicted_transitions": 0,
    }


def test_stats_empty_store_is_all_zero(client):
    assert client.get("/v1/stats").json()["trajectories"] == 0


def test_readyz_started_app_is_ready(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_healthz_answers_ok(client):
    assert client.get("/healthz").json()["status"] == "ok"


def test_openapi_lists_v1_routes_with_tags(client):
    schema = client.get("/openapi.json").json()

    assert {"/v1/trajectories", "/v1/retrieve", "/v1/transitions:sample", "/v1/stats"} <= set(
        schema["paths"]
    )
    assert schema["paths"]["/v1/retrieve"]["post"]["tags"] == ["retrieval"]
    assert {t["name"] for t in schema["tags"]} >= {"trajectories", "retrieval", "transitions"}
