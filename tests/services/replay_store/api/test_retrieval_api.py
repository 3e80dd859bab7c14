"""API tests of POST /v1/retrieve: exact top-k cosine ranking, filters, limits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from replay_store.adapters.embeddings import HashEmbedder
from replay_store.domain.keys import retrieval_key

pytestmark = pytest.mark.integration

ACTIONS = ("take coin", "go north", "open the chest", "look", "take key", "go south")


@pytest.fixture()
def stored(make_trajectory, ingest):
    """Six trajectories: three real (train), three synthetic; returns their ids."""
    trajectories = [
        make_trajectory(
            task=f"task {i}: find the treasure",
            actions=(ACTIONS[i], ACTIONS[(i + 1) % 6], ACTIONS[(i + 2) % 6]),
            source="real" if i < 3 else "synthetic",
            environment="twx-coin" if i % 2 == 0 else "tw-cooking",
            game_seed=i,
        )
        for i in range(6)
    ]
    return ingest(*trajectories)


def _stored_embeddings(database_url):
    """(ids, (N, D) embeddings, rows metadata) read straight from the transitions table."""
    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, embedding::text, source, environment, trajectory_id "
                "FROM transitions ORDER BY id"
            )
        ).all()
    engine.dispose()
    ids = np.array([r[0] for r in rows])
    vectors = np.array([json.loads(r[1]) for r in rows], dtype=np.float32)
    return ids, vectors, rows


def assert_exact_top_k(hits, query_vector, ids, vectors, mask, k):
    """``hits`` is a brute-force cosine top-k over the masked rows (any order among exact ties)."""
    scores = dict(zip(ids[mask].tolist(), (vectors[mask] @ query_vector).tolist(), strict=True))
    expected = sorted(scores.values(), reverse=True)[:k]
    returned = [h["score"] for h in hits]
    assert len({h["id"] for h in hits}) == len(hits) == len(expected)
    np.testing.assert_allclose(returned, expected, atol=1e-5)  # same scores, descending
    for hit in hits:  # ... and each id really has the score it was ranked by
        assert hit["score"] == pytest.approx(scores[hit["id"]], abs=1e-5)


def _query(i):
    return {
        "task": f"task {i}: find the treasure",
        "observation": f"task {i}: find the treasure: you are in room 1.",
        "action": ACTIONS[(i + 3) % 6],
    }


def test_retrieve_order_equals_brute_force_cosine_ranking(client, replay_settings, stored):
    queries = [_query(i) for i in range(4)]
    ids, vectors, _ = _stored_embeddings(replay_settings.database_url)

    response = client.post("/v1/retrieve", json={"queries": queries, "k": 7})

    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 4
    embedder = HashEmbedder(384)
    for query, hits in zip(queries, results, strict=True):
        q = embedder.embed([retrieval_key(query["task"], query["observation"], query["action"])])[0]
        assert_exact_top_k(hits, q, ids, vectors, np.ones(len(ids), bool), k=7)


def test_retrieve_with_filters_is_exact_over_matching_rows(
    client, replay_settings, stored, monkeypatch
):
    # With ef_search = k an HNSW scan would yield k candidates *before* filtering: too few.
    monkeypatch.setattr(client.app.state.repository, "hnsw_ef_search", 1)
    ids, vectors, rows = _stored_embeddings(replay_settings.database_url)
    excluded = stored[3]
    mask = np.array([r[2] == "synthetic" and r[4] != excluded for r in rows])
    body = {
        "queries": [_query(4)],
        "k": 6,
        "filters": {"source": "synthetic", "exclude_trajectory_ids": [excluded]},
    }

    hits = client.post("/v1/retrieve", json=body).json()["results"][0]

    q = HashEmbedder(384).embed([retrieval_key(**_query(4))])[0]
    assert len(hits) == 6 == mask.sum()
    assert_exact_top_k(hits, q, ids, vectors, mask, k=6)
    assert {h["source"] for h in hits} == {"synthetic"}
    assert excluded not in {h["trajectory_id"] for h in hits}


def test_retrieve_excluding_nearest_trajectory_still_returns_k(
    client, replay_settings, stored, monkeypatch
):
    # exclude_trajectory_ids has no btree to use: an HNSW scan with ef_search = k would return the
    # k nearest, the excluded trajectory's among them, and leave fewer than k after filtering.
    monkeypatch.setattr(client.app.state.repository, "hnsw_ef_search", 1)
    ids, vectors, rows = _stored_embeddings(replay_settings.database_url)
    q = HashEmbedder(384).embed([retrieval_key(**_query(0))])[0]
    nearest_trajectory = rows[int(np.argmax(vectors @ q))][4]
    body = {
        "queries": [_query(0)],
        "k": 6,
        "filters": {"exclude_trajectory_ids": [nearest_trajectory]},
    }

    hits = client.post("/v1/retrieve", json=body).json()["results"][0]

    mask = np.array([r[4] != nearest_trajectory for r in rows])
    assert_exact_top_k(hits, q, ids, vectors, mask, k=6)
    assert nearest_trajectory not in {h["trajectory_id"] for h in hits}


def test_retrieve_environment_filter_returns_only_that_environment(client, stored):
    body = {"queries": [_query(0)], "k": 20, "filters": {"environment": "tw-cooking"}}

    hits = client.post("/v1/retrieve", json=body).json()["results"][0]

    assert len(hits) == 9
    assert {h["environment"] for h in hits} == {"tw-cooking"}


def test_retrieve_hit_carries_transition_and_provenance(client, stored):
    query = {
        "task": "task 0: find the treasure",
        "observation": "task 0: find the treasure: you are in room 0.",
        "action": "take coin",
    }

    top = client.post("/v1/retrieve", json={"queries": [query], "k": 1}).json()["results"][0][0]

    assert top["score"] == pytest.approx(1.0, abs=1e-5)
    assert (top["trajectory_id"], top["step"], top["action"]) == (stored[0], 0, "take coin")
    assert (top["task"], top["environment"], top["source"], top["policy"]) == (
        "task 0: find the treasure",
        "twx-coin",
        "real",
        "expert",
    )


def test_retrieve_empty_store_returns_empty_result_per_query(client):
    response = client.post("/v1/retrieve", json={"queries": [_query(0), _query(1)]})

    assert response.json() == {"results": [[], []]}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"queries": [_query(0)], "k": 21}, "body.k"),
        ({"queries": [_query(0)], "k": 0}, "body.k"),
        ({"queries": []}, "body.queries"),
        ({"queries": [_query(0)], "filters": {"source": "dream"}}, "body.filters.source"),
    ],
)
def test_retrieve_bad_request_returns_422_naming_field(client, body, param):
    response = client.post("/v1/retrieve", json=body)

    assert response.status_code == 422
    assert response.json()["error"]["param"] == param
