"""The fact-span combiner: judged sentences -> one learned scorer over grounding features.

`autovalidators train fact-spans-combiner` (configs/fact_spans_combiner.yaml):
1. reads `prepare grounding`'s answers/{train,dev}.jsonl, capped per source;
2. computes every sentence's features with the runtime code (`inference.grounding`) and, when a
   cross-encoder is configured, its P(supported) for (best chunk, sentence) with the runtime
   `PairScorer` on the exported int8 model: the combiner learns from the scores it will be served;
3. labels sentences (`data_prep.fact_spans.grounding.sentence_labels`: spans where a set has them,
   a response label only where it pins a sentence down) and fits a logistic model (or
   gradient-boosted trees), sources weighted so a few thousand FIB pairs cannot drown the
   hundred RAGTruth answers that look like production;
4. fits the answer calibration (worst sentence and number of claim sentences -> answer score) on
   train answers and, on dev, picks the thresholds per task type (`combiner_selection`);
5. fits the token narrower (`training.narrower`) and picks the span mode and word cuts on dev
   character F1;
6. writes `combiner.onnx` and `narrower.onnx` (skl2onnx, each checked against scikit-learn on dev
   rows) and `combiner.json` (config, features, thresholds, calibration, span mode, dev metrics).
`autovalidators export fact-spans-combiner` then assembles `models/fact_spans/`.
"""

from __future__ import annotations

import dataclasses
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

from autovalidators.inference.narrowing import TOKEN_FEATURE_NAMES
from autovalidators.inference.validators.grounding_spans import AnswerCalibration

from autovalidators.training.grounding.selection import answer_level, char_f1, choose_threshold, fit_answer_calibration, source_weights
from autovalidators.training.grounding.narrower import NARROWER_FILE, NarrowerConfig, claim_word_rows, fit_narrower, word_scores

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
    threshold_sources: list[str] = Field(default_factory=lambda: ["ragtruth", "faithbench", "xsumfaith"],
                                         description="dev sources whose answer-level F1 picks the threshold")
    # "mean": the cut with the best mean of the sources' F1s (each set counts once, whatever its
    # size or hallucination rate); "pooled": the best F1 of all their answers together.
    threshold_objective: Literal["mean", "pooled"] = "mean"
    # Fit the answer calibration (worst sentence's logit and log number of claim sentences ->
    # P(answer hallucinated), `grounding_spans.AnswerCalibration`) on train answers; false = plain max.
    answer_calibration: bool = True
    narrower: NarrowerConfig = NarrowerConfig()
    min_task_answers: int = Field(25, gt=0, description="dev answers a task needs for a threshold of its own")
    span_mode_sources: list[str] = Field(default_factory=lambda: ["ragtruth", "faithbench", "xsumfaith"],
                                         description="dev sources whose mean character F1 picks the span mode")
    seed: int = 13
    threads: int = Field(1, gt=0, description="onnxruntime threads for the cross-encoder")
    output_dir: str = "runs/fact_spans_combiner"


class Featurised:
    """Sentence rows of a set of answers: features, labels (-1 unknown) and their answer."""

    def __init__(self, records: list[dict], signals: list[list[SentenceSignals]], contexts: list[ContextIndex]):
        self.records, self.signals, self.contexts = records, signals, contexts
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

    def subset(self, keep: Sequence[bool]) -> "Featurised":
        """The answers where `keep` is true (features copied: fitting on a subset changes nothing here)."""
        chosen = [i for i, flag in enumerate(keep) if flag]
        return Featurised([self.records[i] for i in chosen], [self.signals[i] for i in chosen],
                          [self.contexts[i] for i in chosen])


