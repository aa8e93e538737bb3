"""`autovalidators benchmark qa-relevance`: quality and latency of the shipped model.

Quality, for the shipped int8 model and the run's fp32 ONNX graph, both through the runtime
validator (so tokenisation and truncation are the production ones):
- held-out pairs (`<prepare.output_dir>/test.jsonl`, questions never seen in training):
  accuracy, precision, recall, F1 at the manifest threshold, ROC-AUC; the same per language
  (`test.by_language`: Russian pairs are a minority the pooled numbers hide) and per source
  (`test.by_source`);
- WikiQA dev answer selection: MAP and MRR over questions with at least one correct sentence.
Latency: one 128-token pair and a batch of 32 such pairs, `threads` intra-op threads, p50/p95 of
end-to-end `scores()` calls (tokenisation included); torch eager on the same inputs when torch is
installed (model forward only, tokenisation excluded, which flatters torch slightly).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators.qa_relevance import QARelevanceValidator

from autovalidators.training.benchmarks.common import load_torch_model, machine, print_table, time_calls, update_manifest_metrics
from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import TaskSpec
from autovalidators.training.tasks.qa_relevance import classification_metrics, ranking_metrics

logger = logging.getLogger(__name__)

LATENCY_TOKENS = 128
BATCH = 32
SINGLE_RUNS, BATCH_RUNS = 100, 20


def latency_pair(validator: QARelevanceValidator, tokens: int = LATENCY_TOKENS) -> tuple[str, str]:
    """A realistic question with an answer long enough that the pair fills exactly `tokens`."""
    question = "How are epithelial tissues joined together in the human body?"
    sentence = ("Epithelial cells are bound together by tight junctions, adherens junctions and "
                "desmosomes, which anchor them to each other and to the basement membrane below. ")
    answer = sentence * 8
    length = len(validator.tokenizer.encode(question, answer).ids)
    if length != min(tokens, validator.max_length):
        raise ValueError(f"latency pair is {length} tokens, expected {tokens}")
    return question, answer


def breakdown(scores: np.ndarray, labels: np.ndarray, keys: list[str], threshold: float) -> dict[str, Any]:
    """`classification_metrics` (+ `pairs`) per key, keys sorted; ROC-AUC is NaN where one class is absent."""
    result = {}
    for key in sorted(set(keys)):
        mask = np.asarray([k == key for k in keys])
        result[key] = {**classification_metrics(scores[mask], labels[mask], threshold), "pairs": int(mask.sum())}
    return result


def quality(validator: QARelevanceValidator, test: list[dict], wikiqa: list[dict]
            ) -> tuple[dict[str, Any], np.ndarray | None]:
    """Metrics on the held-out pairs and WikiQA dev, and the test pairs' scores (for predictions)."""
    result: dict[str, Any] = {}
    test_scores = None
    if test:
        scores = test_scores = validator.scores([(r["question"], r["answer"]) for r in test])
        labels = np.asarray([int(r["label"]) for r in test])
        result["test"] = classification_metrics(scores, labels, validator.threshold)
        result["test"]["pairs"] = len(test)
        for name, field in (("by_language", "language"), ("by_source", "source")):
            result["test"][name] = breakdown(scores, labels, [str(r.get(field) or "unknown") for r in test],
                                             validator.threshold)
    if wikiqa:
        scores = validator.scores([(r["question"], r["answer"]) for r in wikiqa])
        labels = np.asarray([int(r["label"]) for r in wikiqa])
        result["wikiqa_dev"] = ranking_metrics(scores, labels, [r["qid"] or r["group"] for r in wikiqa])
        result["wikiqa_dev"]["roc_auc"] = classification_metrics(scores, labels, validator.threshold)["roc_auc"]
    return result, test_scores


def latency(validator: QARelevanceValidator, pair: tuple[str, str]) -> dict[str, Any]:
    return {"single_128": time_calls(lambda: validator.scores([pair]), SINGLE_RUNS),
            f"batch_{BATCH}x128": time_calls(lambda: validator.scores([pair] * BATCH), BATCH_RUNS)}


def torch_latency(spec: TaskSpec, best: Path, validator: QARelevanceValidator, pair: tuple[str, str],
                  threads: int) -> dict[str, Any] | None:
    model = load_torch_model(spec, best, threads)
    if model is None:
        return None
    import torch
    encoding = validator.tokenizer.encode(*pair)
    inputs = {"input_ids": encoding.ids, "attention_mask": encoding.attention_mask, "token_type_ids": encoding.type_ids}

    def batch_of(n: int) -> dict[str, Any]:
        return {k: torch.tensor([v] * n) for k, v in inputs.items()}

    single, batch = batch_of(1), batch_of(BATCH)
    with torch.inference_mode():
        return {"single_128": time_calls(lambda: model(**single), SINGLE_RUNS),
                f"batch_{BATCH}x128": time_calls(lambda: model(**batch), BATCH_RUNS)}


