"""Unit tests of the HashEmbedder (feature hashing of word unigrams and bigrams)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_store.adapters.embeddings import HashEmbedder, build_embedder


def test_hash_embedder_shape_dtype_and_unit_norm():
    vectors = HashEmbedder(64).embed(["take coin", "go north", "You see a coin."])

    assert vectors.shape == (3, 64)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


def test_hash_embedder_is_deterministic_across_instances():
    a = HashEmbedder(128).embed(["open the door"])
    b = HashEmbedder(128).embed(["open the door"])

    np.testing.assert_array_equal(a, b)


def test_hash_embedder_word_overlap_scores_higher_than_unrelated_text():
    query, related, unrelated = HashEmbedder(384).embed(
        ["take the coin", "take the golden coin", "move north quickly"]
    )

    assert float(query @ related) > float(query @ unrelated)


def test_hash_embedder_bigrams_make_word_order_matter():
    a, b = HashEmbedder(384).embed(["dog bites man", "man bites dog"])

    assert float(a @ b) < 0.999


def test_hash_embedder_empty_batch_and_empty_text():
    embedder = HashEmbedder(16)

    assert embedder.embed([]).shape == (0, 16)
    np.testing.assert_allclose(np.linalg.norm(embedder.embed(["", "!!!"]), axis=1), 1.0)


def test_hash_embedder_too_small_dim_raises_value_error():
    with pytest.raises(ValueError, match="dim must be >= 8"):
        HashEmbedder(4)


def test_build_embedder_unknown_name_raises_value_error():
    with pytest.raises(ValueError, match="'bert'"):
        build_embedder("bert", 384)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=5))
def test_hash_embedder_any_text_gives_finite_unit_rows(texts):
    vectors = HashEmbedder(32).embed(texts)

    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
