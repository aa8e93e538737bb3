"""`autovalidators train tone-head`: refit the shipped tone model's output layer on its frozen encoder.

The recipe (configs/tone_head.yaml):
1. `prepare` the tone data with the neutral sources added (LLM answers, encyclopaedic and news
   sentences in English and Russian; every abusive label 0), and expand the identity statements
   (`data_prep/tone/identity_statements.yaml`: hateful claims about groups and neutral sentences
   about the same groups, with their own train/dev/test split by wording and group).
2. Read each text's features through the shipped int8 graph without its head
   (`head_refit.encoder_outputs`), one unpadded window per call as the runtime does, cached per
   model and text in `<output_dir>/features/`.
3. Fit one L2 logistic regression per label on the standardised features of the training rows
   that know the label; neutral and statement rows carry their configured weights.
4. Thresholds per label on dev (best F1, or target precision where named), then each blocking
   label's threshold is raised until at most `max_neutral_flags` of each language's dev neutral
   texts reach it: what best F1 on comment data cannot see is the mass of ordinary answers a
   deployed check reads.
5. Fold the scaling into one fp32 MatMul + Add (`head_refit.with_head`), check the new graph
   reproduces the fitted logits, and report dev quality, neutral flag rates per language and
   source, and identity statements caught / neutral statements flagged per language. The test
   splits are left to `benchmark tone`, so choosing among variants never reads them.
`--to MODEL_DIR` ships it: model.onnx, the tokenizer, a manifest with the new thresholds and this
recipe; `benchmark tone --update-manifest` measures it on the held-out benchmarks afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnx
import yaml
from pydantic import Field

from autovalidators.data_prep.io import DataError, read_jsonl
from autovalidators.data_prep.tone.statements import SOURCE as STATEMENT_SOURCE, statement_records
from autovalidators.inference.config import StrictModel
from autovalidators.inference.manifest import load_manifest, sha256_of, write_manifest
from autovalidators.inference.onnx_session import OnnxSession
from autovalidators.inference.validators.tone import ToneValidator, on_default_scale

from autovalidators.training.benchmarks.tone import statements_caught
from autovalidators.training.head_refit import FEATURES, encoder_outputs, with_head
from autovalidators.training.tasks.base import MISSING_LABEL
from autovalidators.training.tasks.tone import (TONE_LABELS, TonePrepareConfig, choose_thresholds, multilabel_report,
                                                prepare, target_matrix)

logger = logging.getLogger(__name__)


class HeadFit(StrictModel):
    C: float = Field(1.0, gt=0, description="inverse L2 strength of each label's logistic regression")
    neutral_weight: float = Field(1.0, gt=0, description="weight of a neutral-source row against a gold row")
    statement_weight: float = Field(1.0, gt=0, description="weight of an identity statement row")
    max_iter: int = Field(3000, gt=0)


class HeadThresholds(StrictModel):
    rule: str = "best_f1"
    rule_by_label: dict[str, str] = {}
    target_precision: float = Field(0.9, gt=0, le=1)
    max_neutral_flags: float = Field(0.005, ge=0, lt=1, description="per language, share of dev neutral texts")
    # The neutral identity statements (the same groups and subjects as the hateful ones, stated
    # neutrally) bounded the same way, per language: best F1 on a rare label (identity_hate near
    # 0.2) otherwise lets "Hitler became chancellor in 1933." through only by luck.
    bound_neutral_statements: bool = False
    blocking_labels: list[str] = ["toxicity", "obscenity", "insult", "threat", "identity_hate"]
    # Languages whose thresholds are chosen on their own dev rows alone (both steps above), shipped
    # as the manifest's `thresholds_by_language`; every other language shares the default ones,
    # chosen on the remaining rows. One cut over pooled rows trades Russian comments' F1 and neutral
    # Russian flags against English ones, because the encoder's scores sit differently per language.
    own_languages: list[str] = []


class ToneHeadConfig(StrictModel):
    model_dir: str = "models/tone"
    prepare: TonePrepareConfig
    neutral_sources: list[str] = Field(min_length=1)
    statements: str = "data_prep/tone/identity_statements.yaml"
    head: HeadFit = HeadFit()
    thresholds: HeadThresholds = HeadThresholds()
    output_dir: str = "runs/tone_head"
    threads: int = 2
    # Candidates of this recipe scored on the held-out sets (`benchmark tone`), the shipped one
    # included: written into the manifest, so a reader knows how often the test rows were looked at.
    held_out_candidates: int = Field(0, ge=0)
    # Manifest `lexicon_required` of the refitted model (label -> languages where the label stands
    # only on a lexicon match); None keeps the encoder model's.
    lexicon_required: dict[str, list[str]] | None = None


def load_config(path: str | Path) -> ToneHeadConfig:
    return ToneHeadConfig.model_validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


class FeatureReader:
    """Features of texts through the model's headless graph, cached by model and text."""

    def __init__(self, model_dir: Path, cache_dir: Path, threads: int):
        manifest = load_manifest(model_dir)
        self.model_sha = manifest.model_sha256
        self.cache_dir = cache_dir / self.model_sha[:16]
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        headless = self.cache_dir / "encoder.onnx"
        if not headless.is_file():
            onnx.save(encoder_outputs(model_dir / manifest.model_file), str(headless))
        # The runtime validator on the headless graph: its windows are the served ones, and its
        # session (the only one loaded) returns FEATURES instead of logits.
        self.validator = ToneValidator(model_dir, manifest, threads=threads, model_path=headless)

    def first_windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's first window as a (1, n) id array: what training reads (the runtime takes
        the max over windows; training cuts at max_length)."""
        return [np.asarray([w.windows[0]], dtype=np.int64) for w in self.validator.windows(texts)]

    def __call__(self, texts: Sequence[str], name: str) -> np.ndarray:
        """(len(texts), n_features): each text's first window, one unpadded call each (as served)."""
        key = hashlib.sha256("\n\0".join(texts).encode("utf-8")).hexdigest()[:16]
        cached = self.cache_dir / f"{name}-{key}.npy"
        if cached.is_file():
            return np.load(cached)
        rows = []
        for number, ids in enumerate(self.first_windows(texts), start=1):
            rows.append(self.validator.session.run({"input_ids": ids, "attention_mask": np.ones_like(ids),
                                                    "token_type_ids": np.zeros_like(ids)})[FEATURES][0])
            if number % 2000 == 0:
                logger.info("%s: features of %d / %d texts", name, number, len(texts))
        features = np.asarray(rows, dtype=np.float32)
        np.save(cached, features)
        return features


