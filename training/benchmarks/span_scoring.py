"""Scoring shared by the fact-span benchmarks (token model and sentence grounding): held-out
groups, example-level, sentence-level and character-span P/R/F1, the baselines scored beside a model,
and the paired bootstrap. Kept apart so neither benchmark imports the other's module.

Sentence level is how long-form answers are judged (a person marks each sentence supported or not):
a sentence is gold when a labelled span touches it and flagged when a predicted HALLUCINATION span
does, so marking the right sentence counts in full however many of its characters a span covers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.case import Case
from autovalidators.inference.results import FactSpansOutput, Span, SpanLabel
from autovalidators.inference.text import split_sentences
from autovalidators.inference.validators.base import Validator, ValidatorInfo
from autovalidators.inference.validators.heuristic import HeuristicFactSpans
from autovalidators.training.benchmarks.common import f1_from_counts

BATCH = 8  # cases per validator call while scoring (scores do not depend on it)

def load_heldout(data_dir: Path) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Benchmark groups ("ragtruth/Summary", "ragtruth/Data2txt", "faithbench", and one per other
    `heldout/<name>.jsonl`, e.g. "user" from `prepare fact-spans --data`) and excluded counts."""
    groups: dict[str, list[dict]] = {}
    excluded: dict[str, int] = {}
    for path in sorted((data_dir / "heldout").glob("*.jsonl")):
        dataset = path.stem
        for record in read_jsonl(path):
            name = f"ragtruth/{record['task_type']}" if dataset == "ragtruth" else dataset
            if not record.get("grounding_usable", True) or not record["context"].strip():
                excluded[name] = excluded.get(name, 0) + 1
                continue
            groups.setdefault(name, []).append(record)
    if not groups:
        raise FileNotFoundError(f"{data_dir}/heldout: no benchmark data; run the fact-spans prepare step")
    return groups, excluded


def _chars(ranges: Sequence[tuple[int, int]], length: int) -> np.ndarray:
    mask = np.zeros(length, dtype=bool)
    for start, end in ranges:
        mask[start:end] = True
    return mask


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


class AlwaysHallucinated:
    """Baseline: every answer hallucinated from its first character to its last."""

    info = ValidatorInfo("fact_spans", "baseline", "always-hallucinated")

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        return [FactSpansOutput(applies=True, hallucinated=True, hallucination_score=1.0, precision=0.0,
                                spans=(Span(0, len(c.answer), SpanLabel.HALLUCINATION, 1.0, c.answer),),
                                source="baseline") for c in cases]


# Baselines scored beside the model; each is a fact-span validator needing no model files.
BASELINES = {"always_hallucinated": AlwaysHallucinated, "heuristic": HeuristicFactSpans}


def score_baselines(groups: dict[str, list[dict]]) -> dict[str, dict[str, Any]]:
    """`score_group` of every baseline on every group: {baseline: {group: scores}}."""
    return {name: add_ragtruth_total({group: score_group(factory(), records)
                                      for group, records in sorted(groups.items())})
            for name, factory in BASELINES.items()}


def add_ragtruth_total(by_group: dict[str, Any]) -> dict[str, Any]:
    """Adds "ragtruth/all": the RAGTruth tasks pooled (the issue's target is over all held-out
    RAGTruth responses), from the per-example predictions already made."""
    pooled = [p for group, r in sorted(by_group.items()) if group.startswith("ragtruth/") and "predictions" in r
              for p in r["predictions"]]
    if pooled:
        by_group["ragtruth/all"] = {**summarise(pooled), "predictions": pooled}
    return by_group


def score_group(validator: Validator, records: list[dict]) -> dict[str, Any]:
    """Example- and character-level metrics plus per-example predictions for one group."""
    cases = [Case(id=r["id"], question=r["question"], context=[r["context"]], answer=r["answer"]) for r in records]
    outputs = []
    for start in range(0, len(cases), BATCH):
        outputs += validator.predict(cases[start:start + BATCH])
    predictions = []
    for record, output in zip(records, outputs):
        gold_ranges = [(s["start"], s["end"]) for s in record["spans"] if s["label"] == "HALLUCINATION"]
        pred_ranges = [(s.start, s.end) for s in output.spans if s.label is SpanLabel.HALLUCINATION]
        length = len(record["answer"])
        keep = ~_chars([(r["start"], r["end"]) for r in record.get("ignored", [])], length)
        gold, pred = _chars(gold_ranges, length) & keep, _chars(pred_ranges, length) & keep
        predictions.append({"id": record["id"], "gold": bool(gold_ranges), "score": output.hallucination_score,
                            "predicted": bool(output.hallucinated), "precision": output.precision,
                            "recall": output.recall, "gold_spans": gold_ranges, "predicted_spans": pred_ranges,
                            "char_tp": int((gold & pred).sum()), "char_fp": int((pred & ~gold).sum()),
                            "char_fn": int((gold & ~pred).sum()),
                            **sentence_counts(record["answer"], gold, pred)})
    return {**summarise(predictions), "predictions": predictions}


