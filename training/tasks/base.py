"""The Task spec: each model task described once, read by prepare, train, export and benchmark.

A spec says what the labels are, which kind of head the encoder gets, how a prepared record
becomes model inputs, which loss and metrics apply, and which names the ONNX graph exposes.
Three problem types are supported by the shared trainer and exporter:

- `single_label`: sequence classification, softmax over `labels` (qa_relevance: 0/1).
- `multi_label`: sequence classification, one sigmoid per label; a record's missing labels are
  `-1` in its target vector and masked out of the BCE loss (tone: sources label only some labels).
- `token`: token classification, one label per token; `-100` marks tokens without a label
  (fact_spans: context and special tokens).

Nothing here imports torch at module import time: the CLI imports specs to list commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

import numpy as np
from pydantic import BaseModel

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from tokenizers import Tokenizer

    from autovalidators.training.config import ExportConfig

ProblemType = Literal["single_label", "multi_label", "token"]
# The label value meaning "no label here": ignored by the loss.
IGNORE_INDEX = -100
MISSING_LABEL = -1.0


@dataclass
class TaskSpec:
    """Everything task-specific the shared training/export/benchmark code needs.

    Subclass and override `encode`, `metrics` and, where the defaults do not fit, `loss`,
    `probabilities` and `thresholds`.
    """

    name: str  # snake_case: configs/<name>.yaml, models/<name>/, manifest task
    labels: tuple[str, ...]
    problem_type: ProblemType
    prepare_schema: type[BaseModel]
    prepare_fn: Callable[[Any], dict]  # prepare(config.prepare) -> data card
    main_metric: str  # the dev metric int8 must not lose more than ExportConfig.int8_max_drop of
    # Names of the ONNX graph's inputs/outputs, in the order the runtime feeds them.
    input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")
    output_names: tuple[str, ...] = ("logits",)
    # How inputs longer than the encoder window are handled, written into the manifest.
    window_stride: int = 0
    window_aggregation: str = "truncate"
    # False when a data_prep module owns `autovalidators prepare <task>` (it then dispatches task
    # configs to `prepare_fn` itself), so one command name never has two registrations.
    generic_prepare_command: bool = True
    # "module:function" running `autovalidators benchmark <task>`; see training/benchmarks/common.py.
    benchmark: str = ""
    # The task's TaskConfig YAML under configs/ when it is not `<name>.yaml` (tone: that name holds
    # the label scheme, so its train/export config is `tone_model.yaml`).
    config_file: str = ""
    # True when the task's runtime validator routes `export.fallback_languages` to its heuristic.
    language_fallback: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cli_name(self) -> str:
        return self.name.replace("_", "-")

    # ---- inputs -------------------------------------------------------------------------------
    def on_train_records(self, records: Sequence[dict]) -> None:
        """Called by the trainer with the training records before the model is built (e.g. to
        derive class weights from label counts). Default: nothing."""

    def encode(self, tokenizer: "Tokenizer", record: dict, max_length: int) -> dict[str, Any]:
        """One prepared record -> {input_ids, attention_mask, token_type_ids, labels} (unpadded)."""
        raise NotImplementedError

    def example_text(self) -> dict:
        """A record to trace the ONNX export with (any realistic shape will do)."""
        raise NotImplementedError

    # ---- model --------------------------------------------------------------------------------
    def model_class(self):
        from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

        return AutoModelForTokenClassification if self.problem_type == "token" else AutoModelForSequenceClassification

    def model_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "num_labels": len(self.labels),
            "id2label": dict(enumerate(self.labels)),
            "label2id": {label: i for i, label in enumerate(self.labels)},
        }
        if self.problem_type == "multi_label":
            kwargs["problem_type"] = "multi_label_classification"
        elif self.problem_type == "single_label":
            kwargs["problem_type"] = "single_label_classification"
        return kwargs

    def loss(self, logits: "torch.Tensor", labels: "torch.Tensor") -> "torch.Tensor":
        """Cross-entropy (single-label, token) or BCE with missing labels masked (multi-label)."""
        import torch.nn.functional as F

        if self.problem_type == "multi_label":
            mask = (labels != MISSING_LABEL).float()
            per_label = F.binary_cross_entropy_with_logits(logits, labels.clamp(min=0.0), reduction="none")
            # Average over the labels that are present; a batch with none contributes 0, not NaN.
            return (per_label * mask).sum() / mask.sum().clamp(min=1.0)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)

    # ---- outputs ------------------------------------------------------------------------------
    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """Softmax for single-label/token tasks, sigmoid for multi-label; NumPy only (runtime-safe)."""
        return probabilities(logits, self.problem_type)

    def metrics(self, logits: np.ndarray, records: Sequence[dict], thresholds: dict[str, float] | None = None
                ) -> dict[str, float]:
        """Dev/test metrics from raw logits; must include `main_metric`."""
        raise NotImplementedError

    def thresholds(self, logits: np.ndarray, records: Sequence[dict], config: "ExportConfig") -> dict[str, float]:
        """Decision thresholds chosen on dev (stored in the manifest). Default: none."""
        return {}

    def manifest_extra(self) -> dict[str, Any]:
        """Task facts for the manifest's `training` section (e.g. how pairs are built)."""
        return dict(self.extra)


def probabilities(logits: np.ndarray, problem_type: ProblemType) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    if problem_type == "multi_label":
        return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# A precision measured on a handful of flagged dev rows says nothing: politics on the Russian dev
# rows reached 0.9 on the top dozen (recall 8%) with retrained encoders, and the cut that served
# then flagged almost nothing (F1 0.03-0.15 against 0.63 by best F1; training/README.md, tone).
MIN_FLAGGED_FOR_PRECISION = 30


def best_threshold(scores: np.ndarray, labels: np.ndarray, rule: str = "best_f1",
                   target_precision: float = 0.9, min_flagged: int = MIN_FLAGGED_FOR_PRECISION) -> float:
    """The decision threshold on a positive-class score, by a documented rule.

    `best_f1`: the score cut that maximises F1 on these examples (ties: the higher cut).
    `target_precision`: the lowest cut whose precision reaches `target_precision` (most recall at
    that precision) among the cuts that flag at least `min_flagged` examples; falls back to best F1
    when no such cut reaches it.
    """
    from sklearn.metrics import precision_recall_curve

    precision, recall, cuts = precision_recall_curve(labels, scores)
    precision, recall = precision[:-1], recall[:-1]  # the last point has no threshold
    if rule == "target_precision":
        flagged = len(scores) - np.searchsorted(np.sort(scores), cuts, side="left")  # examples scoring >= each cut
        reaching = np.flatnonzero((precision >= target_precision) & (flagged >= min_flagged))
        if reaching.size:
            return float(cuts[reaching[0]])
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    best = np.flatnonzero(f1 == f1.max())[-1]
    return float(cuts[best])
