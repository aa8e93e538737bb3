"""Tone: multi-label classification of one text (an answer, a comment) over the tone label scheme.

Input: `[CLS] text [SEP]`. In training a text longer than `max_length` is cut at its end (tweets
and comments rarely are; the runtime validator windows long texts instead, see
`inference/validators/tone.py`). Output: one sigmoid probability per label.

Missing labels. A source says nothing about most labels (Davidson never annotated threats), so a
record's target vector holds -1 there and the loss ignores it: a record with every label missing
contributes nothing (`TaskSpec.loss`, extended here with class weights).

Class imbalance. Positives are rare for some labels (threat, identity_hate, politics). Each
label's positive term in the BCE is weighted by `pos_weight = n_negative / n_positive`, counted on
the training records where the label is known, clipped to [1, POS_WEIGHT_CAP]: rare labels are
not drowned by negatives, and a label with a handful of positives cannot blow the loss up. The
weights are logged and written into the run (`best/run.json` -> manifest `training`).

Thresholds. Chosen per label on dev by `export.threshold_rule`: `best_f1` (default) takes the cut
maximising F1; `target_precision` the lowest cut reaching `export.target_precision`;
`export.threshold_rule_by_label` names exceptions (a report-only label can ask for precision). A label with
no dev positives or no dev negatives keeps 0.5. Metrics without given thresholds (the trainer's
dev evaluations) use thresholds chosen on the same records by best F1, i.e. the F1 the export will
report.

Metrics: per label precision/recall/F1 and ROC-AUC over the records that know the label; the main
metric `macro_f1` averages F1 over labels that have both classes in the evaluated records.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from pydantic import Field, PositiveInt

from autovalidators.inference.config import StrictModel

from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import MISSING_LABEL, TaskSpec, best_threshold, probabilities

logger = logging.getLogger(__name__)

# The label scheme of configs/tone.yaml, in the model's output order. `prepare` refuses a label
# config that differs, so a renamed label cannot silently shift columns.
TONE_LABELS = ("toxicity", "obscenity", "insult", "threat", "identity_hate", "politics")
POS_WEIGHT_CAP = 10.0


class TonePrepareConfig(StrictModel):
    """`prepare` for tone is the labelling pipeline (`autovalidators label tone`)."""

    # The label-scheme / labelling config (configs/tone.yaml, schema data_prep.tone.config.ToneConfig).
    label_config: str = "configs/tone.yaml"
    # Where `<split>.jsonl` and `benchmark_<source>.jsonl` go; train.train_file/dev_file point here.
    output_dir: str = "prepared/tone"
    # Shared datasets folder (None = the label config's data_root).
    data_root: str | None = None
    # A subset of the label config's sources (None = all).
    sources: list[str] | None = None
    # Run the LLM labeller (None = the label config's llm.enabled).
    llm: bool | None = None
    # Per-source caps on training records, sampled (seeded) into `train_file_sampled`: the run sees
    # what matters most for a CPU budget (OLID/Davidson tweets) while the long Russian comments,
    # which the English MiniLM vocabulary splits into characters, cost less. Empty = no file.
    max_train_per_source: dict[str, int] = {}
    train_file_sampled: str = "train_sampled.jsonl"
    # Per-source repeats in `train_file_sampled` (after the caps): a source the benchmarks hinge on
    # (OLID's tweets for English) gets more steps without capping the others further.
    repeat_train_per_source: dict[str, PositiveInt] = Field(default_factory=dict)
    # Share of each listed source's training groups moved into `dev_file_sampled` (dev.jsonl plus
    # them), so thresholds and early stopping see that source: the labeller's dev split may lack
    # one (OLID: its holdout and train/dev split used the same hash, so all of it landed in train).
    dev_from_train: dict[str, float] = {}
    dev_file_sampled: str = "dev_sampled.jsonl"
    # Per-source caps on `dev_file_sampled` rows (seeded sample): thresholds are chosen on dev, so
    # a large, easy source (ParaDetox's contrast pairs) must not outvote the comments the model meets.
    max_dev_per_source: dict[str, int] = {}
    # Identity statements (data_prep/tone/identity_statements.yaml) whose train split joins
    # `train_file_sampled` (repeat them with `repeat_train_per_source: {identity_statements: N}`): the
    # gold comments hold hate mostly as slurs, so an encoder pass over other texts forgets the politely
    # worded claims. Their dev and test splits (held-out groups and wordings) stay out, as measures of
    # the head refit and `benchmark tone`. None = not used.
    statements: str | None = None
    # Languages the model is trained and tuned on (None = all). Rows in other languages are left out
    # of the sampled train and dev files: at run time they go to the heuristic
    # (`export.fallback_languages`), so they should neither take training steps nor move thresholds.
    model_languages: list[str] | None = None
    seed: int = 13
    # Held-out benchmark files written by the labeller, read by `autovalidators benchmark tone`.
    benchmark_files: list[str] = Field(default_factory=lambda: ["benchmark_olid.jsonl", "benchmark_ru_toxic_val.jsonl"])


def prepare(config: TonePrepareConfig) -> dict[str, Any]:
    """Runs the labelling pipeline; returns a card-like summary for the generic `prepare` command."""
    from autovalidators.data_prep.tone.config import load_tone_config
    from autovalidators.data_prep.tone.pipeline import build

    label_config = load_tone_config(config.label_config)
    if tuple(label_config.labels) != TONE_LABELS:
        raise ValueError(f"{config.label_config}: labels {list(label_config.labels)} differ from the tone "
                         f"model's {list(TONE_LABELS)}; change training/tasks/tone.py TONE_LABELS with them")
    report = build(label_config, config.output_dir, data_root=config.data_root, sources=config.sources,
                   use_llm=config.llm)
    if (config.max_train_per_source or config.dev_from_train or config.max_dev_per_source
            or config.repeat_train_per_source or config.model_languages is not None or config.statements):
        report["splits"].update(sample_train(config))
    notes = [f"{len(report['bad_rows'])} bad source rows skipped (see labelling_report.json)"]
    if report.get("disagreements"):
        notes.append("labeller disagreements: " + "; ".join(f"{k} x{v}" for k, v in
                                                           list(report["disagreements"].items())[:4]))
    return {"splits": {name: {"rows": rows} for name, rows in report["splits"].items()}, "notes": notes}


def sample_train(config: TonePrepareConfig) -> dict[str, int]:
    """Writes `<output_dir>/<train_file_sampled>`: train.jsonl minus the `dev_from_train` groups,
    with `max_train_per_source` applied (a seeded sample per capped source, file order kept), then
    the train split of `statements`, then `repeat_train_per_source`; and, when `dev_from_train` or `model_languages` is set,
    `<dev_file_sampled>` = dev.jsonl plus the moved groups. Both keep only `model_languages` rows
    when that is set. Returns rows written per file stem."""
    from autovalidators.data_prep.io import read_jsonl, write_jsonl
    from autovalidators.data_prep.splits import grouped_split

    out = Path(config.output_dir)
    languages = set(config.model_languages) if config.model_languages is not None else None

    def modelled(record: dict) -> bool:
        return languages is None or record.get("language") in languages

    records = [r for r in read_jsonl(out / "train.jsonl") if modelled(r)]
    by_source: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        by_source.setdefault(record["source"], []).append(index)
    staying: set[int] = set()
    moved: list[int] = []
    for source, indices in sorted(by_source.items()):
        fraction = config.dev_from_train.get(source, 0.0)
        if fraction > 0:
            # A seed of its own: reusing the labeller's split seed would pick the same hash region.
            parts = grouped_split(indices, lambda i: records[i]["group"], {"train": 1 - fraction, "dev": fraction},
                                  seed=config.seed + 1009)
            indices = parts["train"]
            moved += parts["dev"]
        staying.update(indices)
    capped = cap_per_source([records[i] for i in sorted(staying)], config.max_train_per_source, str(config.seed))
    if config.statements:
        from autovalidators.data_prep.tone.statements import statement_records

        capped += [r for r in statement_records(config.statements, TONE_LABELS) if r["split"] == "train" and modelled(r)]
    sampled = [r for r in capped for _ in range(config.repeat_train_per_source.get(r["source"], 1))]
    written = {Path(config.train_file_sampled).stem: write_jsonl(out / config.train_file_sampled, sampled)}
    if config.dev_from_train or config.max_dev_per_source or languages is not None:
        dev = [r for r in read_jsonl(out / "dev.jsonl") if modelled(r)]
        dev += [{**records[i], "split": "dev"} for i in sorted(moved)]
        written[Path(config.dev_file_sampled).stem] = write_jsonl(
            out / config.dev_file_sampled, cap_per_source(dev, config.max_dev_per_source, f"{config.seed}:dev"))
    logger.info("wrote %s (caps %s, moved to dev %s, dev caps %s)", written, config.max_train_per_source,
                config.dev_from_train, config.max_dev_per_source)
    return written


def cap_per_source(records: list[dict], caps: dict[str, int], seed: str) -> list[dict]:
    """At most caps[source] records of each capped source (a seeded sample), in the given order."""
    import random

    by_source: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        by_source.setdefault(record["source"], []).append(index)
    keep: set[int] = set()
    for source, indices in by_source.items():
        cap = caps.get(source)
        keep.update(indices if cap is None or len(indices) <= cap else random.Random(f"{seed}:{source}").sample(indices, cap))
    return [records[i] for i in sorted(keep)]


def target_vector(record: dict, labels: Sequence[str] = TONE_LABELS) -> list[float]:
    """1.0 / 0.0 per label, MISSING_LABEL (-1) where the record's label is None or absent."""
    values = record.get("labels") or {}
    return [MISSING_LABEL if values.get(label) is None else float(values[label]) for label in labels]