def benchmark(spec: TaskSpec, task_config: TaskConfig, model_dir: Path, *, run_dir: Path | None = None,
              threads: int = 2, torch_latency: bool = True, update_manifest: bool = False) -> dict[str, Any]:
    manifest = load_manifest(model_dir)
    run_dir = Path(run_dir or manifest.training.get("run_dir", ""))
    data_dir = Path(task_config.prepare.output_dir)
    test = list(read_jsonl(data_dir / "test.jsonl")) if (data_dir / "test.jsonl").is_file() else []
    wikiqa = list(read_jsonl(data_dir / "wikiqa_dev.jsonl")) if (data_dir / "wikiqa_dev.jsonl").is_file() else []
    if not test and not wikiqa:
        raise FileNotFoundError(f"{data_dir}: no test.jsonl or wikiqa_dev.jsonl; run `autovalidators prepare qa-relevance`")

    variants = {"int8" if manifest.metrics.get("precision", "int8") == "int8" else "shipped": None}
    fp32 = run_dir / "onnx" / "model_fp32.onnx"
    if fp32.is_file():
        variants["fp32"] = fp32
    report: dict[str, Any] = {
        "task": spec.name, "model_dir": str(model_dir), "model_version": manifest.version,
        "model_sha256": manifest.model_sha256, "threshold": manifest.thresholds.get("relevant"),
        "model_mb": round((model_dir / manifest.model_file).stat().st_size / 1e6, 2),
        "threads": threads, "machine": machine(),
        "data": {"test": str(data_dir / "test.jsonl"), "wikiqa_dev": str(data_dir / "wikiqa_dev.jsonl")},
        "quality": {}, "latency": {},
    }
    for name, path in variants.items():
        validator = QARelevanceValidator(model_dir, manifest, threads=threads, model_path=path)
        logger.info("scoring %s: %d test pairs, %d WikiQA dev pairs", name, len(test), len(wikiqa))
        report["quality"][name], test_scores = quality(validator, test, wikiqa)
        report["latency"][name] = latency(validator, latency_pair(validator))
        if "predictions" not in report and test_scores is not None:
            # The shipped model's per-pair scores: the report draws PR curves, calibration and the
            # worst errors from them. Kept out of the manifest (only metrics go there).
            report["predictions"] = [
                {"id": r.get("id", str(i)), "set": "test", "label": int(r["label"]), "score": float(score),
                 "question": r["question"], "answer": r["answer"], "language": r.get("language")}
                for i, (r, score) in enumerate(zip(test, test_scores))]
    if torch_latency:
        measured = globals()["torch_latency"](spec, run_dir / "best", validator, latency_pair(validator), threads)
        if measured:
            report["latency"]["torch_eager"] = measured

    rows = []
    for name, result in report["quality"].items():
        rows.append({"model": name, **{f"test {k}": v for k, v in result.get("test", {}).items()
                                       if k in ("accuracy", "precision", "recall", "f1", "roc_auc")},
                     "wikiqa MAP": result.get("wikiqa_dev", {}).get("map"),
                     "wikiqa MRR": result.get("wikiqa_dev", {}).get("mrr")})
    print_table(f"qa_relevance quality (threshold {report['threshold']:.3f})", rows,
                ["model", "test accuracy", "test precision", "test recall", "test f1", "test roc_auc",
                 "wikiqa MAP", "wikiqa MRR"])
    language_rows = [{"model": name, "language": language, **{k: metrics[k] for k in ("pairs", "f1", "roc_auc")}}
                     for name, result in report["quality"].items()
                     for language, metrics in result.get("test", {}).get("by_language", {}).items()]
    if language_rows:
        print_table("qa_relevance test pairs per language", language_rows, ["model", "language", "pairs", "f1", "roc_auc"])
    latency_rows = [{"runtime": name, "1x128 p50 ms": r["single_128"]["p50_ms"], "1x128 p95 ms": r["single_128"]["p95_ms"],
                     f"{BATCH}x128 p50 ms": r[f"batch_{BATCH}x128"]["p50_ms"],
                     f"{BATCH}x128 p95 ms": r[f"batch_{BATCH}x128"]["p95_ms"]} for name, r in report["latency"].items()]
    print_table(f"qa_relevance latency ({threads} threads)", latency_rows,
                ["runtime", "1x128 p50 ms", "1x128 p95 ms", f"{BATCH}x128 p50 ms", f"{BATCH}x128 p95 ms"])

    report["machine_after"] = machine()
    shipped = next(iter(variants))
    if update_manifest:
        update_manifest_metrics(model_dir, {"benchmark": {
            "quality": report["quality"][shipped], "latency": report["latency"][shipped], "threads": threads,
            "machine": report["machine"]}})
    logger.debug("report: %s", json.dumps(report)[:500])
    return report
