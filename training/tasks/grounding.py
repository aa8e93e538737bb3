"""Grounding: is this claim (one answer sentence) supported by this evidence (one context chunk)?

A sentence-pair cross-encoder, NLI-style (as MiniCheck, AlignScore and HHEM are): input
`[CLS] evidence [SEP] claim [SEP]`, truncated longest-first (the evidence: claims are short) to
`max_length`; output P(supported) = softmax(logits)[1]. Trained on NLI pairs plus the judged
sentence claims of `prepare grounding`, each claim paired with its best context chunk
(`inference.grounding`), so training sees the evidence the runtime will give it.

Its score is one feature of the fact-span combiner (`training/combiner.py`), not a decision by
itself: on long-form answers lexical overlap is the stronger signal and the combiner weighs both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autovalidators.data_prep.fact_spans.grounding import GroundingPrepareConfig, prepare

from ..config import TaskConfig
from .base import TaskSpec, best_threshold, probabilities
from .qa_relevance import classification_metrics, encode_pair

THRESHOLD_KEY = "supported"


class GroundingSpec(TaskSpec):
    def encode(self, tokenizer, record: dict, max_length: int) -> dict[str, Any]:
        features: dict[str, Any] = encode_pair(tokenizer, record["evidence"], record["claim"], max_length)
        if "label" in record:
            features["labels"] = int(record["label"])
        return features

    def example_text(self) -> dict:
        return {"evidence": "The Normans gave their name to Normandy, a region in France, in the 10th century.",
                "claim": "Normandy was named after the Normans."}

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """P(supported) per pair."""
        return probabilities(logits, "single_label")[:, 1]

    def metrics(self, logits, records, thresholds=None) -> dict[str, float]:
        labels = np.asarray([int(r["label"]) for r in records])
        return classification_metrics(self.scores(logits), labels, (thresholds or {}).get(THRESHOLD_KEY, 0.5))

    def thresholds(self, logits, records, config) -> dict[str, float]:
        labels = np.asarray([int(r["label"]) for r in records])
        return {THRESHOLD_KEY: best_threshold(self.scores(logits), labels, config.threshold_rule,
                                              config.target_precision)}


SPEC = GroundingSpec(
    name="grounding",
    labels=("unsupported", "supported"),
    problem_type="single_label",
    prepare_schema=GroundingPrepareConfig,
    prepare_fn=prepare,
    main_metric="roc_auc",
    window_aggregation="best_chunk",
    extra={"input": "[CLS] evidence [SEP] claim [SEP]", "score": "softmax(logits)[1]",
           "evidence": "the claim's best context chunk by shared content stems (inference.grounding)"},
)

GroundingConfig = TaskConfig[GroundingPrepareConfig]