def target_matrix(records: Sequence[dict], labels: Sequence[str] = TONE_LABELS) -> np.ndarray:
    return np.asarray([target_vector(r, labels) for r in records], dtype=np.float64).reshape(len(records), len(labels))


def compute_pos_weight(targets: np.ndarray, cap: float = POS_WEIGHT_CAP) -> np.ndarray:
    """Per-label n_negative / n_positive over known targets, clipped to [1, cap] (1 when unknown).
    A soft target (`label distill`) counts on its side of 0.5."""
    known = targets != MISSING_LABEL
    positives = (known & (targets >= 0.5)).sum(axis=0)
    negatives = (known & (targets < 0.5)).sum(axis=0)
    ratio = np.where(positives > 0, negatives / np.maximum(positives, 1), 1.0)
    return np.clip(ratio, 1.0, cap)


def label_metrics(scores: np.ndarray, targets: np.ndarray, threshold: float) -> dict[str, float]:
    """P/R/F1 at `threshold` and ROC-AUC for one label over records where it is known."""
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score

    known = targets != MISSING_LABEL
    y, s = targets[known].astype(int), scores[known]
    if not len(y):  # nobody labelled this label here: nothing to measure
        return {"precision": float("nan"), "recall": float("nan"), "f1": float("nan"), "roc_auc": float("nan"),
                "positives": 0, "known": 0, "threshold": float(threshold)}
    predicted = (s >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(y, predicted, average="binary", zero_division=0)
    both = 0 < y.sum() < len(y)
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1),
            "roc_auc": float(roc_auc_score(y, s)) if both else float("nan"),
            "positives": int(y.sum()), "known": int(len(y)), "threshold": float(threshold)}


