"""A tiny fact-span model folder built offline: random 2-layer BERT, 2 training steps, ONNX export."""

from __future__ import annotations

import os
from pathlib import Path

CONTEXTS = [
    "paris is the capital of france. the nile flows through egypt.",
    "bees make honey from nectar. the war ended in 1945.",
    "hamlet was written by shakespeare. everest is about 8849 metres tall.",
    "leonardo painted the mona lisa. water is made of hydrogen and oxygen.",
]


def fact_record(index: int, context: str, answer: str, hallucinated: str | None = None, noise: str = "") -> dict:
    """A span record: `noise` prefix NOISE, `hallucinated` substring HALLUCINATION, the rest FACT."""
    full = f"{noise}{answer}"
    spans = []
    if noise:
        spans.append({"start": 0, "end": len(noise.rstrip()), "label": "NOISE"})
    if hallucinated:
        start = full.index(hallucinated)
        if start > len(noise):
            spans.append({"start": len(noise), "end": start - 1, "label": "FACT"})
        spans.append({"start": start, "end": start + len(hallucinated), "label": "HALLUCINATION"})
        if start + len(hallucinated) < len(full):
            spans.append({"start": start + len(hallucinated) + 1, "end": len(full), "label": "FACT"})
    else:
        spans.append({"start": len(noise), "end": len(full), "label": "FACT"})
    return {"id": f"r{index}", "context": context, "question": "what is true", "answer": full, "spans": spans,
            "ignored": [], "facts": [], "source": "tiny", "group": context[:10], "language": "en",
            "task_type": "QA", "origin": "synthetic", "grounding_usable": True}


def tiny_fact_records() -> list[dict]:
    records = []
    for i, context in enumerate(CONTEXTS):
        first = context.split(". ")[0]
        other = CONTEXTS[(i + 1) % len(CONTEXTS)].split(". ")[0]
        records.append(fact_record(len(records), context, f"{first}."))
        records.append(fact_record(len(records), context, f"{first} and {other}.", hallucinated=f"{other}.",
                                   noise="sure! "))
    return records


def tiny_words() -> list[str]:
    return sorted({w.strip(".!") for r in tiny_fact_records() for text in (r["context"], r["answer"], r["question"])
                   for w in text.split()} | {"sure", "привет", "мир", "столица", "франции", "париж"})


def build_tiny_fact_model(root: Path, *, optimize: bool = False) -> tuple[Path, Path]:
    """(models dir holding fact_spans/, run dir): trained 2 steps, exported fp32 + int8."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from autovalidators.data_prep.io import write_jsonl
    from autovalidators.training.config import EarlyStopping, ExportConfig, TaskConfig, TrainConfig
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task
    from autovalidators.training.tasks.fact_spans import FactSpansPrepareSection
    from autovalidators.training.tiny import build_tiny_encoder
    from autovalidators.training.trainer import train

    encoder = build_tiny_encoder(root / "encoder", tiny_words())
    records = tiny_fact_records()
    write_jsonl(root / "train.jsonl", records)
    write_jsonl(root / "dev.jsonl", records)
    config = TaskConfig[FactSpansPrepareSection](
        prepare=FactSpansPrepareSection(out_dir=str(root / "prepared")),
        train=TrainConfig(base_model=str(encoder), max_length=64, batch_size=4, max_steps=2, eval_every=1,
                          learning_rate=1e-3, train_file=str(root / "train.jsonl"), dev_file=str(root / "dev.jsonl"),
                          output_dir=str(root / "run"), cpu_threads=1, log_every=1,
                          early_stopping=EarlyStopping(metric="example_f1")),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=optimize),
    )
    spec = get_task("fact_spans")
    train(spec, config.train)
    export(spec, root / "run", root / "models" / "fact_spans", config)
    return root / "models", root / "run"
