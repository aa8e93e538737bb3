"""Fact spans: tag every answer token FACT, NOISE or HALLUCINATION given question and context.

Input: `[CLS] question [SEP] context-window [SEP] answer-part [SEP]`, built by the runtime's
`plan_case` (inference/validators/fact_spans.py) so training and inference encode identically. A
long context has several windows; for training the window whose context holds the most of the
answer's token ids is used (the one most likely to contain the evidence), and only the first part
of an answer longer than `max_answer_tokens` (`EncodingRule.for_length`).

Labels: answer tokens only. A token takes the most frequent label of its characters (ties go to
the worse label: HALLUCINATION > NOISE > FACT); a token touching an `ignored` range, and every
question/context/special token, is -100 (left out of the loss and the metrics).

Metrics: token-level P/R/F1 of HALLUCINATION; seqeval entity-level P/R/F1 (IOB2 over the three
labels, micro, and for HALLUCINATION alone); example-level P/R/F1 (answer hallucinated or not) of
the example score = the highest per-token P(HALLUCINATION). Main metric: `example_f1`, at the
threshold chosen on dev by `export.threshold_rule` (best F1 by default), stored in the manifest as
`thresholds.hallucination`; during training (no threshold yet) 0.5 is used, and `example_auc`
(threshold-free) is the better early-stopping metric.

Data: `prepare` runs the data module's `prepare fact-spans` recipe (the `prepare:` section is its
schema plus `out_dir` and `mix`) and then writes `train_mix.jsonl`: every human-labelled training
row `mix.human_repeats` times plus a seeded sample of `mix.synthetic` synthetic rows, and
`mix.human_dev_file`: the human-labelled rows of dev and test, for model selection on real answers.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from pydantic import Field

from autovalidators.data_prep.fact_spans.config import FactSpansPrepConfig
from autovalidators.inference.config import StrictModel
from autovalidators.inference.validators.fact_spans import LABELS, THRESHOLD_KEY, EncodingRule, plan_case, softmax

from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import IGNORE_INDEX, TaskSpec, best_threshold

logger = logging.getLogger(__name__)

LABEL_IDS = {label: i for i, label in enumerate(LABELS)}
HALLUCINATION = LABEL_IDS["HALLUCINATION"]
# When a token's characters carry several labels, the worse one wins a tie.
_SEVERITY = {"FACT": 0, "NOISE": 1, "HALLUCINATION": 2}
# Keys this spec stores on a record while encoding it, read back by `metrics`.
_TOKEN_LABELS = "_fact_spans_token_labels"
_ANSWER_SLICE = "_fact_spans_answer_slice"


class TrainMix(StrictModel):
    """How the training file the model sees is mixed from the prepared train split."""

    # Synthetic rows sampled (seeded) into train_mix.jsonl; None = all of them.
    synthetic: int | None = Field(3000, ge=1)
    # Each human-labelled train row (RAGTruth, FaithBench) is repeated this often: they are few,
    # and they are the only real LLM answers the model sees.
    human_repeats: int = Field(2, ge=1)
    # The mixed training file, under out_dir (a second recipe can write its own beside the first).
    file: str = "train_mix.jsonl"
    # Human-labelled rows (RAGTruth, FaithBench) of the dev AND test splits, under out_dir: real
    # LLM answers for early stopping and the export threshold. Synthetic dev rows are easy and
    # pull the threshold where real answers do not sit. The benchmark's held-out sets stay apart.
    # None = not written.
    human_dev_file: str | None = "dev_human.jsonl"


class FactSpansPrepareSection(FactSpansPrepConfig):
    """The data module's recipe plus where to write it and how to mix the training file."""

    out_dir: str = "prepared/fact_spans"
    mix: TrainMix = TrainMix()


# The model config file (configs/fact_spans_model.yaml): data recipe + train + export sections.
FactSpansModelConfig = TaskConfig[FactSpansPrepareSection]