def _sample_weights(records: Sequence[dict], config: ToneHeadConfig) -> np.ndarray:
    neutral = set(config.neutral_sources)
    return np.asarray([config.head.neutral_weight if r["source"] in neutral
                       else config.head.statement_weight if r["source"] == "identity_statements" else 1.0
                       for r in records])


def fit_head(features: np.ndarray, targets: np.ndarray, weights: np.ndarray, config: HeadFit,
             base_scale: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(weight (n_features, n_labels), bias (n_labels,)) on raw features, the standardisation folded in.

    With `base_scale` > 0 the last n_labels features are the old head's logits: each label sees
    only its own, multiplied by `base_scale` after standardising, so the L2 penalty barely touches
    it and the new head starts from the old one's judgement, correcting it where the data say so.
    """
    from sklearn.linear_model import LogisticRegression

    mean, scale = features.mean(axis=0), features.std(axis=0) + 1e-6
    n_labels = targets.shape[1]
    if base_scale:
        scale[-n_labels:] /= base_scale
    standard = (features - mean) / scale
    weight = np.zeros((features.shape[1], targets.shape[1]))
    bias = np.zeros(targets.shape[1])
    for column in range(targets.shape[1]):
        known = targets[:, column] != MISSING_LABEL
        y = targets[known, column] >= 0.5
        if not y.any() or y.all():
            # Nothing to fit: no known row or no positive says "never"; only positives say "always".
            bias[column] = 10.0 if y.any() else -10.0
            continue
        use = np.ones(features.shape[1], dtype=bool)
        if base_scale:  # a label reads its own old logit only
            use[-n_labels:] = False
            use[features.shape[1] - n_labels + column] = True
        model = LogisticRegression(C=config.C, max_iter=config.max_iter)
        model.fit(standard[known][:, use], y, sample_weight=weights[known])
        coef = np.zeros(features.shape[1])
        coef[use] = model.coef_[0]
        weight[:, column] = coef / scale
        bias[column] = model.intercept_[0] - float((mean / scale) @ coef)
    return weight, bias


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits))


def neutral_bound(thresholds: dict[str, float], scores: np.ndarray, records: Sequence[dict],
                  config: ToneHeadConfig) -> dict[str, float]:
    """Thresholds raised, as little as it takes, until at most `max_neutral_flags` of each
    language's neutral texts (and, with `bound_neutral_statements`, of its neutral identity
    statements) reach any blocking label.

    Greedy: while a language flags too many, the blocking label that flags the most of its neutral
    texts moves just above the lowest of them; each step unflags at least one text, so it ends.
    """
    neutral = set(config.neutral_sources)
    raised = dict(thresholds)
    blocking = [label for label in config.thresholds.blocking_labels if label in TONE_LABELS]
    columns = [TONE_LABELS.index(label) for label in blocking]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r["source"] in neutral:
            groups[r["language"]].append(i)
        elif (config.thresholds.bound_neutral_statements and r["source"] == STATEMENT_SOURCE
              and str(r.get("row", "")).startswith("neutral:")):
            groups[f"statements/{r['language']}"].append(i)
    for _, rows in sorted(groups.items()):
        block = scores[np.ix_(rows, columns)]
        allowed = int(np.floor(config.thresholds.max_neutral_flags * len(rows)))
        while True:
            hits = block >= np.asarray([raised[label] for label in blocking])
            if hits.any(axis=1).sum() <= allowed:
                break
            worst = int(hits.sum(axis=0).argmax())
            raised[blocking[worst]] = float(np.nextafter(block[hits[:, worst], worst].min(), np.inf))
    return raised


def flag_rates(scores: np.ndarray, records: Sequence[dict], thresholds: dict[str, float],
               blocking: Sequence[str]) -> np.ndarray:
    columns = [TONE_LABELS.index(label) for label in blocking]
    cuts = np.asarray([thresholds[label] for label in blocking])
    return (scores[:, columns] >= cuts).any(axis=1) if len(records) else np.zeros(0, dtype=bool)


def neutral_report(flagged: np.ndarray, records: Sequence[dict], neutral: set[str]) -> dict[str, Any]:
    """Share of neutral texts flagged, per language and per (source, language)."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for hit, record in zip(flagged, records):
        if record["source"] in neutral:
            groups[record["language"]].append(bool(hit))
            groups[f"{record['source']}/{record['language']}"].append(bool(hit))
    return {key: {"texts": len(hits), "flagged": int(sum(hits)), "rate": sum(hits) / len(hits)}
            for key, hits in sorted(groups.items())}


