"""Tiny offline fixtures for the training tests: a random 2-layer BERT and prepared QA pairs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from autovalidators.data_prep.io import write_jsonl  # noqa: E402
from autovalidators.data_prep.qa_relevance import QARelevancePrepareConfig  # noqa: E402
from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig  # noqa: E402
from autovalidators.training.tiny import build_tiny_encoder, tiny_qa_records, tiny_words  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("encoder"), tiny_words())


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("prepared")
    records = tiny_qa_records(repeats=2)
    write_jsonl(folder / "train.jsonl", records)
    write_jsonl(folder / "dev.jsonl", records[:12])
    write_jsonl(folder / "test.jsonl", records[12:])
    write_jsonl(folder / "wikiqa_dev.jsonl", [{**r, "qid": r["group"]} for r in records[:8]])
    return folder


def make_task_config(encoder: Path, data: Path, output_dir: Path, **train: object) -> TaskConfig:
    settings = dict(base_model=str(encoder), max_length=32, batch_size=4, eval_batch_size=8, max_steps=2,
                    eval_every=1, train_file=str(data / "train.jsonl"), dev_file=str(data / "dev.jsonl"),
                    output_dir=str(output_dir), cpu_threads=1, log_every=1, learning_rate=1e-3)
    settings.update(train)
    return TaskConfig[QARelevancePrepareConfig](
        prepare=QARelevancePrepareConfig(output_dir=str(data)), train=TrainConfig(**settings),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=False),
    )


@pytest.fixture(scope="session")
def make_config():
    """make_config(encoder, data, output_dir, **train_overrides) -> TaskConfig."""
    return make_task_config


@pytest.fixture(scope="session")
def tiny_run(tiny_encoder, tiny_data, tmp_path_factory):
    """A 2-step training run: (task config, run dir)."""
    from autovalidators.training.tasks import get_task
    from autovalidators.training.trainer import train

    run_dir = tmp_path_factory.mktemp("runs") / "qa"
    config = make_task_config(tiny_encoder, tiny_data, run_dir)
    train(get_task("qa_relevance"), config.train)
    return config, run_dir


@pytest.fixture(scope="session")
def tiny_exported(tiny_run, tmp_path_factory):
    """The tiny run exported as a shipped qa_relevance folder, fused where onnxruntime fuses it:
    (task config, run dir, shipped folder, manifest)."""
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task

    config, run_dir = tiny_run
    to = tmp_path_factory.mktemp("models") / "qa_relevance"
    fused = config.model_copy(update={"export": config.export.model_copy(update={"optimize": True})})
    return config, run_dir, to, export(get_task("qa_relevance"), run_dir, to, fused)
