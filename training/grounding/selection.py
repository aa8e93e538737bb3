"""Model selection for the fact-span combiner on dev: answer calibration, thresholds, span mode.

- `fit_answer_calibration`: train answers' (worst sentence logit, log number of claim sentences)
  -> hallucinated, a weighted logistic model (`grounding_spans.AnswerCalibration`);
- `choose_threshold`: the answer-score cut with the best F1, either of the chosen sources' answers
  pooled or the mean of their per-source F1s (so a 235-answer set with a 93% hallucination rate
  cannot outvote a 56-answer one with 21%);
- `char_f1`: mean per-source character F1 of HALLUCINATION spans, produced exactly as the
  runtime produces them (`grounding_spans.sentence_spans`, `narrowing.marked_ranges`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from autovalidators.inference.grounding import logit
from autovalidators.inference.narrowing import marked_ranges
from autovalidators.inference.validators.grounding_spans import AnswerCalibration, sentence_spans

# Thresholds stay inside (0, 1): a cut of 0 would flag every answer whatever its score, and the
# runtime's calibration (threshold -> 0.5) needs room on both sides.
MIN_THRESHOLD, MAX_THRESHOLD = 0.01, 0.99


def source_weights(sources: np.ndarray, multipliers: dict[str, float]) -> np.ndarray:
    """Each source gets the same total weight (times its multiplier), split over its rows; mean 1."""
    weights = np.zeros(len(sources))
    for source in set(sources):
        mask = sources == source
        weights[mask] = multipliers.get(str(source), 1.0) / mask.sum()
    return weights * len(weights) / weights.sum()


def fit_answer_calibration(data, unsupported: np.ndarray, multipliers: dict[str, float]) -> AnswerCalibration:
    from sklearn.linear_model import LogisticRegression

    rows, labels, sources = [], [], []
    for index, record in enumerate(data.records):
        p = unsupported[data.owners == index]
        if len(p):
            rows.append([float(logit(p.max())), float(np.log(len(p)))])
            labels.append(int(record["label"] == 0))
            sources.append(record["source"])
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(np.asarray(rows), np.asarray(labels), sample_weight=source_weights(np.asarray(sources), multipliers))
    (max_logit, log_claims), intercept = model.coef_[0], model.intercept_[0]
    return AnswerCalibration(max_logit=float(max_logit), log_claims=float(log_claims), intercept=float(intercept))


def answer_level(data, unsupported: np.ndarray, calibration: AnswerCalibration) -> tuple[np.ndarray, np.ndarray]:
    """Per claim sentence its answer-scale score, and per answer the highest (0 without claims)."""
    sentence_scores = np.zeros(len(unsupported))
    answers = np.zeros(len(data.records))
    for index in range(len(data.records)):
        mask = data.owners == index
        if mask.any():
            sentence_scores[mask] = calibration.scores(unsupported[mask])
            answers[index] = sentence_scores[mask].max()
    return sentence_scores, answers


def best_f1_threshold(scores: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """The score cut with the best F1 (ties: the lower cut), clipped into [MIN_THRESHOLD, MAX_THRESHOLD]."""
    return choose_threshold(scores, gold, np.zeros(len(scores)), "pooled")


def choose_threshold(scores: np.ndarray, gold: np.ndarray, groups: np.ndarray, objective: str) -> tuple[float, float]:
    """The cut with the best pooled F1, or the best mean of per-group F1s (ties: the lower cut)."""
    members = [groups == g for g in sorted(set(groups.tolist()))]
    best = (0.5, -1.0)
    for cut in np.clip(np.unique(scores), MIN_THRESHOLD, MAX_THRESHOLD):
        predicted = scores >= cut
        parts = members if objective == "mean" else [np.ones(len(scores), dtype=bool)]
        f1s = []
        for mask in parts:
            tp = float((predicted & gold & mask).sum())
            denominator = float((predicted & mask).sum() + (gold & mask).sum())
            f1s.append(2 * tp / denominator if denominator else 0.0)
        f1 = float(np.mean(f1s))
        if f1 > best[1]:
            best = (float(cut), f1)
    return best


def char_f1(data, sentence_scores: np.ndarray, thresholds: np.ndarray, span_mode: str, sources: Sequence[str],
            phrase_gap: int = 1, words: dict[tuple[int, int], np.ndarray] | None = None, cut: float = 0.5,
            gap: int = 0, answers: np.ndarray | None = None) -> float:
    """Mean over `sources` of the micro character F1 of HALLUCINATION spans on span-labelled answers
    (`thresholds`: per answer; `words`: the narrower's word scores for span_mode "words";
    `answers`: a boolean mask restricting the answers, e.g. to one task type)."""
    counts: dict[str, list[int]] = {}
    for index, (record, signals) in enumerate(zip(data.records, data.signals)):
        if record["granularity"] != "span" or record["source"] not in sources:
            continue
        if answers is not None and not answers[index]:
            continue
        scores = sentence_scores[data.owners == index]
        narrowed = None
        if span_mode == "words":
            claims = [s for s in signals if not s.is_noise]
            narrowed = {c: marked_ranges(claims[c], words[(index, c)], cut, gap)
                        for c in np.flatnonzero(scores >= thresholds[index])}
        text = record["text"]
        gold, predicted = np.zeros(len(text), dtype=bool), np.zeros(len(text), dtype=bool)
        for start, end in record["unsupported"]:
            gold[start:end] = True
        for span in sentence_spans(text, signals, scores, thresholds[index], span_mode, phrase_gap, narrowed):
            if span.label.value == "HALLUCINATION":
                predicted[span.start:span.end] = True
        tally = counts.setdefault(record["source"], [0, 0, 0])
        tally[0] += int((gold & predicted).sum())
        tally[1] += int((predicted & ~gold).sum())
        tally[2] += int((gold & ~predicted).sum())
    f1s = [2 * tp / (2 * tp + fp + fn) if tp else 0.0 for tp, fp, fn in counts.values()]
    return float(np.mean(f1s)) if f1s else 0.0