def choose_thresholds(scores: np.ndarray, targets: np.ndarray, labels: Sequence[str], rule: str = "best_f1",
                      target_precision: float = 0.9, rule_by_label: dict[str, str] | None = None,
                      fallback: dict[str, float] | None = None) -> dict[str, float]:
    """Per-label thresholds by `rule`, or `rule_by_label[label]` where given (see module docstring);
    for a label lacking a class, its `fallback` cut (default 0.5)."""
    thresholds = {}
    for column, label in enumerate(labels):
        known = targets[:, column] != MISSING_LABEL
        y = targets[known, column].astype(int)
        if 0 < y.sum() < len(y):
            thresholds[label] = best_threshold(scores[known, column], y, (rule_by_label or {}).get(label, rule),
                                               target_precision)
        else:
            thresholds[label] = (fallback or {}).get(label, 0.5)
    return thresholds


def multilabel_report(scores: np.ndarray, targets: np.ndarray, labels: Sequence[str],
                      thresholds: dict[str, float]) -> dict[str, Any]:
    """{label: label_metrics} plus macro_f1 / macro_roc_auc over labels with both classes."""
    per_label = {label: label_metrics(scores[:, i], targets[:, i], thresholds.get(label, 0.5))
                 for i, label in enumerate(labels)}
    scored = [m for m in per_label.values() if 0 < m["positives"] < m["known"]]
    return {"labels": per_label,
            "macro_f1": float(np.mean([m["f1"] for m in scored])) if scored else float("nan"),
            "macro_roc_auc": float(np.mean([m["roc_auc"] for m in scored])) if scored else float("nan"),
            "macro_labels": [label for label, m in per_label.items() if 0 < m["positives"] < m["known"]]}


