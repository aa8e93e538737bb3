"""The token narrower's training: which words of a flagged sentence carry the unsupported claim.

Called by `train fact-spans-combiner` after the sentence combiner (training/grounding/combiner.py):
1. every word of every claim sentence of the span-labelled train answers (XSumFaith, WiCE,
   RAGTruth, FaithBench) becomes a row of `inference.narrowing.token_features`, the sentence's
   combiner P(unsupported) among them; a word is unsupported when at least `min_overlap` of its
   characters lie in a gold unsupported span;
2. scikit-learn gradient-boosted trees (or a logistic model) fit the rows, each source weighted
   like the combiner's (a source's rows share one total weight, times its multiplier);
3. the combiner picks the cut and the gap on dev character F1 (`word_scores` + `narrowing.marked_ranges`).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import numpy as np
from pydantic import Field

from autovalidators.inference.config import StrictModel
from autovalidators.inference.narrowing import TOKEN_FEATURE_NAMES, token_features

from autovalidators.training.grounding.selection import source_weights

logger = logging.getLogger(__name__)
NARROWER_FILE = "narrower.onnx"


class NarrowerConfig(StrictModel):
    enabled: bool = True
    model: Literal["trees", "logistic"] = "trees"
    n_estimators: int = Field(200, gt=0)
    learning_rate: float = Field(0.05, gt=0)
    max_depth: int = Field(3, gt=0)
    subsample: float = Field(0.8, gt=0, le=1)
    min_samples_leaf: int = Field(50, gt=0)
    logistic_c: float = Field(0.3, gt=0)
    min_overlap: float = Field(0.5, gt=0, le=1, description="share of a word's characters in gold spans")
    cuts: list[float] = Field(default_factory=lambda: [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5])
    gaps: list[int] = Field(default_factory=lambda: [0, 1, 2])
    # The cut for task types without span-labelled dev answers of their own (QA: RAGTruth's QA
    # rows come without their passages) is chosen on these sets' dev character F1: RAGTruth's
    # answers are the ones that look like production RAG answers.
    default_cut_sources: list[str] = Field(default_factory=lambda: ["ragtruth"])


def _word_labels(record: dict, signal, min_overlap: float) -> np.ndarray:
    gold = np.zeros(len(record["text"]) + 1, dtype=bool)
    for start, end in record["unsupported"]:
        gold[start:end] = True
    offset = signal.sentence.start
    return np.asarray([gold[t.start + offset:t.end + offset].mean() >= min_overlap for t in signal.tokens], dtype=bool)


def word_rows(data, unsupported: np.ndarray, min_overlap: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, labels and source names of every word of the span-labelled answers' claim sentences."""
    keys, blocks = claim_word_rows(data, unsupported)
    if not keys:
        raise ValueError("no span-labelled answers to train the narrower on (XSumFaith, WiCE, RAGTruth, FaithBench)")
    labels, sources = [], []
    for (index, claim), block in zip(keys, blocks):
        record = data.records[index]
        signal = [s for s in data.signals[index] if not s.is_noise][claim]
        labels.append(_word_labels(record, signal, min_overlap))
        sources += [record["source"]] * len(block)
    return np.concatenate(blocks), np.concatenate(labels), np.asarray(sources)


def fit_narrower(data, unsupported: np.ndarray, config: NarrowerConfig, multipliers: dict[str, float],
                 seed: int) -> tuple[Any, dict[str, Any]]:
    rows, labels, sources = word_rows(data, unsupported, config.min_overlap)
    weights = source_weights(sources, multipliers)
    if config.model == "trees":
        from sklearn.ensemble import GradientBoostingClassifier

        model = GradientBoostingClassifier(n_estimators=config.n_estimators, learning_rate=config.learning_rate,
                                           max_depth=config.max_depth, subsample=config.subsample,
                                           min_samples_leaf=config.min_samples_leaf, random_state=seed)
        model.fit(rows, labels.astype(np.int64), sample_weight=weights)
    else:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), LogisticRegression(C=config.logistic_c, max_iter=3000))
        model.fit(rows, labels.astype(np.int64), logisticregression__sample_weight=weights)
    logger.info("narrower: %d words (%d unsupported) from %s", len(labels), int(labels.sum()),
                ", ".join(sorted(set(map(str, sources)))))
    return model, {"words": int(len(labels)), "unsupported_words": int(labels.sum()),
                   "features": list(TOKEN_FEATURE_NAMES)}


def claim_word_rows(data, unsupported: np.ndarray) -> tuple[list[tuple[int, int]], list[np.ndarray]]:
    """(answer index, claim index) keys and each claim's word rows, for the span-labelled answers."""
    keys, rows = [], []
    for index, (record, signals, context) in enumerate(zip(data.records, data.signals, data.contexts)):
        if record["granularity"] != "span":
            continue
        claims = [s for s in signals if not s.is_noise]
        for claim, (signal, p) in enumerate(zip(claims, unsupported[data.owners == index])):
            keys.append((index, claim))
            rows.append(token_features(signal, context, float(p)))
    return keys, rows


def word_scores(model: Any, keys: list[tuple[int, int]], rows: list[np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
    """Key -> P(unsupported word) per word (`claim_word_rows`' output, one model call)."""
    stacked = np.concatenate(rows) if rows else np.zeros((0, len(TOKEN_FEATURE_NAMES)), dtype=np.float32)
    scores = model.predict_proba(stacked)[:, 1] if len(stacked) else np.zeros(0)
    out, position = {}, 0
    for key, block in zip(keys, rows):
        out[key] = scores[position:position + len(block)]
        position += len(block)
    return out
