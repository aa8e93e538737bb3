"""The quickstart's light benchmarks: each fresh model on its own held-out split, JSON for the report.

Built from the task benchmarks' own pieces (`training/benchmark_<task>.py`: quality functions,
per-example predictions, latency inputs), with fewer latency runs and only the data the bundled
samples give: the prepared `test.jsonl` of each task (no WikiQA, OLID or RAGTruth here). Quality is
measured through the runtime validators for the shipped int8 model and, unless turned off, the
run's fp32 graph. The JSON has the shape of the full benchmarks', so the report reads it as is.
Fact spans are scored per source (`score_group`: example- and character-level P/R/F1) on held-out
synthetic answers, and timed on windows no longer than the model's own.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.manifest import load_manifest

from autovalidators.training.benchmarks.common import machine, time_calls
from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.qa_relevance import ranking_metrics

logger = logging.getLogger(__name__)

COMMAND = "autovalidators quickstart --train"


def _variants(run_dir: Path, fp32: bool) -> dict[str, Path | None]:
    """The shipped int8 model (None: the model folder's own file) and, if asked, the run's fp32 graph."""
    variants: dict[str, Path | None] = {"int8": None}
    path = run_dir / "onnx" / "model_fp32.onnx"
    if fp32 and path.is_file():
        variants["fp32"] = path
    return variants


def _header(task: str, model_dir: Path, threads: int) -> tuple[Any, dict[str, Any]]:
    manifest = load_manifest(model_dir)
    return manifest, {
        "task": task, "command": COMMAND, "model_dir": str(model_dir), "model_version": manifest.version,
        "model_sha256": manifest.model_sha256, "model_mb": round((model_dir / manifest.model_file).stat().st_size / 1e6, 2),
        "threads": threads, "machine": machine(), "quality": {}, "latency": {}}


def _test_records(path: Path) -> list[dict]:
    records = list(read_jsonl(path)) if path.is_file() else []
    if not records:
        raise ValueError(f"{path}: no held-out records to benchmark; the test split came out empty")
    return records


def qa_relevance(task_config: TaskConfig, model_dir: Path, run_dir: Path, threads: int, runs: int,
                 fp32: bool) -> dict[str, Any]:
    """Accuracy/P/R/F1/ROC-AUC at the manifest threshold and MAP/MRR on the held-out pairs."""
    from autovalidators.inference.validators.qa_relevance import QARelevanceValidator

    from autovalidators.training.benchmarks.qa_relevance import BATCH, latency_pair, quality

    manifest, report = _header("qa_relevance", model_dir, threads)
    test_file = Path(task_config.prepare.output_dir) / "test.jsonl"
    test = _test_records(test_file)
    report.update(threshold=manifest.thresholds.get("relevant"), data={"test": str(test_file)})
    for name, path in _variants(run_dir, fp32).items():
        validator = QARelevanceValidator(model_dir, manifest, threads=threads, model_path=path)
        report["quality"][name], scores = quality(validator, test, [])
        # MAP/MRR over the test questions, as the full benchmark reports them on WikiQA dev.
        report["quality"][name]["test_ranking"] = ranking_metrics(
            scores, np.asarray([int(r["label"]) for r in test]), [r.get("group") or r["question"] for r in test])
        tokens = min(128, validator.max_length)
        pair = latency_pair(validator, tokens)
        report["latency"][name] = {
            f"single_{tokens}": time_calls(lambda: validator.scores([pair]), runs),
            f"batch_{BATCH}x{tokens}": time_calls(lambda: validator.scores([pair] * BATCH), max(1, runs // 5))}
        if name == "int8":
            report["predictions"] = [
                {"id": r.get("id", str(i)), "set": "test", "label": int(r["label"]), "score": float(score),
                 "question": r["question"], "answer": r["answer"], "language": r.get("language")}
                for i, (r, score) in enumerate(zip(test, scores))]
    return report


def tone(task_config: TaskConfig, model_dir: Path, run_dir: Path, threads: int, runs: int,
         fp32: bool) -> dict[str, Any]:
    """Per-label P/R/F1 and ROC-AUC (all test texts and per source) at the manifest thresholds."""
    from autovalidators.inference.validators.tone import ToneValidator

    from autovalidators.training.benchmarks.tone import BATCH, LATENCY_TEXT, predictions, quality

    manifest, report = _header("tone", model_dir, threads)
    data_dir = Path(task_config.prepare.output_dir)
    sets = {"test": _test_records(data_dir / "test.jsonl")}
    labels = list(manifest.labels)
    report.update(thresholds=manifest.thresholds, window=manifest.window.model_dump(),
                  data={"test": len(sets["test"])}, data_dir=str(data_dir))
    for name, path in _variants(run_dir, fp32).items():
        validator = ToneValidator(model_dir, manifest, threads=threads, model_path=path)
        scores = {"test": validator.scores([r["text"] for r in sets["test"]])}
        report["quality"][name] = quality(scores, sets, labels, validator.thresholds)
        report["latency"][name] = {
            "single_short": time_calls(lambda: validator.scores([LATENCY_TEXT]), runs),
            f"batch_{BATCH}_short": time_calls(lambda: validator.scores([LATENCY_TEXT] * BATCH), max(1, runs // 5))}
        if name == "int8":
            report["predictions"] = predictions(scores, sets, labels)
    return report


def _fact_spans_latency(validator, max_length: int, runs: int) -> dict[str, Any]:
    """Forward-only latency, batch 1, on windows of 128 tokens and of the model's max_length."""
    from autovalidators.training.benchmarks.fact_spans import latency_inputs

    result = {}
    for tokens in sorted({min(128, max_length), max_length}):
        feed = latency_inputs(validator, tokens)
        if feed["input_ids"].shape[1] != tokens:  # question + answer alone overflow this window
            logger.info("fact_spans latency: no %d-token window for this tokenizer; skipped", tokens)
            continue
        result[str(tokens)] = time_calls(lambda feed=feed: validator.session.run(feed), runs)
    return result


def fact_spans(task_config: TaskConfig, model_dir: Path, run_dir: Path, threads: int, runs: int,
               fp32: bool) -> dict[str, Any]:
    """Example/character P/R/F1 per source on the held-out synthetic answers."""
    from autovalidators.inference.validators.fact_spans import FactSpanValidator

    from autovalidators.training.benchmarks.fact_spans import score_group

    manifest, report = _header("fact_spans", model_dir, threads)
    test_file = Path(task_config.prepare.out_dir) / "test.jsonl"
    groups: dict[str, list[dict]] = {}
    for record in _test_records(test_file):
        groups.setdefault(f"test/{record['source']}", []).append(record)
    report.update(threshold=manifest.thresholds.get("hallucination"), data={"test": str(test_file)},
                  note="held-out synthetic answers over the bundled contexts (no human-labelled spans are bundled)")
    for name, path in _variants(run_dir, fp32).items():
        validator = FactSpanValidator(model_dir, manifest, threads=threads, model_path=path)
        report["quality"][name] = {group: score_group(validator, records) for group, records in sorted(groups.items())}
        report["latency"][f"onnx_{name}"] = _fact_spans_latency(validator, manifest.window.max_length, runs)
    return report


BENCHMARKS = {"qa_relevance": qa_relevance, "fact_spans": fact_spans, "tone": tone}


def run(task: str, task_config: TaskConfig, model_dir: Path, run_dir: Path, *, threads: int, runs: int,
        fp32: bool) -> dict[str, Any]:
    """The light benchmark JSON of `task` (see the module docstring)."""
    return BENCHMARKS[task](task_config, model_dir, run_dir, threads, runs, fp32)