class ToneSpec(TaskSpec):
    pos_weight: np.ndarray | None = None

    def on_train_records(self, records: Sequence[dict]) -> None:
        self.pos_weight = compute_pos_weight(target_matrix(records, self.labels))
        weights = {label: round(float(w), 3) for label, w in zip(self.labels, self.pos_weight)}
        self.extra = {**self.extra, "pos_weight": weights}
        logger.info("tone pos_weight (n_neg/n_pos on train, clipped to [1, %g]): %s", POS_WEIGHT_CAP, weights)

    def encode(self, tokenizer, record: dict, max_length: int) -> dict[str, Any]:
        tokenizer.enable_truncation(max_length)
        tokenizer.no_padding()
        encoding = tokenizer.encode(record["text"])
        features: dict[str, Any] = {"input_ids": encoding.ids, "attention_mask": encoding.attention_mask,
                                    "token_type_ids": encoding.type_ids}
        if "labels" in record:
            features["labels"] = list(target_vector(record, self.labels))
        return features

    def example_text(self) -> dict:
        return {"text": "You are a complete idiot and everyone knows it."}

    def loss(self, logits, labels):
        """Masked BCE (missing = -1 ignored) with the per-label pos_weight from the train counts."""
        import torch
        import torch.nn.functional as F

        labels = labels.to(logits.dtype)  # collate may hand the 1/0/-1 targets over as integers
        mask = (labels != MISSING_LABEL).float()
        weight = None
        if self.pos_weight is not None:
            weight = torch.as_tensor(self.pos_weight, dtype=logits.dtype, device=logits.device)
        per_label = F.binary_cross_entropy_with_logits(logits, labels.clamp(min=0.0), reduction="none",
                                                       pos_weight=weight)
        return (per_label * mask).sum() / mask.sum().clamp(min=1.0)

    def scores(self, logits: np.ndarray) -> np.ndarray:
        return probabilities(logits, "multi_label")

    def metrics(self, logits, records, thresholds=None) -> dict[str, float]:
        scores, targets = self.scores(logits), target_matrix(records, self.labels)
        if thresholds is None:
            thresholds = choose_thresholds(scores, targets, self.labels)
        report = multilabel_report(scores, targets, self.labels, thresholds)
        flat: dict[str, float] = {"macro_f1": report["macro_f1"], "macro_roc_auc": report["macro_roc_auc"]}
        for label, values in report["labels"].items():
            for key in ("precision", "recall", "f1", "roc_auc", "threshold"):
                flat[f"{label}_{key}"] = values[key]
        return flat

    def thresholds(self, logits, records, config) -> dict[str, float]:
        unknown = sorted(set(config.threshold_rule_by_label) - set(self.labels))
        if unknown:
            raise ValueError(f"export.threshold_rule_by_label: {unknown} are not tone labels ({list(self.labels)})")
        return choose_thresholds(self.scores(logits), target_matrix(records, self.labels), self.labels,
                                 config.threshold_rule, config.target_precision, config.threshold_rule_by_label)


# The schema of configs/tone_model.yaml (prepare = the labelling pipeline, train, export).
ToneModelConfig = TaskConfig[TonePrepareConfig]

SPEC = ToneSpec(
    name="tone",
    labels=TONE_LABELS,
    problem_type="multi_label",
    prepare_schema=TonePrepareConfig,
    prepare_fn=prepare,
    main_metric="macro_f1",
    window_stride=16,
    window_aggregation="max",
    benchmark="autovalidators.training.benchmarks.tone:benchmark",
    config_file="tone_model.yaml",
    language_fallback=True,
    extra={"input": "[CLS] text [SEP]", "score": "sigmoid(logits) per label",
           "missing_labels": "target -1, masked out of the BCE",
           "imbalance": f"pos_weight = n_neg/n_pos per label on train, clipped to [1, {POS_WEIGHT_CAP:g}]",
           "threshold_rule": "per label, chosen on dev by export.threshold_rule (default best F1); 0.5 "
                             "when dev lacks a class",
           "long_texts": "training cuts at max_length; the runtime windows (stride = overlap tokens) and "
                         "takes the max probability per label over windows"},
)

__all__ = ["SPEC", "TONE_LABELS", "ToneModelConfig", "TonePrepareConfig", "ToneSpec", "choose_thresholds", "compute_pos_weight",
           "multilabel_report", "target_matrix", "target_vector"]
