"""Tests of embedding-cluster curriculum scores (dreamgym.curriculum.clusters): hand-computed
cases and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamgym.curriculum.clusters import (
    cluster_reward_variance,
    hashed_text_embeddings,
    kmeans_cosine,
)
from dreamgym.curriculum.scoring import reward_variance

TWO_BLOBS = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.95, 0.0]])


# -- kmeans_cosine ------------------------------------------------------------------------------


def test_kmeans_separates_two_directions():
    assert kmeans_cosine(TWO_BLOBS, 2).tolist() == [0, 0, 1, 1, 0]


def test_kmeans_is_scale_invariant_and_k1_is_one_cluster():
    assert kmeans_cosine(TWO_BLOBS * np.array([[3.0], [0.5], [7.0], [1.0], [2.0]]), 2).tolist() == [
        0,
        0,
        1,
        1,
        0,
    ]
    assert kmeans_cosine(TWO_BLOBS, 1).tolist() == [0] * 5


def test_kmeans_k_equal_b_gives_every_distinct_point_its_cluster():
    x = np.eye(4)

    assert sorted(kmeans_cosine(x, 4).tolist()) == [0, 1, 2, 3]


def test_kmeans_farthest_point_init_hand_case():
    # row 0 seeds cluster 0; the row least similar to it (row 2, orthogonal) seeds cluster 1;
    # row 3 (45°) is equally close to both: the tie goes to cluster 0.
    x = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [1.0, 1.0]])

    assert kmeans_cosine(x, 2, iterations=1).tolist() == [0, 0, 1, 0]


@pytest.mark.parametrize(
    ("x", "k", "match"),
    [
        (np.ones(3), 1, "(B, D)"),
        (np.ones((3, 2)), 0, "k must be"),
        (np.ones((3, 2)), 4, "k must be"),
        (np.array([[1.0, 0.0], [0.0, 0.0]]), 1, "zero row"),
        (np.array([[np.nan, 1.0]]), 1, "finite"),
    ],
)
def test_kmeans_bad_input_raises(x, k, match):
    with pytest.raises(ValueError, match=match):
        kmeans_cosine(x, k)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=2, max_value=12).flatmap(
        lambda b: st.tuples(
            st.lists(
                st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3),
                min_size=b,
                max_size=b,
            ),
            st.integers(min_value=1, max_value=b),
        )
    )
)
def test_kmeans_labels_are_valid_and_deterministic(case):
    rows, k = case
    x = np.array(rows) + np.array([[0.0, 0.0, 2.0]])  # keep rows non-zero

    first, second = kmeans_cosine(x, k), kmeans_cosine(x, k)

    assert first.shape == (len(rows),)
    assert first.min() >= 0 and first.max() < k
    assert np.array_equal(first, second)


# -- cluster_reward_variance --------------------------------------------------------------------


def test_cluster_variance_pools_the_rewards_of_each_cluster():
    scores = cluster_reward_variance([[1.0], [0.0], [1.0], [1.0]], np.array([0, 0, 1, 1]))

    assert scores.tolist() == [0.25, 0.25, 0.0, 0.0]


def test_cluster_variance_uneven_groups_and_nan():
    # cluster 0 pools [1, 0, 0, nan→dropped]: mean 1/3, var = (4/9 + 1/9 + 1/9) / 3 = 2/9
    scores = cluster_reward_variance([[1.0, 0.0], [0.0, np.nan], []], np.array([0, 0, 1]))

    np.testing.assert_allclose(scores, [2 / 9, 2 / 9, 0.0])


def test_cluster_variance_singleton_clusters_equal_per_task_variance():
    rewards = [[1.0, 0.0, 1.0], [0.5, 0.5], [0.0, 1.0]]

    scores = cluster_reward_variance(rewards, np.arange(3))

    np.testing.assert_allclose(scores, reward_variance(rewards))


def test_cluster_variance_single_rollout_tasks_score_only_through_their_cluster():
    # PPO case: one reward per task, so per-task variance is 0 everywhere
    rewards = [[1.0], [0.0], [1.0], [0.0]]

    assert reward_variance(rewards).tolist() == [0.0] * 4
    assert cluster_reward_variance(rewards, np.array([0, 0, 0, 0])).tolist() == [0.25] * 4


def test_cluster_variance_bad_labels_raise():
    with pytest.raises(ValueError, match="labels"):
        cluster_reward_variance([[1.0], [0.0]], np.array([0]))
    with pytest.raises(ValueError, match="labels"):
        cluster_reward_variance([[1.0]], np.array([0.5]))


# -- hashed_text_embeddings ---------------------------------------------------------------------


def test_hashed_embeddings_are_unit_rows_and_deterministic():
    texts = ["find the coin in the kitchen", "find the coin in the kitchen", "", "cook a meal"]

    x = hashed_text_embeddings(texts, dim=64)

    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0)
    assert np.array_equal(x[0], x[1])
    assert np.array_equal(x, hashed_text_embeddings(texts, dim=64))


def test_hashed_embeddings_similar_texts_are_closer_than_unrelated_ones():
    x = hashed_text_embeddings(
        ["find the coin in the kitchen", "find the coin in the pantry", "cook a delicious meal"]
    )

    assert x[0] @ x[1] > x[0] @ x[2]


def test_hashed_embeddings_cluster_tasks_by_topic():
    texts = [
        "find the coin in the kitchen",
        "cook a meal with the red potato",
        "find the coin in the garden",
        "cook a meal with the yellow pepper",
    ]

    labels = kmeans_cosine(hashed_text_embeddings(texts), 2)

    assert labels[0] == labels[2] and labels[1] == labels[3] and labels[0] != labels[1]


def test_hashed_embeddings_dim_too_small_raises():
    with pytest.raises(ValueError, match="dim"):
        hashed_text_embeddings(["x"], dim=4)
