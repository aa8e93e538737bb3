"""The fact-span combiner: judged sentences -> gradient-boosted trees over grounding features.

`autovalidators train fact-spans-combiner` (configs/fact_spans_combiner.yaml):
1. reads `prepare grounding`'s answers/{train,dev}.jsonl, capped per source;
2. computes every sentence's features with the runtime code (`inference.grounding`) and, when a
   cross-encoder is configured, its P(supported) for (best chunk, sentence) with the runtime
   `PairScorer` on the exported int8 model: the combiner learns from the scores it will be served;
3. labels sentences (`data_prep.fact_spans.grounding.sentence_labels`: spans where a set has them,
   a response label only where it pins a sentence down) and fits scikit-learn's
   GradientBoostingClassifier, sources weighted so a few thousand FIB pairs cannot drown the
   hundred RAGTruth answers that look like production;
4. on dev, picks the answer-level threshold (best F1 on `threshold_sources`) and the span mode
   (best character F1 on span-labelled dev answers);
5. writes `combiner.onnx` (skl2onnx, checked against scikit-learn on dev rows) and `combiner.json`
   (config, features, threshold, span mode, dev metrics) into `output_dir`.
`autovalidators export fact-spans-combiner` then assembles `models/fact_spans/`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import Field

from autovalidators.data_prep.fact_spans.grounding import sentence_labels
from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.config import StrictModel
from autovalidators.inference.grounding import (FEATURE_NAMES, NLI_FEATURE, TASKS, ContextIndex, SentenceSignals,
                                                sentence_signals, task_of)

logger = logging.getLogger(__name__)
COMBINER_FILE = "combiner.onnx"
SCORE_CACHE = "score_cache.json"  # beside the cross-encoder: its scores of (evidence, sentence) pairs
# (span mode, phrase gap) candidates; dev character F1 picks one.
SPAN_MODES = (("sentence", 0), ("phrases", 1), ("phrases", 2), ("phrases", 4), ("phrases", 8))


class TreesConfig(StrictModel):
    """scikit-learn GradientBoostingClassifier settings; shallow trees generalise across sets."""

    n_estimators: int = Field(300, gt=0)
    learning_rate: float = Field(0.05, gt=0)
    max_depth: int = Field(3, gt=0)
    subsample: float = Field(0.8, gt=0, le=1)
    min_samples_leaf: int = Field(40, gt=0)


class CombinerConfig(StrictModel):
    # "trees": gradient-boosted trees (interactions, e.g. overlap matters less when the cross-
    # encoder is sure); "logistic": standardised features + logistic regression (monotone in each
    # feature, so it cannot learn a dataset's quirks that do not carry to another's).
    model: Literal["trees", "logistic"] = "trees"
    logistic_c: float = Field(0.3, gt=0, description="inverse L2 strength of the logistic model")
    # Features held at 0 while fitting, so the model cannot use them (the runtime still computes
    # them): answer length and context length mostly tell the judged sets apart, not good
    # sentences from bad ones, and a dataset's prior does not carry to another's answers.
    ignore_features: list[str] = Field(default_factory=list)
    data_dir: str = "prepared/grounding"
    # Exported grounding cross-encoder (model.onnx + tokenizer.json + manifest.json), or null for
    # a lexical-only combiner (the nli feature then stays constant and the trees ignore it).
    cross_encoder: str | None = "runs/grounding/export"
    max_answers_per_source: int = Field(2500, gt=0, description="train answers per source, at most")
    # Source weight multipliers (after each source is normalised to the same total weight).
    source_weights: dict[str, float] = Field(default_factory=lambda: {"ragtruth": 3.0, "faithbench": 2.0})
    trees: TreesConfig = TreesConfig()
    threshold_sources: list[str] = Field(default_factory=lambda: ["ragtruth"],
                                         description="dev sources whose answer-level F1 picks the threshold")
    min_task_answers: int = Field(25, gt=0, description="dev answers a task needs for a threshold of its own")
    span_mode_sources: list[str] = Field(default_factory=lambda: ["ragtruth", "faithbench"],
                                         description="dev sources whose character F1 picks the span mode")
    seed: int = 13
    threads: int = Field(1, gt=0, description="onnxruntime threads for the cross-encoder")
    output_dir: str = "runs/fact_spans_combiner"


class Featurised:
    """Sentence rows of a set of answers: features, labels (-1 unknown) and their answer."""

    def __init__(self, records: list[dict], signals: list[list[SentenceSignals]]):
        self.records, self.signals = records, signals
        rows, labels, owners = [], [], []
        for index, (record, sentences) in enumerate(zip(records, signals)):
            claims = [s for s in sentences if not s.is_noise]
            for signal, label in zip(claims, sentence_labels(record, claims)):
                rows.append(signal.features)
                labels.append(label)
                owners.append(index)
        self.features = np.stack(rows) if rows else np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.owners = np.asarray(owners, dtype=np.int64)


def featurise(records: list[dict], scorer: Any | None, cache: Path | None = None) -> Featurised:
    """Features of every sentence; cross-encoder scores are reused from `cache` (a JSON file of
    pair hash -> score kept beside the cross-encoder, so re-fitting the trees is minutes, not an
    hour of scoring) and new ones added to it."""
    signals = [sentence_signals(r["text"], ContextIndex.build(r["context"])) for r in records]
    if scorer is not None:
        claims = [s for sentences in signals for s in sentences if not s.is_noise]
        known = json.loads(cache.read_text()) if cache and cache.is_file() else {}
        keys = [hashlib.sha1(f"{s.evidence}\x00{s.sentence.text}".encode()).hexdigest() for s in claims]
        missing = sorted({k: i for i, k in enumerate(keys) if k not in known}.items(), key=lambda kv: kv[1])
        logger.info("cross-encoder: scoring %d of %d sentences (%d cached)", len(missing), len(claims),
                    len(claims) - len(missing))
        scores = scorer.scores([(claims[i].evidence, claims[i].sentence.text) for _, i in missing])
        known.update({k: float(score) for (k, _), score in zip(missing, scores)})
        if cache and missing:
            cache.write_text(json.dumps(known))
        for signal, key in zip(claims, keys):
            signal.features[NLI_FEATURE] = known[key]
    return Featurised(records, signals)


def _capped(records: list[dict], cap: int, seed: int) -> list[dict]:
    by_source: dict[str, list[dict]] = {}
    for record in records:
        by_source.setdefault(record["source"], []).append(record)
    kept = []
    for source, members in sorted(by_source.items()):
        if len(members) > cap:
            members = random.Random(f"{seed}:{source}").sample(members, cap)
        kept += members
    return kept


def sample_weights(data: Featurised, config: CombinerConfig) -> np.ndarray:
    """Each source gets the same total weight (times its multiplier), split over its rows."""
    sources = np.asarray([data.records[o]["source"] for o in data.owners])
    weights = np.zeros(len(sources))
    for source in set(sources):
        mask = sources == source
        weights[mask] = config.source_weights.get(str(source), 1.0) / mask.sum()
    return weights * len(weights) / weights.sum()


def answer_scores(data: Featurised, unsupported: np.ndarray) -> np.ndarray:
    """Per answer, the highest sentence P(unsupported) (0 for answers without claim sentences)."""
    scores = np.zeros(len(data.records))
    np.maximum.at(scores, data.owners, unsupported)
    return scores


# Thresholds stay inside (0, 1): a cut of 0 would flag every answer whatever its score, and the
# runtime's calibration (threshold -> 0.5) needs room on both sides.
MIN_THRESHOLD, MAX_THRESHOLD = 0.01, 0.99


def best_f1_threshold(scores: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """The score cut with the best F1 (ties: the lower cut), clipped into [MIN_THRESHOLD, MAX_THRESHOLD]."""
    best = (0.5, -1.0)
    for cut in np.clip(np.unique(scores), MIN_THRESHOLD, MAX_THRESHOLD):
        predicted = scores >= cut
        tp = float((predicted & gold).sum())
        f1 = 2 * tp / (predicted.sum() + gold.sum()) if predicted.sum() + gold.sum() else 0.0
        if f1 > best[1]:
            best = (float(cut), f1)
    return best


def char_f1(data: Featurised, unsupported: np.ndarray, threshold: float, span_mode: str,
            sources: Sequence[str] = (), phrase_gap: int = 1) -> float:
    """Micro character F1 of HALLUCINATION spans on the span-labelled answers (of `sources`, if given)."""
    from autovalidators.inference.validators.grounding_spans import sentence_spans

    tp = fp = fn = 0
    for index, (record, signals) in enumerate(zip(data.records, data.signals)):
        if record["granularity"] != "span" or (sources and record["source"] not in sources):
            continue
        text = record["text"]
        gold = np.zeros(len(text), dtype=bool)
        for start, end in record["unsupported"]:
            gold[start:end] = True
        predicted = np.zeros(len(text), dtype=bool)
        for span in sentence_spans(text, signals, unsupported[data.owners == index], threshold, span_mode, phrase_gap):
            if span.label.value == "HALLUCINATION":
                predicted[span.start:span.end] = True
        tp += int((gold & predicted).sum())
        fp += int((predicted & ~gold).sum())
        fn += int((gold & ~predicted).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def to_onnx(model: Any, n_features: int) -> bytes:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    onnx_model = convert_sklearn(model, initial_types=[("features", FloatTensorType([None, n_features]))],
                                 options={id(model): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    return onnx_model.SerializeToString()


def load_scorer(config: CombinerConfig):
    if not config.cross_encoder:
        return None, None
    from autovalidators.inference.manifest import load_manifest
    from autovalidators.inference.validators.pair_scorer import PairScorer

    folder = Path(config.cross_encoder)
    manifest = load_manifest(folder)
    scorer = PairScorer(folder / manifest.model_file, folder / manifest.tokenizer_file,
                        max_length=manifest.window.max_length, positive=manifest.labels.index("supported"),
                        threads=config.threads)
    return scorer, manifest


def train_combiner(config: CombinerConfig, config_source: str = "") -> dict[str, Any]:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    data_dir = Path(config.data_dir)
    train_records = _capped(list(read_jsonl(data_dir / "answers" / "train.jsonl")), config.max_answers_per_source,
                            config.seed)
    dev_records = list(read_jsonl(data_dir / "answers" / "dev.jsonl"))
    scorer, cross_manifest = load_scorer(config)
    logger.info("featurising %d train and %d dev answers", len(train_records), len(dev_records))
    cache = Path(config.cross_encoder) / SCORE_CACHE if config.cross_encoder else None
    train, dev = featurise(train_records, scorer, cache), featurise(dev_records, scorer, cache)
    unknown_names = sorted(set(config.ignore_features) - set(FEATURE_NAMES))
    if unknown_names:
        raise ValueError(f"ignore_features: unknown feature(s) {unknown_names}; known: {', '.join(FEATURE_NAMES)}")
    for name in config.ignore_features:
        train.features[:, FEATURE_NAMES.index(name)] = 0.0
    known = train.labels >= 0
    # Class 0 = unsupported: the ONNX graph's probabilities[:, 0] is P(unsupported).
    weights = sample_weights(train, config)[known]
    if config.model == "trees":
        model = GradientBoostingClassifier(random_state=config.seed, **config.trees.model_dump())
        model.fit(train.features[known], train.labels[known], sample_weight=weights)
    else:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), LogisticRegression(C=config.logistic_c, max_iter=5000))
        model.fit(train.features[known], train.labels[known], logisticregression__sample_weight=weights)
    dev_unsupported = model.predict_proba(dev.features)[:, 0]

    metrics: dict[str, Any] = {"sentences": {"train": int(known.sum()), "dev": int((dev.labels >= 0).sum())}}
    dev_known = dev.labels >= 0
    sources = np.asarray([dev.records[o]["source"] for o in dev.owners])
    dev_tasks = np.asarray([task_of(dev.records[o].get("question", ""), dev.records[o]["context"]) for o in dev.owners])
    metrics["dev_sentence_auc"] = {
        str(s): float(roc_auc_score(dev.labels[m] == 0, dev_unsupported[m]))
        for s in sorted(set(sources)) for m in [dev_known & (sources == s)] if 0 < (dev.labels[m] == 0).sum() < m.sum()}
    for task in TASKS:  # RAGTruth per task: the target domain
        m = dev_known & (sources == "ragtruth") & (dev_tasks == task)
        if 0 < (dev.labels[m] == 0).sum() < m.sum():
            metrics["dev_sentence_auc"][f"ragtruth/{task}"] = float(roc_auc_score(dev.labels[m] == 0, dev_unsupported[m]))
    scores = answer_scores(dev, dev_unsupported)
    gold = np.asarray([r["label"] == 0 for r in dev.records])
    chosen = np.asarray([r["source"] in config.threshold_sources for r in dev.records])
    if not chosen.any():
        raise ValueError(f"no dev answers from threshold_sources {config.threshold_sources}")
    threshold, dev_f1 = best_f1_threshold(scores[chosen], gold[chosen])
    metrics["threshold"] = {"value": threshold, "dev_example_f1": dev_f1, "sources": config.threshold_sources}
    # A task with enough dev answers gets its own threshold: RAGTruth's Data2txt answers
    # hallucinate three times as often as its summaries, so one cut cannot serve both.
    tasks = np.asarray([task_of(r.get("question", ""), r["context"]) for r in dev.records])
    thresholds = {"hallucination": threshold}
    for task in TASKS:
        mask = chosen & (tasks == task)
        if mask.sum() >= config.min_task_answers and 0 < gold[mask].sum() < mask.sum():
            cut, f1 = best_f1_threshold(scores[mask], gold[mask])
            thresholds[f"hallucination/{task}"] = cut
            metrics["threshold"][task] = {"value": cut, "dev_example_f1": f1, "answers": int(mask.sum())}
    span_scores = {f"{mode}/{gap}": char_f1(dev, dev_unsupported, threshold, mode, config.span_mode_sources, gap)
                   for mode, gap in SPAN_MODES}
    span_mode, phrase_gap = max(SPAN_MODES, key=lambda m: span_scores[f"{m[0]}/{m[1]}"])
    metrics["dev_char_f1"] = span_scores
    importance = (model.feature_importances_ if config.model == "trees"
                  else np.abs(model[-1].coef_[0]))  # |coefficient| of a standardised feature
    metrics["feature_importance"] = dict(sorted(zip(FEATURE_NAMES, map(float, importance)), key=lambda kv: -kv[1]))

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    blob = to_onnx(model, len(FEATURE_NAMES))
    (out / COMBINER_FILE).write_bytes(blob)
    from autovalidators.inference.validators.grounding_spans import Combiner
    parity = float(np.abs(Combiner(out / COMBINER_FILE).unsupported(dev.features) - dev_unsupported).max())
    if parity > 1e-4:
        raise ValueError(f"combiner.onnx differs from scikit-learn by {parity:.2e} on dev (> 1e-4)")
    summary = {
        "config": config.model_dump(), "config_source": config_source, "features": list(FEATURE_NAMES),
        "threshold": threshold, "thresholds": thresholds, "span_mode": span_mode, "phrase_gap": phrase_gap, "onnx_parity_max_abs": parity, "metrics": metrics,
        "cross_encoder": None if cross_manifest is None else {
            "path": config.cross_encoder, "sha256": cross_manifest.model_sha256, "metrics": cross_manifest.metrics},
        "data": {"dir": str(data_dir), "train_answers": len(train_records), "dev_answers": len(dev_records),
                 "train_sha256": hashlib.sha256((data_dir / "answers" / "train.jsonl").read_bytes()).hexdigest()},
    }
    (out / "combiner.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
