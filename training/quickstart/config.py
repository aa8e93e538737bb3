"""The typed quickstart config (`configs/quickstart_train.yaml`): small per-task settings.

Each task section holds the project's own `TrainConfig` and `ExportConfig` (every knob documented
in `training/config.py`) plus a small data section. The quickstart fills in what only it knows:
the base model (one for all three), the data files and the run folders inside its output folder;
setting those in a task's `train:` section is an error, not a silent override.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from autovalidators.data_prep.fact_spans.config import SynthesisConfig
from autovalidators.inference.config import CONFIG_DIR, StrictModel, load_config

from autovalidators.training.config import ExportConfig, TrainConfig

CONFIG_FILE = "quickstart_train.yaml"
# TrainConfig keys the quickstart sets itself (base model from the top level or --base-model;
# files and run folders inside the output folder).
RESERVED_TRAIN_KEYS = ("base_model", "train_file", "dev_file", "output_dir")
DEFAULT_FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}


class TaskSettings(StrictModel):
    """One task's small run: the shared train/export sections."""

    train: TrainConfig = TrainConfig()
    export: ExportConfig = ExportConfig()

    @model_validator(mode="after")
    def _no_reserved_keys(self) -> "TaskSettings":
        reserved = sorted(set(RESERVED_TRAIN_KEYS) & self.train.model_fields_set)
        if reserved:
            raise ValueError(f"train.{', train.'.join(reserved)}: set by the quickstart (base_model at the top "
                             "level or --base-model; files and folders inside --out); remove them here")
        return self


class QAData(StrictModel):
    """QA-relevance pairs from the bundled contexts (`data_prep.qa_relevance`)."""

    # Other sentences of the same context per question (hard negatives).
    hard_negatives: int = Field(2, ge=0)
    # Another question's answer sentence per question (easy negatives).
    easy_negatives: int = Field(1, ge=0)
    # Share of questions per split, split by question (test = the benchmark's held-out pairs).
    fractions: dict[str, float] = dict(DEFAULT_FRACTIONS)


class QATask(TaskSettings):
    prepare: QAData = QAData()


class FactSpansData(StrictModel):
    """Synthetic span-labelled answers over the bundled contexts (`data_prep.fact_spans`)."""

    synthesis: SynthesisConfig = SynthesisConfig()
    # Split of the contexts (grouped, translations together); test = the benchmark's held-out set.
    splits: dict[str, float] = dict(DEFAULT_FRACTIONS)


class FactSpansTask(TaskSettings):
    prepare: FactSpansData = FactSpansData()


class ToneData(StrictModel):
    """Tone labels for the bundled samples, by the rules of `configs/tone.yaml`."""

    # Run the word-list labeller as well (obscenity, toxicity positives), as `label tone` does.
    lexicon: bool = True
    fractions: dict[str, float] = dict(DEFAULT_FRACTIONS)


class ToneTask(TaskSettings):
    prepare: ToneData = ToneData()


class BenchmarkSettings(StrictModel):
    """The light benchmark run on each fresh model."""

    # onnxruntime intra-op threads for quality and latency runs.
    threads: int = Field(2, ge=1)
    # Timed calls per latency setting (batches: a fifth of it), after 3 warm-up calls.
    latency_runs: int = Field(20, ge=1)
    # Also score the run's fp32 ONNX graph beside the shipped int8 model (doubles the scoring time).
    fp32: bool = True
    # Rounds over the example cases for the whole-gate latency (0 = skip the gate benchmark).
    gate_repeat: int = Field(3, ge=0)


class QuickstartTrainConfig(StrictModel):
    """`configs/quickstart_train.yaml`: everything `quickstart --train` runs, small enough for a CPU."""

    # The one encoder all three validators start from: "minilm" (offline package), a local
    # folder or a hub name. `--base-model` overrides it.
    base_model: str = "minilm"
    # Seeds the data preparation (splits, synthesis); each task's train.seed seeds its training.
    seed: int = 13
    qa_relevance: QATask = QATask()
    fact_spans: FactSpansTask = FactSpansTask()
    tone: ToneTask = ToneTask()
    benchmark: BenchmarkSettings = BenchmarkSettings()

    def tasks(self) -> dict[str, TaskSettings]:
        """Task name -> settings, in the order the quickstart runs them."""
        return {"qa_relevance": self.qa_relevance, "fact_spans": self.fact_spans, "tone": self.tone}

    def with_overrides(self, *, base_model: str | None = None, steps: int | None = None) -> "QuickstartTrainConfig":
        """A copy with `--base-model` and `--steps` (max_steps of every task) applied."""
        update: dict = {}
        if base_model:
            update["base_model"] = base_model
        if steps is not None:
            if steps < 1:
                raise ValueError(f"--steps must be at least 1, got {steps}")
            for name, task in self.tasks().items():
                update[name] = task.model_copy(update={"train": task.train.model_copy(update={"max_steps": steps})})
        return self.model_copy(update=update)


def load_quickstart_config(path: str | Path | None = None) -> QuickstartTrainConfig:
    """The quickstart config from `path`, else the shipped `configs/quickstart_train.yaml`."""
    return load_config(path or CONFIG_DIR / CONFIG_FILE, QuickstartTrainConfig)
