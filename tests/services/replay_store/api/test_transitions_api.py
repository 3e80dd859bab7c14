"""API tests of /v1/transitions:sample (uniform, seeded) and GET /v1/transitions (keyset pages)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture()
def stored(make_trajectory, ingest):
    """Five trajectories, 3 transitions each: ids 1..9 real/train, 10..15 synthetic/eval."""
    trajectories = [
        make_trajectory(
            actions=(f"say {i}", "look", "take coin"),
            source="real" if i < 3 else "synthetic",
            split="train" if i < 3 else "eval",
        )
        for i in range(5)
    ]
    return ingest(*trajectories)


def _sample(client, **body):
    response = client.post("/v1/transitions:sample", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_sample_same_seed_same_transitions(client, stored):
    first = _sample(client, n=6, seed=11)
    second = _sample(client, n=6, seed=11)
    other = _sample(client, n=6, seed=12)

    assert [t["id"] for t in first["transitions"]] == [t["id"] for t in second["transitions"]]
    assert [t["id"] for t in first["transitions"]] != [t["id"] for t in other["transitions"]]


def test_sample_returns_distinct_transitions_with_uniform_probabilities(client, stored):
    sample = _sample(client, n=6, seed=0)

    assert sample["table_size"] == 15
    assert len({t["id"] for t in sample["transitions"]}) == 6
    assert sample["probabilities"] == [pytest.approx(1 / 15)] * 6


def test_sample_more_than_table_returns_whole_filtered_table(client, stored):
    sample = _sample(client, n=100, seed=0, filters={"source": "synthetic", "split": "eval"})

    assert sample["table_size"] == 6
    assert len(sample["transitions"]) == 6
    assert {t["source"] for t in sample["transitions"]} == {"synthetic"}
    assert {t["trajectory_id"] for t in sample["transitions"]} == set(stored[3:])


def test_sample_n_above_limit_returns_422(client):
    response = client.post("/v1/transitions:sample", json={"n": 10_001})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "body.n"


def _all_pages(client, limit, **filters):
    pages, after_id = [], None
    while True:
        params = {"limit": limit, **filters, **({"after_id": after_id} if after_id else {})}
        page = client.get("/v1/transitions", params=params).json()
        pages.append(page["data"])
        after_id = page["next_after_id"]
        if after_id is None:
            return pages


def test_list_transitions_pages_cover_every_row_exactly_once(client, stored):
    pages = _all_pages(client, limit=4)

    ids = [t["id"] for page in pages for t in page]
    assert [len(p) for p in pages] == [4, 4, 4, 3]
    assert len(ids) == len(set(ids)) == 15
    assert ids == sorted(ids)


def test_list_transitions_exact_multiple_of_limit_ends_without_empty_page(client, stored):
    pages = _all_pages(client, limit=5)

    assert [len(p) for p in pages] == [5, 5, 5]


def test_list_transitions_filters_and_rows_carry_task_and_trajectory(client, stored):
    pages = _all_pages(client, limit=2, source="real", split="train")

    rows = [t for page in pages for t in page]
    assert len(rows) == 9
    assert {t["trajectory_id"] for t in rows} == set(stored[:3])
    assert {t["task"] for t in rows} == {"pick up the coin"}
    assert {"observation", "action", "reward", "next_observation", "terminated"} <= set(rows[0])


def test_list_transitions_limit_above_5000_returns_422(client):
    response = client.get("/v1/transitions", params={"limit": 5001})

    assert response.status_code == 422
    assert response.json()["error"]["param"] == "query.limit"