def prepare(config: FactSpansPrepareSection) -> dict:
    """Builds the span data (`data_prep.fact_spans.build.prepare`) and `train_mix.jsonl`."""
    from autovalidators.data_prep.fact_spans.build import prepare as build
    from autovalidators.data_prep.io import read_jsonl, write_jsonl

    out = Path(config.out_dir)
    data_config = FactSpansPrepConfig.model_validate(config.model_dump(exclude={"out_dir", "mix"}))
    report = build(data_config, out)
    rows = list(read_jsonl(out / "train.jsonl"))
    human = [r for r in rows if r["origin"] == "human" and r.get("grounding_usable", True)]
    synthetic = [r for r in rows if r["origin"] != "human"]
    rng = random.Random(config.seed)
    if config.mix.synthetic is not None and len(synthetic) > config.mix.synthetic:
        synthetic = rng.sample(synthetic, config.mix.synthetic)
    mixed = human * config.mix.human_repeats + synthetic
    rng.shuffle(mixed)
    write_jsonl(out / config.mix.file, mixed)
    card = dict(report.card)
    card["notes"] = list(card.get("notes", [])) + [
        f"{config.mix.file}: {len(human)} human rows x {config.mix.human_repeats} + {len(synthetic)} synthetic "
        f"rows (seed {config.seed}) = {len(mixed)}"]
    if config.mix.human_dev_file:
        human_dev = [r for split in ("dev", "test") for r in read_jsonl(out / f"{split}.jsonl")
                     if r["origin"] == "human" and r.get("grounding_usable", True)]
        write_jsonl(out / config.mix.human_dev_file, human_dev)
        card["notes"].append(f"{config.mix.human_dev_file}: {len(human_dev)} human-labelled rows of dev + test "
                             "(model selection and threshold on real answers)")
    return card


def token_labels(record: dict, offsets: Sequence[tuple[int, int]], part_offset: int = 0) -> list[int]:
    """Label id per answer token (offsets relative to the part starting at `part_offset`)."""
    answer = record["answer"]
    chars: list[str | None] = [None] * len(answer)
    for span in record.get("spans", []):
        chars[span["start"]:span["end"]] = [span["label"]] * (span["end"] - span["start"])
    ignored = np.zeros(len(answer) + 1, dtype=bool)
    for rng in record.get("ignored", []):
        ignored[rng["start"]:rng["end"]] = True
    labels = []
    for start, end in offsets:
        start, end = start + part_offset, end + part_offset
        present = [c for c in chars[start:end] if c is not None]
        if not present or ignored[start:end].any():
            labels.append(IGNORE_INDEX)
            continue
        counts = {label: present.count(label) for label in set(present)}
        labels.append(LABEL_IDS[max(counts, key=lambda k: (counts[k], _SEVERITY[k]))])
    return labels