def fit_thresholds(scores: np.ndarray, targets: np.ndarray, records: Sequence[dict],
                   config: ToneHeadConfig) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, Any]]:
    """(default thresholds, {language: its own thresholds}, best-F1 cuts before the neutral bound
    per group): each group's cuts are best F1 on its dev rows, then raised by `neutral_bound`.
    A label a group's rows cannot fit (no positive or no negative there: English has no `politics`
    rows, Russian no `insult` ones) keeps its cut chosen on all dev rows."""
    rules = config.thresholds
    own = list(dict.fromkeys(rules.own_languages))

    def best_f1(rows: list[int] | slice, fallback: dict[str, float] | None = None) -> dict[str, float]:
        return choose_thresholds(scores[rows], targets[rows], TONE_LABELS, rules.rule, rules.target_precision,
                                 rules.rule_by_label, fallback)

    pooled = best_f1(slice(None))

    def cuts(rows: list[int], group: str) -> tuple[dict[str, float], dict[str, float]]:
        if not rows:
            raise DataError(f"thresholds.own_languages: no dev rows for {group}; the dev split's languages are "
                            f"{sorted({r['language'] for r in records})}")
        best = best_f1(rows, fallback=pooled) if own else pooled
        return best, neutral_bound(best, scores[rows], [records[i] for i in rows], config)

    best_default, default = cuts([i for i, r in enumerate(records) if r["language"] not in own], "the default")
    best = {"default": best_default}
    by_language = {}
    for language in own:
        best[language], by_language[language] = cuts(
            [i for i, r in enumerate(records) if r["language"] == language], f"language {language!r}")
    return default, by_language, best