class MemoScorer:
    """A cross-encoder whose scores are kept by (evidence, sentence) and saved to `path` (JSON of
    pair hash -> score beside the cross-encoder), so re-fitting the combiner, or fitting it once per
    left-out set, is minutes, not an hour of scoring; the scorer is deterministic per pair."""

    def __init__(self, scorer: Any, path: Path | None):
        self.scorer, self.path = scorer, path
        self.known: dict[str, float] = json.loads(path.read_text()) if path and path.is_file() else {}
        self.added = 0

    @staticmethod
    def key(evidence: str, sentence: str) -> str:
        return hashlib.sha1(f"{evidence}\x00{sentence}".encode()).hexdigest()

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        keys = [self.key(*pair) for pair in pairs]
        missing = {k: pair for k, pair in zip(keys, pairs) if k not in self.known}
        logger.debug("cross-encoder: scoring %d of %d pairs (%d cached)", len(missing), len(pairs),
                     len(pairs) - len(missing))
        if missing:
            fresh = self.scorer.scores(list(missing.values()))
            self.known.update({k: float(score) for k, score in zip(missing, fresh)})
            self.added += len(missing)
        return np.asarray([self.known[k] for k in keys], dtype=np.float64)

    def save(self) -> None:
        if self.added and self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.known))
            self.added = 0


def featurise(records: list[dict], scorer: Any | None) -> Featurised:
    """Features of every sentence, the cross-encoder's score (`scorer`, e.g. a `MemoScorer`) filled in."""
    contexts = [ContextIndex.build(r["context"]) for r in records]
    signals = [sentence_signals(r["text"], index) for r, index in zip(records, contexts)]
    if scorer is not None:
        claims = [s for sentences in signals for s in sentences if not s.is_noise]
        logger.info("cross-encoder: %d claim sentences of %d answers", len(claims), len(records))
        for signal, score in zip(claims, scorer.scores([(c.evidence, c.sentence.text) for c in claims])):
            signal.features[NLI_FEATURE] = score
    return Featurised(records, signals, contexts)


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
    """Per sentence row: its source's share (`combiner_selection.source_weights`)."""
    return source_weights(np.asarray([data.records[o]["source"] for o in data.owners]), config.source_weights)


def _task_cuts(dev: Featurised, sentence_scores: np.ndarray, per_answer: np.ndarray, tasks: np.ndarray,
               words: dict, gap: int, config: CombinerConfig, metrics: dict[str, Any]) -> dict[str, float]:
    """A word cut of its own for each task type with min_task_answers span-labelled dev answers:
    RAGTruth's Data2txt spans are a few words of a long answer, XSumFaith's most of one sentence."""
    span_answers = np.asarray([r["granularity"] == "span" and r["source"] in config.span_mode_sources
                               for r in dev.records])
    cuts = {}
    for task in TASKS:
        mask = tasks == task
        if (mask & span_answers).sum() < config.min_task_answers:
            continue
        scores = {cut: char_f1(dev, sentence_scores, per_answer, "words", config.span_mode_sources, words=words,
                               cut=cut, gap=gap, answers=mask) for cut in config.narrower.cuts}
        cuts[task] = max(scores, key=scores.get)
        metrics.setdefault("dev_char_f1_by_task", {})[task] = {str(c): f for c, f in scores.items()}
    return cuts


def _sentence_aucs(dev: Featurised, unsupported: np.ndarray, answer_tasks: np.ndarray) -> dict[str, float]:
    """Dev sentence ROC-AUC per source, and per task type on RAGTruth (the target domain)."""
    from sklearn.metrics import roc_auc_score

    known = dev.labels >= 0
    sources = np.asarray([dev.records[o]["source"] for o in dev.owners])
    tasks = answer_tasks[dev.owners]
    groups = {str(s): known & (sources == s) for s in sorted(set(sources))}
    groups.update({f"ragtruth/{t}": known & (sources == "ragtruth") & (tasks == t) for t in TASKS})
    return {name: float(roc_auc_score(dev.labels[m] == 0, unsupported[m]))
            for name, m in groups.items() if 0 < (dev.labels[m] == 0).sum() < m.sum()}


def _check_parity(path: Path, words: dict, rows: list[np.ndarray]) -> None:
    """narrower.onnx must give scikit-learn's word scores (`words`, in `rows` order) on every dev word."""
    from autovalidators.inference.validators.grounding_spans import Narrower

    if not rows:
        return
    reference = np.concatenate(list(words.values()))
    parity = float(np.abs(Narrower(path, cut=0.5, gap=0).word_scores(np.concatenate(rows)) - reference).max())
    if parity > 1e-4:
        raise ValueError(f"{path.name} differs from scikit-learn by {parity:.2e} on dev (> 1e-4)")


