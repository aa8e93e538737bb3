"""QA relevance: does this answer address this question? A sentence-pair classifier (0/1).

Input: `[CLS] question [SEP] answer [SEP]`, truncated longest-first (in practice the answer, since
questions are short) to `max_length`. Output: P(relevant) = softmax(logits)[1]. The decision
threshold is chosen on dev by `ExportConfig.threshold_rule` (default: best F1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from autovalidators.data_prep.qa_relevance import QARelevancePrepareConfig, prepare

from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import TaskSpec, best_threshold, probabilities

THRESHOLD_KEY = "relevant"


def encode_pair(tokenizer: Any, question: str, answer: str, max_length: int) -> dict[str, list[int]]:
    """The one pair encoding, shared by training and the onnxruntime validator (via `tokenizers`)."""
    tokenizer.enable_truncation(max_length, strategy="longest_first")
    tokenizer.no_padding()
    encoding = tokenizer.encode(question, answer)
    return {"input_ids": encoding.ids, "attention_mask": encoding.attention_mask,
            "token_type_ids": encoding.type_ids}


def ranking_metrics(scores: np.ndarray, labels: np.ndarray, groups: Sequence[str]) -> dict[str, float]:
    """Answer-selection MAP and MRR over the questions with at least one correct answer
    (the standard WikiQA protocol); ties are broken by input order."""
    by_group: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        by_group.setdefault(group, []).append(index)
    average_precisions, reciprocal_ranks = [], []
    for indices in by_group.values():
        group_labels = labels[indices]
        if group_labels.sum() == 0:
            continue
        order = np.argsort(-scores[indices], kind="stable")
        ranked = group_labels[order]
        hits = np.cumsum(ranked)
        positions = np.flatnonzero(ranked) + 1
        average_precisions.append(float(np.mean(hits[positions - 1] / positions)))
        reciprocal_ranks.append(1.0 / positions[0])
    if not average_precisions:
        return {"map": float("nan"), "mrr": float("nan"), "ranked_questions": 0}
    return {"map": float(np.mean(average_precisions)), "mrr": float(np.mean(reciprocal_ranks)),
            "ranked_questions": len(average_precisions)}


def classification_metrics(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score

    predicted = (scores >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(labels, predicted, average="binary", zero_division=0)
    auc = roc_auc_score(labels, scores) if 0 < labels.sum() < len(labels) else float("nan")
    return {"accuracy": float(accuracy_score(labels, predicted)), "precision": float(precision),
            "recall": float(recall), "f1": float(f1), "roc_auc": float(auc), "threshold": float(threshold)}


@dataclass
class PairSpec(TaskSpec):
    """A sentence-pair classifier over two record fields, P(positive) = softmax(logits)[1], one
    dev-chosen threshold: QA relevance (question, answer) and grounding (evidence, claim)."""

    first: str = "question"  # the record field encoded as the first segment
    second: str = "answer"
    threshold_key: str = THRESHOLD_KEY
    example: dict = field(default_factory=lambda: {
        "question": "When did the Normans reach Normandy?",
        "answer": "The Normans settled in Normandy in the 10th and 11th centuries."})

    def encode(self, tokenizer, record: dict, max_length: int) -> dict[str, Any]:
        features: dict[str, Any] = encode_pair(tokenizer, record[self.first], record[self.second], max_length)
        if "label" in record:
            features["labels"] = int(record["label"])
        return features

    def example_text(self) -> dict:
        return dict(self.example)

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """P(positive label) per pair."""
        return probabilities(logits, "single_label")[:, 1]

    def metrics(self, logits, records, thresholds=None) -> dict[str, float]:
        labels = np.asarray([int(r["label"]) for r in records])
        return classification_metrics(self.scores(logits), labels, (thresholds or {}).get(self.threshold_key, 0.5))

    def thresholds(self, logits, records, config) -> dict[str, float]:
        labels = np.asarray([int(r["label"]) for r in records])
        return {self.threshold_key: best_threshold(self.scores(logits), labels, config.threshold_rule,
                                                   config.target_precision)}


@dataclass
class QARelevanceSpec(PairSpec):
    """Adds WikiQA's answer-selection MAP/MRR (grouped by question) to the pair metrics: over all
    dev questions (`map`, `mrr`) and per source (`map_<source>`), so that early stopping can pick
    the checkpoint by the benchmark's own kind of question (`map_wikiqa_train`): the SQuAD-style
    sources rank their answer sentence first far more easily and dominate the pooled MAP."""

    def metrics(self, logits, records, thresholds=None) -> dict[str, float]:
        result = super().metrics(logits, records, thresholds)
        scores, labels = self.scores(logits), np.asarray([int(r["label"]) for r in records])
        groups = [r.get("group") or r["question"] for r in records]
        result.update(ranking_metrics(scores, labels, groups))
        by_source: dict[str, list[int]] = {}
        for index, record in enumerate(records):
            if record.get("source"):
                by_source.setdefault(record["source"], []).append(index)
        for source, indices in sorted(by_source.items()):
            ranked = ranking_metrics(scores[indices], labels[indices], [groups[i] for i in indices])
            if ranked["ranked_questions"]:
                result[f"map_{source}"] = ranked["map"]
        return result


SPEC = QARelevanceSpec(
    name="qa_relevance",
    labels=("irrelevant", "relevant"),
    problem_type="single_label",
    prepare_schema=QARelevancePrepareConfig,
    prepare_fn=prepare,
    main_metric="f1",
    window_aggregation="truncate_longest_first",
    benchmark="autovalidators.training.benchmarks.qa_relevance:benchmark",
    extra={"input": "[CLS] question [SEP] answer [SEP]", "score": "softmax(logits)[1]",
           "threshold_rule": "chosen on dev by export.threshold_rule (default best F1)"},
)

# The schema of configs/qa_relevance.yaml (prepare + train + export).
QARelevanceConfig = TaskConfig[QARelevancePrepareConfig]