def example_scores(logits: Sequence[np.ndarray], records: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(score, gold) per example: max token P(HALLUCINATION), any gold HALLUCINATION token."""
    scores, gold = [], []
    for row, record in zip(logits, records):
        if _ANSWER_SLICE not in record:
            raise ValueError("fact_spans metrics need records encoded by this spec (call encode first)")
        start, n = record[_ANSWER_SLICE]
        probs = softmax(np.asarray(row, dtype=np.float64)[start:start + n])
        scores.append(float(probs[:, HALLUCINATION].max()) if n else 0.0)
        gold.append(int(HALLUCINATION in record[_TOKEN_LABELS]))
    return np.asarray(scores), np.asarray(gold)


def _iob(labels: Sequence[int]) -> list[str]:
    tags, previous = [], None
    for label in labels:
        name = LABELS[label]
        tags.append(("I-" if name == previous else "B-") + name)
        previous = name
    return tags


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


class FactSpansSpec(TaskSpec):
    def rule(self, max_length: int) -> EncodingRule:
        return EncodingRule.for_length(max_length, self.window_stride)

    def encode(self, tokenizer, record: dict, max_length: int) -> dict[str, Any]:
        parts = plan_case(tokenizer, record["question"], record["context"], record["answer"], self.rule(max_length))
        part = parts[0]
        plan = part.plan
        answer_ids = set(plan.windows[0].input_ids[plan.answer_slice(0)])

        def coverage(index: int) -> int:
            window = plan.windows[index]
            context = window.input_ids[: window.answer_start]
            return sum(1 for token in context if token in answer_ids)

        best = max(range(len(plan.windows)), key=lambda i: (coverage(i), -i))
        window = plan.windows[best]
        labels = token_labels(record, plan.answer_offsets, part.offset)
        record[_TOKEN_LABELS] = labels
        record[_ANSWER_SLICE] = (window.answer_start, len(labels))
        full = [IGNORE_INDEX] * len(window.input_ids)
        full[window.answer_start:window.answer_start + len(labels)] = labels
        return {"input_ids": list(window.input_ids), "attention_mask": list(window.attention_mask),
                "token_type_ids": list(window.token_type_ids), "labels": full}

    def example_text(self) -> dict:
        return {"question": "When did the Normans reach Normandy?",
                "context": "The Normans gave their name to Normandy, a region in France. They settled there in "
                           "the 10th and 11th centuries.",
                "answer": "Sure! The Normans settled in Normandy in the 9th century.", "spans": []}

    def metrics(self, logits, records, thresholds=None) -> dict[str, float]:
        from seqeval.metrics import classification_report
        from seqeval.scheme import IOB2
        from sklearn.metrics import roc_auc_score

        threshold = (thresholds or {}).get(THRESHOLD_KEY, 0.5)
        scores, gold = example_scores(logits, records)
        true_tags, pred_tags = [], []
        tp = fp = fn = 0
        for row, record in zip(logits, records):
            start, n = record[_ANSWER_SLICE]
            predicted = np.asarray(row)[start:start + n].argmax(axis=-1)
            labels = np.asarray(record[_TOKEN_LABELS], dtype=int)
            keep = labels != IGNORE_INDEX
            labels, predicted = labels[keep], predicted[keep]
            tp += int(((predicted == HALLUCINATION) & (labels == HALLUCINATION)).sum())
            fp += int(((predicted == HALLUCINATION) & (labels != HALLUCINATION)).sum())
            fn += int(((predicted != HALLUCINATION) & (labels == HALLUCINATION)).sum())
            if len(labels):
                true_tags.append(_iob(labels.tolist()))
                pred_tags.append(_iob(predicted.tolist()))
        result: dict[str, float] = {}
        result["token_precision"], result["token_recall"], result["token_f1"] = _prf(tp, fp, fn)
        report = classification_report(true_tags, pred_tags, mode="strict", scheme=IOB2, output_dict=True,
                                       zero_division=0) if true_tags else {}
        micro = report.get("micro avg", {})
        hal = report.get("HALLUCINATION", {})
        result.update({"entity_precision": float(micro.get("precision", 0.0)),
                       "entity_recall": float(micro.get("recall", 0.0)),
                       "entity_f1": float(micro.get("f1-score", 0.0)),
                       "entity_hallucination_f1": float(hal.get("f1-score", 0.0))})
        predicted = scores >= threshold
        tp = int((predicted & (gold == 1)).sum())
        fp = int((predicted & (gold == 0)).sum())
        fn = int((~predicted & (gold == 1)).sum())
        result["example_precision"], result["example_recall"], result["example_f1"] = _prf(tp, fp, fn)
        result["example_auc"] = float(roc_auc_score(gold, scores)) if 0 < gold.sum() < len(gold) else float("nan")
        result["threshold"] = float(threshold)
        result["examples"] = float(len(records))
        return result

    def thresholds(self, logits, records, config) -> dict[str, float]:
        scores, gold = example_scores(logits, records)
        if not 0 < gold.sum() < len(gold):
            return {THRESHOLD_KEY: 0.5}
        return {THRESHOLD_KEY: best_threshold(scores, gold, config.threshold_rule, config.target_precision)}


SPEC = FactSpansSpec(
    name="fact_spans",
    labels=LABELS,
    problem_type="token",
    prepare_schema=FactSpansPrepareSection,
    prepare_fn=prepare,
    generic_prepare_command=False,  # data_prep/fact_spans/cli.py owns `prepare fact-spans`
    main_metric="example_f1",
    window_stride=128,
    window_aggregation="per answer token: P(FACT) = max over windows, other labels share 1 - P(FACT) in "
                       "proportion to their window mean; answers over max_answer_tokens split into parts",
    benchmark="autovalidators.training.benchmarks.fact_spans:benchmark",
    # configs/fact_spans.yaml is the data-prep config of `prepare fact-spans`; the token model's
    # train/export/benchmark recipe is this one. (The shipped grounding model needs no config.)
    config_file="fact_spans_model.yaml",
    extra={"input": "[CLS] question [SEP] context-window [SEP] answer-part [SEP]",
           "encoding": "EncodingRule.for_length: question <= min(64, max_length/8) tokens, answer parts <= "
                       "min(256, max_length/2) tokens, cut between words",
           "training_window": "the window whose context holds most answer token ids; first answer part only",
           "token_label": "majority label of its characters (ties: worse label); ignored ranges -100",
           "example_score": "max over answer tokens of P(HALLUCINATION)",
           "threshold_rule": "chosen on dev by export.threshold_rule (default best example-level F1)",
           "data_recipe": "train_file = <prepare.out_dir>/train_mix.jsonl: every human-labelled train row "
                          "x prepare.mix.human_repeats + a seeded sample of prepare.mix.synthetic synthetic "
                          "rows; see the `prepare:` section of the config and DATA_CARD.md beside the data"},
)


if __name__ == "__main__":  # pragma: no cover - `python -m autovalidators.training.tasks.fact_spans [config]`
    # `autovalidators prepare fact-spans` is taken by the data module's command (configs/fact_spans.yaml,
    # no train mix); this entry point runs this task's `prepare` section, train_mix.jsonl included.
    import sys

    from autovalidators.training.config import load_task_config

    logging.basicConfig(level=logging.INFO)
    settings = load_task_config(sys.argv[1] if len(sys.argv) > 1 else "configs/fact_spans_model.yaml",
                                FactSpansPrepareSection, "fact_spans")
    for note in prepare(settings.prepare)["notes"]:
        logger.info("%s", note)