def to_onnx(model: Any, n_features: int) -> bytes:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    onnx_model = convert_sklearn(model, initial_types=[("features", FloatTensorType([None, n_features]))],
                                 options={id(model): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    return onnx_model.SerializeToString()


def load_cross_encoder(folder: str | Path, threads: int) -> tuple[Any, Any]:
    """(PairScorer, manifest) of a cross-encoder folder: an exported grounding run (labels name
    "supported") or a shipped fact-span model, whose cross-encoder's positive class is 1."""
    from autovalidators.inference.manifest import load_manifest
    from autovalidators.inference.validators.pair_scorer import PairScorer

    folder = Path(folder)
    manifest = load_manifest(folder)
    positive = manifest.labels.index("supported") if "supported" in manifest.labels else 1
    scorer = PairScorer(folder / manifest.model_file, folder / manifest.tokenizer_file,
                        max_length=manifest.window.max_length, positive=positive, threads=threads)
    return scorer, manifest


def train_combiner(config: CombinerConfig, config_source: str = "") -> dict[str, Any]:
    """Reads `prepare grounding`'s answers, featurises them, fits (`fit_combiner`) into
    `output_dir` and writes `combiner.json` there."""
    data_dir = Path(config.data_dir)
    train_records = _capped(list(read_jsonl(data_dir / "answers" / "train.jsonl")), config.max_answers_per_source,
                            config.seed)
    dev_records = list(read_jsonl(data_dir / "answers" / "dev.jsonl"))
    scorer, cross_manifest = None, None
    if config.cross_encoder:
        pair_scorer, cross_manifest = load_cross_encoder(config.cross_encoder, config.threads)
        scorer = MemoScorer(pair_scorer, Path(config.cross_encoder) / SCORE_CACHE)
    logger.info("featurising %d train and %d dev answers", len(train_records), len(dev_records))
    train, dev = featurise(train_records, scorer), featurise(dev_records, scorer)
    if scorer:
        scorer.save()
    out = Path(config.output_dir)
    summary = {
        "config": config.model_dump(), "config_source": config_source, "features": list(FEATURE_NAMES),
        **fit_combiner(config, train, dev, out),
        "cross_encoder": None if cross_manifest is None else {
            "path": config.cross_encoder, "sha256": cross_manifest.model_sha256, "metrics": cross_manifest.metrics},
        "data": {"dir": str(data_dir), "train_answers": len(train_records), "dev_answers": len(dev_records),
                 "train_sha256": hashlib.sha256((data_dir / "answers" / "train.jsonl").read_bytes()).hexdigest()},
    }
    (out / "combiner.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def fit_combiner(config: CombinerConfig, train: Featurised, dev: Featurised, out: Path) -> dict[str, Any]:
    """Every learned part from featurised answers: the combiner on `train` sentences, the answer
    calibration on `train` answers, thresholds, span mode and word cuts on `dev`; writes
    `combiner.onnx` (and `narrower.onnx` when dev chose word spans) into `out` and returns what
    the runtime needs (thresholds, span settings, calibration) with the dev metrics.
    `train.features` is changed in place (ignored features zeroed)."""
    from sklearn.ensemble import GradientBoostingClassifier

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
    train_unsupported = model.predict_proba(train.features)[:, 0]

    metrics: dict[str, Any] = {"sentences": {"train": int(known.sum()), "dev": int((dev.labels >= 0).sum())}}
    tasks = np.asarray([task_of(r.get("question", ""), r["context"]) for r in dev.records])
    metrics["dev_sentence_auc"] = _sentence_aucs(dev, dev_unsupported, tasks)
    calibration = (fit_answer_calibration(train, train_unsupported, config.source_weights)
                   if config.answer_calibration else AnswerCalibration())
    dev_sentence_scores, scores = answer_level(dev, dev_unsupported, calibration)
    gold = np.asarray([r["label"] == 0 for r in dev.records])
    sources = np.asarray([r["source"] for r in dev.records])
    chosen = np.isin(sources, config.threshold_sources)
    if not chosen.any():
        raise ValueError(f"no dev answers from threshold_sources {config.threshold_sources}")
    threshold, dev_f1 = choose_threshold(scores[chosen], gold[chosen], sources[chosen], config.threshold_objective)
    metrics["threshold"] = {"value": threshold, "dev_example_f1": dev_f1, "sources": config.threshold_sources,
                            "objective": config.threshold_objective}
    # A task with enough dev answers gets its own threshold: RAGTruth's Data2txt answers
    # hallucinate three times as often as its summaries, so one cut cannot serve both.
    thresholds = {"hallucination": threshold}
    for task in TASKS:
        mask = chosen & (tasks == task)
        if mask.sum() >= config.min_task_answers and 0 < gold[mask].sum() < mask.sum():
            cut, f1 = choose_threshold(scores[mask], gold[mask], sources[mask], config.threshold_objective)
            thresholds[f"hallucination/{task}"] = cut
            metrics["threshold"][task] = {"value": cut, "dev_example_f1": f1, "answers": int(mask.sum())}
    per_answer = np.asarray([thresholds.get(f"hallucination/{t}", threshold) for t in tasks])

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    span_scores = {f"{mode}/{gap}": char_f1(dev, dev_sentence_scores, per_answer, mode, config.span_mode_sources, gap)
                   for mode, gap in SPAN_MODES}
    mode, gap = max(SPAN_MODES, key=lambda m: span_scores[f"{m[0]}/{m[1]}"])
    span: dict[str, Any] = {"span_mode": mode, "phrase_gap": gap}
    (out / NARROWER_FILE).unlink(missing_ok=True)  # a previous run's, not this one's
    if config.narrower.enabled:
        narrower, metrics["narrower"] = fit_narrower(train, train_unsupported, config.narrower, config.source_weights,
                                                     config.seed)
        keys, rows = claim_word_rows(dev, dev_unsupported)
        words = word_scores(narrower, keys, rows)
        for cut in config.narrower.cuts:
            for gap in config.narrower.gaps:
                span_scores[f"words/{cut}/{gap}"] = char_f1(dev, dev_sentence_scores, per_answer, "words",
                                                            config.span_mode_sources, words=words, cut=cut, gap=gap)
        best_words = max((k for k in span_scores if k.startswith("words/")), key=span_scores.get)
        if span_scores[best_words] > max(v for k, v in span_scores.items() if not k.startswith("words/")):
            _, cut, gap = best_words.split("/")
            default_cuts = {c: char_f1(dev, dev_sentence_scores, per_answer, "words", config.narrower.default_cut_sources,
                                       words=words, cut=c, gap=int(gap)) for c in config.narrower.cuts}
            metrics["dev_char_f1_default_cut"] = {str(c): f for c, f in default_cuts.items()}
            span = {"span_mode": "words", "phrase_gap": 1, "narrower": {
                "file": NARROWER_FILE, "cut": max(default_cuts, key=default_cuts.get), "gap": int(gap),
                "task_cuts": _task_cuts(dev, dev_sentence_scores, per_answer, tasks, words, int(gap), config, metrics)}}
            (out / NARROWER_FILE).write_bytes(to_onnx(narrower, len(TOKEN_FEATURE_NAMES)))
            _check_parity(out / NARROWER_FILE, words, rows)
    metrics["dev_char_f1"] = span_scores
    importance = (model.feature_importances_ if config.model == "trees"
                  else np.abs(model[-1].coef_[0]))  # |coefficient| of a standardised feature
    metrics["feature_importance"] = dict(sorted(zip(FEATURE_NAMES, map(float, importance)), key=lambda kv: -kv[1]))

    blob = to_onnx(model, len(FEATURE_NAMES))
    (out / COMBINER_FILE).write_bytes(blob)
    from autovalidators.inference.validators.grounding_spans import Combiner
    parity = float(np.abs(Combiner(out / COMBINER_FILE).unsupported(dev.features) - dev_unsupported).max())
    if parity > 1e-4:
        raise ValueError(f"combiner.onnx differs from scikit-learn by {parity:.2e} on dev (> 1e-4)")
    return {"combiner_file": COMBINER_FILE, "threshold": threshold, "thresholds": thresholds, **span, "answer_calibration": dataclasses.asdict(calibration),
            "onnx_parity_max_abs": parity, "metrics": metrics}