def refit(config: ToneHeadConfig, *, to: str | Path | None = None, skip_prepare: bool = False,
          config_source: str | Path | None = None) -> dict[str, Any]:
    """Fit, check and measure a new head; write `<output_dir>/` (model.onnx, report.json) and, with
    `to`, a shipped model folder. Returns the report."""
    model_dir, out = Path(config.model_dir), Path(config.output_dir)
    data_dir = Path(config.prepare.output_dir)
    if not skip_prepare or not (data_dir / config.prepare.train_file_sampled).is_file():
        prepare(config.prepare)
    statements = statement_records(config.statements, TONE_LABELS)
    # No test split here: variants are chosen on dev; `benchmark tone` scores the one that ships on
    # the held-out sets (and the statements' test split), once.
    splits = {
        "train": list(read_jsonl(data_dir / config.prepare.train_file_sampled)),
        "dev": list(read_jsonl(data_dir / config.prepare.dev_file_sampled)),
    }
    reader = FeatureReader(model_dir, out / "features", config.threads)
    features = {}
    for name in splits:  # read apart and cached apart: editing the statements re-reads only them
        extra = [r for r in statements if r["split"] == name]
        features[name] = np.vstack([reader([r["text"] for r in splits[name]], name),
                                    reader([r["text"] for r in extra], f"{name}-statements")])
        splits[name] += extra
    targets = {name: target_matrix(records, TONE_LABELS) for name, records in splits.items()}

    weight, bias = fit_head(features["train"], targets["train"], _sample_weights(splits["train"], config), config.head)
    scores = {name: sigmoid(features[name].astype(np.float64) @ weight + bias) for name in splits}
    rules = config.thresholds
    thresholds, by_language, best = fit_thresholds(scores["dev"], targets["dev"], splits["dev"], config)
    # The report reads every row at the default cuts: each own-language row moved onto that scale
    # exactly as the runtime's benchmarks do (a logit shift per label).
    scores = {name: on_default_scale(scores[name], [r["language"] for r in splits[name]], TONE_LABELS,
                                     thresholds, by_language) for name in splits}

    out.mkdir(parents=True, exist_ok=True)
    model_path = out / "model.onnx"
    onnx.save(with_head(model_dir / load_manifest(model_dir).model_file, weight, bias), str(model_path))
    parity = _parity(model_path, reader, splits["dev"][:200], features["dev"][:200] @ weight + bias, config.threads)

    neutral = set(config.neutral_sources)
    report: dict[str, Any] = {"thresholds": thresholds, "thresholds_by_language": by_language,
                              "best_f1_thresholds": best, "parity": parity,
                              "counts": {name: len(records) for name, records in splits.items()}}
    for name in ("dev",):
        records = splits[name]
        flagged = flag_rates(scores[name], records, thresholds, rules.blocking_labels)
        statement_rows = [i for i, r in enumerate(records) if r["source"] == "identity_statements"]
        gold = [i for i, r in enumerate(records) if r["source"] not in neutral and r["source"] != "identity_statements"]
        report[name] = {
            "gold_sources": multilabel_report(scores[name][gold], targets[name][gold], TONE_LABELS, thresholds),
            # Per source, so a variant is chosen on dev per language (ru_toxic, olid) too.
            "gold_by_source": {source: multilabel_report(scores[name][rows], targets[name][rows], TONE_LABELS,
                                                         thresholds)
                               for source in sorted({records[i]["source"] for i in gold})
                               for rows in [[i for i in gold if records[i]["source"] == source]]},
            "neutral_flags": neutral_report(flagged, records, neutral),
            "statements": statements_caught(scores[name][statement_rows], [records[i] for i in statement_rows],
                                            TONE_LABELS, thresholds),
        }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=float), encoding="utf-8")
    if to is not None:
        ship(config, model_path, Path(to), thresholds, by_language, report, splits, config_source)
    return report