def sentence_counts(text: str, gold: np.ndarray, pred: np.ndarray) -> dict[str, int]:
    """Sentences of `text` that a gold / predicted character (masks over `text`) falls in: true and false
    positives and false negatives at sentence level."""
    sentences = [(bool(gold[s.start:s.end].any()), bool(pred[s.start:s.end].any())) for s in split_sentences(text)]
    return {"sentence_tp": sum(g and p for g, p in sentences), "sentence_fp": sum(p and not g for g, p in sentences),
            "sentence_fn": sum(g and not p for g, p in sentences)}


def summarise(predictions: Sequence[dict]) -> dict[str, Any]:
    """Example-level and character-level (micro) P/R/F1 of per-example predictions."""
    example = _prf(tp=sum(p["gold"] and p["predicted"] for p in predictions),
                   fp=sum(p["predicted"] and not p["gold"] for p in predictions),
                   fn=sum(p["gold"] and not p["predicted"] for p in predictions))
    char = _prf(tp=sum(p["char_tp"] for p in predictions), fp=sum(p["char_fp"] for p in predictions),
                fn=sum(p["char_fn"] for p in predictions))
    result = {"examples": len(predictions), "hallucinated": sum(p["gold"] for p in predictions),
              "example": example, "char": char}
    if predictions and all("sentence_tp" in p for p in predictions):
        result["sentence"] = _prf(tp=sum(p["sentence_tp"] for p in predictions),
                                  fp=sum(p["sentence_fp"] for p in predictions),
                                  fn=sum(p["sentence_fn"] for p in predictions))
    return result


def paired_bootstrap(model: Sequence[dict], baseline: Sequence[dict], resamples: int = 2000,
                     seed: int = 13) -> dict[str, dict[str, float]]:
    """Model minus baseline example F1 and character F1 on the same rows (per-example predictions of
    `score_group`/`score_judged`, same order), with a paired bootstrap over examples: the observed
    difference, its 95% interval and the share of resamples where the model is not better. With
    100-odd answers a few points of F1 are noise; this says which differences are not."""
    if [p["id"] for p in model] != [p["id"] for p in baseline]:
        raise ValueError("paired_bootstrap: model and baseline predictions are not on the same rows")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(model), size=(resamples, len(model))) if len(model) else np.zeros((0, 0), dtype=int)

    def f1s(predictions: Sequence[dict]) -> dict[str, tuple[np.ndarray, float]]:
        gold = np.asarray([p["gold"] for p in predictions], dtype=bool)
        predicted = np.asarray([p["predicted"] for p in predictions], dtype=bool)
        columns = {"example_f1": ((gold & predicted), (predicted & ~gold), (gold & ~predicted))}
        # character F1 only where the rows have spans (`score_judged` marks response-labelled rows)
        if all("char_tp" in p for p in predictions) and any(p.get("granularity", "span") == "span"
                                                             for p in predictions):
            columns["char_f1"] = tuple(np.asarray([p[k] for p in predictions], dtype=np.float64)
                                       for k in ("char_tp", "char_fp", "char_fn"))
            if all("sentence_tp" in p for p in predictions):
                columns["sentence_f1"] = tuple(np.asarray([p[k] for p in predictions], dtype=np.float64)
                                               for k in ("sentence_tp", "sentence_fp", "sentence_fn"))
        out = {}
        for name, (tp, fp, fn) in columns.items():
            tp, fp, fn = (np.asarray(c, dtype=np.float64) for c in (tp, fp, fn))
            out[name] = (f1_from_counts(tp[picks].sum(1), fp[picks].sum(1), fn[picks].sum(1)),
                         float(f1_from_counts(tp.sum(keepdims=True), fp.sum(keepdims=True), fn.sum(keepdims=True))[0]))
        return out

    ours, theirs = f1s(model), f1s(baseline)
    result = {}
    for name in [n for n in ours if n in theirs]:  # example, character, sentence: a stable order
        differences = ours[name][0] - theirs[name][0]
        low, high = np.quantile(differences, [0.025, 0.975]) if len(differences) else (0.0, 0.0)
        result[name] = {"difference": ours[name][1] - theirs[name][1], "low": float(low), "high": float(high),
                        "p_not_better": float(np.mean(differences <= 0)) if len(differences) else 1.0}
    return result
