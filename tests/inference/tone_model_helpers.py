"""A tiny tone model folder built offline (random 2-layer BERT, 2 training steps, exported)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

WORDS = ("you are an idiot stupid moron hate kill them thanks for asking the order shipped vote election "
         "party government nice day hello friend").split()
TEXTS = {
    "toxic": ["you are an idiot", "stupid moron", "i hate you idiot", "kill them"],
    "clean": ["thanks for asking", "the order shipped", "nice day friend", "hello friend"],
}


def build_tiny_tone_model(root: Path, *, max_length: int = 32) -> Path:
    """Trains and exports a tiny tone model under `root`; returns the models folder (holding tone/)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from autovalidators.data_prep.io import write_jsonl
    from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task
    from autovalidators.training.tasks.tone import TONE_LABELS, TonePrepareConfig
    from autovalidators.training.tiny import build_tiny_encoder
    from autovalidators.training.trainer import train

    rows = []
    for i in range(32):
        kind = "toxic" if i % 2 else "clean"
        labels = {label: None for label in TONE_LABELS}
        labels.update(toxicity=int(kind == "toxic"), insult=int(kind == "toxic"))
        rows.append({"id": f"r{i}", "text": TEXTS[kind][i % 4] + f" {i % 3}", "source": "tiny", "labels": labels})
    write_jsonl(root / "train.jsonl", rows)
    write_jsonl(root / "dev.jsonl", rows[:16])
    encoder = build_tiny_encoder(root / "encoder", WORDS)
    config = TaskConfig[TonePrepareConfig](
        prepare=TonePrepareConfig(output_dir=str(root)),
        train=TrainConfig(base_model=str(encoder), max_length=max_length, batch_size=8, max_steps=2, eval_every=2,
                          learning_rate=1e-3, train_file=str(root / "train.jsonl"), dev_file=str(root / "dev.jsonl"),
                          output_dir=str(root / "run"), cpu_threads=1, early_stopping={"metric": "macro_f1"}),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=False),
    )
    spec = dataclasses.replace(get_task("tone"))  # keep the registry's spec free of this run's weights
    train(spec, config.train)
    export(spec, root / "run", root / "models" / "tone", config)
    return root / "models"