def _parity(model_path: Path, reader: FeatureReader, records: Sequence[dict], expected: np.ndarray,
            threads: int) -> dict[str, float]:
    """The shipped graph's logits against the fitted head on the same features; refuses a mismatch."""
    session = OnnxSession(model_path, threads=threads)
    got = [session.run({"input_ids": ids, "attention_mask": np.ones_like(ids),
                        "token_type_ids": np.zeros_like(ids)})["logits"][0]
           for ids in reader.first_windows([r["text"] for r in records])]
    gap = float(np.abs(np.asarray(got) - expected).max()) if got else 0.0
    if gap > 1e-3:
        raise DataError(f"{model_path}: the graph's logits differ from the fitted head's by {gap:.2e} (> 1e-3)")
    return {"max_abs_logit_gap": gap, "examples": len(got)}


def ship(config: ToneHeadConfig, model_path: Path, to: Path, thresholds: dict[str, float],
         thresholds_by_language: dict[str, dict[str, float]], report: dict[str, Any], splits: dict[str, list[dict]], config_source: str | Path | None = None) -> None:
    """A model folder at `to`: the new graph, the base model's tokenizer, a manifest with this recipe."""
    base = load_manifest(config.model_dir)
    to.mkdir(parents=True, exist_ok=True)
    if to.resolve() != Path(config.model_dir).resolve():
        shutil.copyfile(Path(config.model_dir) / base.tokenizer_file, to / base.tokenizer_file)
    shutil.copyfile(model_path, to / base.model_file)
    (to / "benchmark.json").unlink(missing_ok=True)  # measured again by `benchmark tone --update-manifest`
    fields = base.model_dump(mode="json")
    data_dir = Path(config.prepare.output_dir)
    fields.update(
        version=datetime.now(timezone.utc).strftime("%Y.%m.%d-%H%M"),
        thresholds=thresholds,
        thresholds_by_language=thresholds_by_language,
        lexicon_required=base.lexicon_required if config.lexicon_required is None else config.lexicon_required,
        metrics={"dev": report["dev"]["gold_sources"], "dev_neutral_flags": report["dev"]["neutral_flags"],
                 "dev_statements": report["dev"]["statements"]},
        # The encoder's own recipe stays as it was (it is still the encoder that runs); the head's is added.
        training={**{k: v for k, v in base.training.items() if k != "head_refit"}, "head_refit": {
            "recipe": "autovalidators train tone-head (the output layer refitted on the frozen int8 encoder)",
            "config_source": str(config_source) if config_source else None,
            "config": config.model_dump(mode="json"),
            "encoder_from": {"model_dir": config.model_dir, "version": base.version, "model_sha256": base.model_sha256},
            "data": {name: {"examples": len(records)} for name, records in splits.items()}
                    | {"files": {f: sha256_of(data_dir / f) for f in (config.prepare.train_file_sampled,
                                                                      config.prepare.dev_file_sampled)}},
            "statements_sha256": sha256_of(Path(config.statements)),
            "parity": report["parity"],
            "held_out_candidates": config.held_out_candidates,
        }},
    )
    write_manifest(to, fields)
