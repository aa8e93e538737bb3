"""`autovalidators benchmark fact-spans`: quality on never-trained-on data, fp32 vs int8, and latency.

Quality, through the runtime `FactSpanValidator` (production windowing and aggregation), for the
shipped model and the run's fp32 ONNX graph, on `<prepare.out_dir>/heldout/`:
- RAGTruth per task (Summary, Data2txt). The subset's QA rows have no reference (the passages
  were lost when the subset was made): they cannot be scored for grounding and are excluded
  (their count is reported);
- FaithBench (the held-out source documents).
The fp32 graph is scored on the first `FP32_EXAMPLES` of each group, beside the shipped model on
the same subset (`<shipped>@fp32_subset`). Example-level P/R/F1: gold = the answer has a HALLUCINATION span; predicted = `hallucinated`.
Character-span P/R/F1 (micro over all characters of a group): predicted hallucination characters
= the HALLUCINATION spans, gold = the gold HALLUCINATION spans; `ignored` characters count in
neither. Every example's score and spans go into the JSON, so curves can be drawn later.

Baselines, scored by the same `score_group` on the same records as the shipped model, in the same
run (`report["baselines"]`): `always_hallucinated` (every answer hallucinated, every answer
character a hallucination: example recall 1, precision = the share of hallucinated answers; the
reference point the issue quotes as F1 ~52 on RAGTruth) and `heuristic` (the lexical
`HeuristicFactSpans` the gate falls back to when no model is shipped).

Latency: model forward only (tokenisation excluded for all three), one window of exactly 128, 256
and 512 tokens, batch 1, `threads` intra-op threads (torch.set_num_threads for torch eager).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators.fact_spans import FactSpanValidator
from autovalidators.inference.validators.grounding_spans import TASK as GROUNDING_TASK

from autovalidators.training.benchmarks.common import (load_torch_model, machine, print_table, time_calls,
                                                       time_torch_forward, update_manifest_metrics)
# Re-exported: callers score groups through this module's names (the quickstart, the tests).
from autovalidators.training.benchmarks.span_scoring import (BASELINES, add_ragtruth_total,  # noqa: F401
                                                             load_heldout, paired_bootstrap, score_baselines,
                                                             score_group, summarise)
from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import TaskSpec

logger = logging.getLogger(__name__)

LATENCY_TOKENS = (128, 256, 512)
RUNS = {128: 40, 256: 30, 512: 20}
FP32_EXAMPLES = 80  # per group: fp32 vs int8 is compared on this many examples


def latency_inputs(validator: FactSpanValidator, tokens: int) -> dict[str, np.ndarray]:
    """One window of exactly `tokens` tokens: [CLS] question [SEP] context [SEP] answer [SEP]."""
    tokenizer = validator.tokenizer
    question = tokenizer.encode("When did the Normans settle in Normandy?", add_special_tokens=False).ids
    answer = tokenizer.encode("The Normans settled in Normandy in the 10th century, led by Rollo.",
                              add_special_tokens=False).ids
    sentence = tokenizer.encode("Normandy is a region of France named after the Norse settlers who arrived there "
                                "in the tenth century and founded a duchy. ", add_special_tokens=False).ids
    room = tokens - 4 - len(question) - len(answer)
    context = (sentence * (room // len(sentence) + 1))[:room]
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    first = [cls_id] + question + [sep_id] + context + [sep_id]
    ids = first + answer + [sep_id]
    return {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.array([[0] * len(first) + [1] * (len(answer) + 1)], dtype=np.int64)}


def onnx_latency(validator: FactSpanValidator) -> dict[str, Any]:
    return {str(n): time_calls(lambda feed=latency_inputs(validator, n): validator.session.run(feed), RUNS[n])
            for n in LATENCY_TOKENS}


def torch_latency(spec: TaskSpec, best: Path, validator: FactSpanValidator, threads: int) -> dict[str, Any] | None:
    model = load_torch_model(spec, best, threads)
    if model is None:
        return None
    return time_torch_forward(model, {n: latency_inputs(validator, n) for n in LATENCY_TOKENS}, RUNS)


def benchmark(spec: TaskSpec, task_config: TaskConfig, model_dir: Path, *, run_dir: Path | None = None,
              threads: int = 2, torch_latency: bool = True, update_manifest: bool = False) -> dict[str, Any]:
    manifest = load_manifest(model_dir)
    if manifest.task == GROUNDING_TASK:  # the shipped sentence-grounding model has its own benchmark
        from autovalidators.training.benchmarks.grounding import benchmark_grounding

        return benchmark_grounding(model_dir, manifest, run_dir=run_dir, threads=threads,
                                   torch_latency=torch_latency, update_manifest=update_manifest)
    run_dir = Path(run_dir or manifest.training.get("run_dir", ""))
    data_dir = Path(task_config.prepare.out_dir)
    groups, excluded = load_heldout(data_dir)
    shipped = "int8" if manifest.metrics.get("precision", "int8") == "int8" else "fp32"
    variants: dict[str, Path | None] = {shipped: None}
    fp32 = run_dir / "onnx" / "model_fp32.onnx"
    if shipped == "int8" and fp32.is_file():
        variants["fp32"] = fp32
    report: dict[str, Any] = {
        "task": spec.name, "model_dir": str(model_dir), "model_version": manifest.version,
        "model_sha256": manifest.model_sha256, "threshold": manifest.thresholds.get("hallucination"),
        "model_mb": round((model_dir / manifest.model_file).stat().st_size / 1e6, 2),
        "threads": threads, "machine": machine(), "data": str(data_dir / "heldout"),
        "excluded": {k: f"{v} rows without a reference (grounding_usable=false): not scorable" for k, v in
                     excluded.items()},
        "quality": {}, "latency": {},
    }
    validator = None
    for name, path in variants.items():
        validator = FactSpanValidator(model_dir, manifest, threads=threads, model_path=path)
        report["quality"][name] = {}
        for group, records in sorted(groups.items()):
            # fp32 is scored on the first FP32_EXAMPLES of each group only (2 CPU cores: the full
            # set twice takes too long); the shipped model's numbers on that subset sit beside it.
            records = records if name == shipped else records[:FP32_EXAMPLES]
            logger.info("scoring %s on %s: %d examples", name, group, len(records))
            report["quality"][name][group] = score_group(validator, records)
            if name != shipped:
                subset = report["quality"][shipped][group]["predictions"][:FP32_EXAMPLES]
                report["quality"].setdefault(f"{shipped}@fp32_subset", {})[group] = summarise(subset)
        add_ragtruth_total(report["quality"][name])
        report["latency"][f"onnx_{name}"] = onnx_latency(validator)
    logger.info("scoring the baselines (%s) on the same records", ", ".join(BASELINES))
    report["baselines"] = score_baselines(groups)
    if torch_latency and validator is not None:
        measured = globals()["torch_latency"](spec, run_dir / "best", validator, threads)
        if measured:
            report["latency"]["torch_eager"] = measured

    console = Console(stderr=True, width=160)  # wide enough for every column when piped
    rows = [{"model": name, "data": group, "n": r["examples"], "halluc.": r["hallucinated"],
             "ex P": r["example"]["precision"], "ex R": r["example"]["recall"], "ex F1": r["example"]["f1"],
             "char P": r["char"]["precision"], "char R": r["char"]["recall"], "char F1": r["char"]["f1"]}
            for name, by_group in [*report["quality"].items(),
                                   *((f"baseline: {b}", g) for b, g in report["baselines"].items())]
            for group, r in by_group.items()]
    print_table(f"fact_spans held-out quality (threshold {report['threshold']})", rows,
                ["model", "data", "n", "halluc.", "ex P", "ex R", "ex F1", "char P", "char R", "char F1"], console)
    latency_rows = [{"runtime": name, **{f"{n} p50 ms": r[str(n)]["p50_ms"] for n in LATENCY_TOKENS},
                     **{f"{n} p95 ms": r[str(n)]["p95_ms"] for n in LATENCY_TOKENS}}
                    for name, r in report["latency"].items()]
    print_table(f"fact_spans latency, batch 1, forward only ({threads} threads)", latency_rows,
                ["runtime"] + [f"{n} p{q} ms" for n in LATENCY_TOKENS for q in (50, 95)], console)
    if "torch_eager" in report["latency"] and f"onnx_{shipped}" in report["latency"]:
        report["speedup_512_p50"] = (report["latency"]["torch_eager"]["512"]["p50_ms"]
                                     / report["latency"][f"onnx_{shipped}"]["512"]["p50_ms"])
    if update_manifest:
        def scores(by_name: dict[str, dict[str, Any]]) -> dict[str, Any]:
            return {name: {group: {"examples": r["examples"], "example": r["example"], "char": r["char"]}
                           for group, r in by_group.items()} for name, by_group in by_name.items()}

        update_manifest_metrics(model_dir, {"benchmark": {
            "quality": scores(report["quality"]), "baselines": scores(report["baselines"]),
            "latency": report["latency"], "threads": threads,
            "speedup_512_p50": report.get("speedup_512_p50"), "excluded": report["excluded"],
            "machine": report["machine"]}})
    return report
