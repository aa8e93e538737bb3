"""`autovalidators benchmark fact-spans` for the shipped grounding model (task `fact_spans_grounding`).

Quality, through the runtime `GroundingFactSpans` (production chunking, features, combiner), on
data never trained on, in one table with the `always_hallucinated` and `heuristic` baselines
scored on the same rows in the same run:
- RAGTruth held-out per task and pooled, FaithBench held-out (`<data>/heldout/`, span records):
  example P/R/F1 (gold = the answer has a hallucination span) and character P/R/F1;
- the judged test split (`<data>/answers/test.jsonl`) per set: span sets (XSumFaith, WiCE) with
  example and character F1, response sets (SummEdits, FIB, BEGIN, FaithDial) with balanced
  accuracy (mean of the recalls of hallucinated and faithful answers) beside example F1.
`<data>` is the manifest's `training.data.dir` (written by the combiner from `prepare grounding`).

Latency (`threads` intra-op threads): the cross-encoder forward, batch 1, one pair of exactly
128/256/512 tokens, int8 vs fp32 ONNX vs torch eager; and per case on the RAGTruth held-out
cases (≈ 600 context tokens, 3-8 answer sentences), through the validator and through a Gate
with every shipped validator (what `autovalidators validate` runs), p50/p95.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from rich.console import Console

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.case import Case
from autovalidators.inference.latency import percentiles
from autovalidators.inference.manifest import Manifest
from autovalidators.inference.results import SpanLabel
from autovalidators.inference.validators.base import Validator
from autovalidators.inference.validators.grounding_spans import GroundingFactSpans

from autovalidators.training.benchmarks.common import load_torch_model, machine, print_table, time_calls, time_torch_forward, update_manifest_metrics
from autovalidators.training.benchmarks.span_scoring import (BASELINES, _chars, add_ragtruth_total, load_heldout,
                                                               paired_bootstrap, score_group, sentence_counts,
                                                               summarise)

logger = logging.getLogger(__name__)
LATENCY_TOKENS = (128, 256, 512)
RUNS = {128: 40, 256: 30, 512: 20}
BATCH = 16
FP32_EXAMPLES = 80
RESPONSE_SETS = ("summedits", "fib", "begin", "faithdial")


def load_judged_test(data_dir: Path) -> dict[str, list[dict]]:
    path = data_dir / "answers" / "test.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run `autovalidators prepare grounding`")
    groups: dict[str, list[dict]] = {}
    for record in read_jsonl(path):
        if record["source"] in ("ragtruth", "faithbench"):
            continue  # their benchmark rows are the held-out span records
        groups.setdefault(f"{record['source']} test", []).append(record)
    return groups


def score_judged(validator: Validator, records: list[dict]) -> dict[str, Any]:
    """Example P/R/F1, balanced accuracy and (span sets) character P/R/F1 of judged texts."""
    cases = [Case(id=r["id"], question="", context=[r["context"]], answer=r["text"]) for r in records]
    outputs = []
    for start in range(0, len(cases), BATCH):
        outputs += validator.predict(cases[start:start + BATCH])
    predictions = []
    for record, output in zip(records, outputs):
        gold_ranges = [tuple(r) for r in record["unsupported"]]
        pred_ranges = [(s.start, s.end) for s in output.spans if s.label is SpanLabel.HALLUCINATION]
        length = len(record["text"])
        gold, pred = _chars(gold_ranges, length), _chars(pred_ranges, length)
        predictions.append({"id": record["id"], "gold": record["label"] == 0, "predicted": bool(output.hallucinated),
                            "score": output.hallucination_score, "granularity": record["granularity"],
                            "char_tp": int((gold & pred).sum()), "char_fp": int((pred & ~gold).sum()),
                            "char_fn": int((gold & ~pred).sum()),
                            **(sentence_counts(record["text"], gold, pred) if record["granularity"] == "span" else {})})
    result = summarise(predictions)
    positives = [p for p in predictions if p["gold"]]
    negatives = [p for p in predictions if not p["gold"]]
    if positives and negatives:
        result["balanced_accuracy"] = 0.5 * (sum(p["predicted"] for p in positives) / len(positives)
                                             + sum(not p["predicted"] for p in negatives) / len(negatives))
    if not any(p["granularity"] == "span" for p in predictions):
        result.pop("char")  # response labels have no spans: no character score
    result["predictions"] = predictions
    return result


def _pair_feed(validator: GroundingFactSpans, tokens: int) -> dict[str, np.ndarray]:
    tokenizer = validator.scorer.tokenizer
    claim = tokenizer.encode("The Normans settled in Normandy in the 10th century.", add_special_tokens=False).ids
    sentence = tokenizer.encode("Normandy is a region of France named after the Norse settlers who arrived there "
                                "in the tenth century and founded a duchy. ", add_special_tokens=False).ids
    room = tokens - 3 - len(claim)
    evidence = (sentence * (room // len(sentence) + 1))[:room]
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    first = [cls_id] + evidence + [sep_id]
    ids = first + claim + [sep_id]
    return {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.array([[0] * len(first) + [1] * (len(claim) + 1)], dtype=np.int64)}


def forward_latency(validator: GroundingFactSpans, lengths: Sequence[int] = LATENCY_TOKENS) -> dict[str, Any]:
    session = validator.scorer.session
    return {str(n): time_calls(lambda feed=_pair_feed(validator, n): session.run(feed), RUNS.get(n, 20)) for n in lengths}


def torch_forward_latency(best: Path, validator: GroundingFactSpans, threads: int,
                          lengths: Sequence[int] = LATENCY_TOKENS) -> dict[str, Any] | None:
    from autovalidators.training.tasks import get_task

    model = load_torch_model(get_task("grounding"), best, threads)
    if model is None:
        return None
    return time_torch_forward(model, {n: _pair_feed(validator, n) for n in lengths}, RUNS)


def per_case_latency(predict, cases: Sequence[Case], rounds: int = 2) -> dict[str, Any]:
    predict(cases[:2])  # warm-up
    samples = []
    for _ in range(rounds):
        for case in cases:
            started = time.perf_counter()
            predict([case])
            samples.append((time.perf_counter() - started) * 1000)
    return {**percentiles(samples), "cases": len(cases), "rounds": rounds}


def benchmark_grounding(model_dir: Path, manifest: Manifest, *, run_dir: Path | None = None, threads: int = 2,
                        torch_latency: bool = True, update_manifest: bool = False,
                        latency_tokens: Sequence[int] = LATENCY_TOKENS) -> dict[str, Any]:
    data_dir = Path(manifest.training.get("data", {}).get("dir", "prepared/grounding"))
    groups, excluded = load_heldout(data_dir)
    judged = load_judged_test(data_dir)
    cross = manifest.training.get("cross_encoder", {})
    run_dir = Path(run_dir or cross.get("run_dir", "runs/grounding"))
    validator = GroundingFactSpans.from_folder(model_dir, manifest, threads=threads)
    report: dict[str, Any] = {
        "task": "fact_spans", "model_dir": str(model_dir), "model_version": manifest.version,
        "model_sha256": manifest.model_sha256, "threshold": validator.threshold, "span_mode": validator.span_mode,
        "model_mb": round(sum((model_dir / f).stat().st_size for f in manifest.files) / 1e6, 2),
        "threads": threads, "machine": machine(), "data": str(data_dir),
        "excluded": {k: f"{v} rows without a reference (grounding_usable=false): not scorable" for k, v in excluded.items()},
        "quality": {"int8": {}}, "latency": {},
    }
    logger.info("scoring the model on %d held-out groups and %d judged test sets", len(groups), len(judged))
    for group, records in sorted(groups.items()):
        report["quality"]["int8"][group] = score_group(validator, records)
    add_ragtruth_total(report["quality"]["int8"])
    for group, records in sorted(judged.items()):
        report["quality"]["int8"][group] = score_judged(validator, records)
    fp32 = run_dir / "onnx" / "model_fp32.onnx"
    fp32_validator = None
    if fp32.is_file():
        fp32_validator = GroundingFactSpans.from_folder(model_dir, manifest, threads=threads, model_path=fp32)
        report["quality"]["fp32"], report["quality"]["int8@fp32_subset"] = {}, {}
        for group, records in sorted(groups.items()):
            report["quality"]["fp32"][group] = score_group(fp32_validator, records[:FP32_EXAMPLES])
            report["quality"]["int8@fp32_subset"][group] = summarise(
                report["quality"]["int8"][group]["predictions"][:FP32_EXAMPLES])
    report["baselines"] = {}
    for name, factory in BASELINES.items():
        by_group = {group: score_group(factory(), records) for group, records in sorted(groups.items())}
        add_ragtruth_total(by_group)
        by_group.update({group: score_judged(factory(), records) for group, records in sorted(judged.items())})
        report["baselines"][name] = by_group
    heuristic = report["baselines"]["heuristic"]
    report["versus_heuristic"] = {
        group: paired_bootstrap(r["predictions"], heuristic[group]["predictions"])
        for group, r in report["quality"]["int8"].items() if "predictions" in heuristic.get(group, {})}

    report["latency"]["forward_onnx_int8"] = forward_latency(validator, latency_tokens)
    if fp32_validator is not None:
        report["latency"]["forward_onnx_fp32"] = forward_latency(fp32_validator, latency_tokens)
    if torch_latency:
        measured = torch_forward_latency(run_dir / "best", validator, threads, latency_tokens)
        if measured:
            report["latency"]["forward_torch_eager"] = measured
    rag_cases = [Case(id=r["id"], question=r["question"], context=[r["context"]], answer=r["answer"])
                 for group, records in sorted(groups.items()) if group.startswith("ragtruth/") for r in records]
    report["latency"]["per_case_validator"] = per_case_latency(validator.predict, rag_cases)
    from autovalidators.inference.gate import Gate
    gate = Gate(instances={"fact_spans": validator})  # the shipped QA-relevance and tone models beside it
    report["latency"]["per_case_validate"] = per_case_latency(gate.validate_batch, rag_cases)
    if "forward_torch_eager" in report["latency"]:
        report["speedup_int8_vs_torch"] = {
            str(n): report["latency"]["forward_torch_eager"][str(n)]["p50_ms"]
            / report["latency"]["forward_onnx_int8"][str(n)]["p50_ms"] for n in latency_tokens}
    _print(report, threads, latency_tokens)
    if update_manifest:
        def scores(by_name: dict[str, dict[str, Any]]) -> dict[str, Any]:
            return {name: {group: {k: v for k, v in r.items() if k != "predictions"} for group, r in by_group.items()}
                    for name, by_group in by_name.items()}

        update_manifest_metrics(model_dir, {"benchmark": {
            "quality": scores(report["quality"]), "baselines": scores(report["baselines"]),
            "latency": report["latency"], "threads": threads, "speedup_int8_vs_torch": report.get("speedup_int8_vs_torch"),
            "versus_heuristic": report["versus_heuristic"], "excluded": report["excluded"],
            "machine": report["machine"]}})
    return report


def _print(report: dict[str, Any], threads: int, lengths: Sequence[int]) -> None:
    console = Console(stderr=True, width=170)
    rows = []
    for name, by_group in [*report["quality"].items(), *((f"baseline: {b}", g) for b, g in report["baselines"].items())]:
        for group, r in by_group.items():
            row = {"model": name, "data": group, "n": r["examples"], "halluc.": r["hallucinated"],
                   "ex P": r["example"]["precision"], "ex R": r["example"]["recall"], "ex F1": r["example"]["f1"],
                   "bal. acc": r.get("balanced_accuracy", "")}
            if "char" in r:
                row.update({"char P": r["char"]["precision"], "char R": r["char"]["recall"], "char F1": r["char"]["f1"]})
            rows.append(row)
    print_table(f"fact_spans held-out quality (threshold {report['threshold']:.3f}, spans: {report['span_mode']})", rows,
                ["model", "data", "n", "halluc.", "ex P", "ex R", "ex F1", "bal. acc", "char P", "char R", "char F1"],
                console)
    versus = [{"data": group, **{f"{label} Δ": f"{r[key]['difference']:+.3f} [{r[key]['low']:+.3f}, {r[key]['high']:+.3f}]"
                                 for key, label in (("example_f1", "ex F1"), ("char_f1", "char F1")) if key in r},
               **{f"{label} P(≤0)": r[key]["p_not_better"] for key, label in (("example_f1", "ex F1"), ("char_f1", "char F1"))
                  if key in r}}
              for group, r in report.get("versus_heuristic", {}).items()]
    print_table("model minus heuristic on the same rows (paired bootstrap, 2000 resamples: difference [95% interval], "
                "share of resamples not better)", versus,
                ["data", "ex F1 Δ", "ex F1 P(≤0)", "char F1 Δ", "char F1 P(≤0)"], console)
    forward = [{"runtime": name.removeprefix("forward_"), **{f"{n} p50 ms": r[str(n)]["p50_ms"] for n in lengths},
                **{f"{n} p95 ms": r[str(n)]["p95_ms"] for n in lengths}}
               for name, r in report["latency"].items() if name.startswith("forward_")]
    print_table(f"cross-encoder forward, batch 1 ({threads} threads)", forward,
                ["runtime"] + [f"{n} p{q} ms" for n in lengths for q in (50, 95)], console)
    per_case = [{"path": name.removeprefix("per_case_"), "cases": r["cases"], "p50 ms": r["p50_ms"], "p95 ms": r["p95_ms"]}
                for name, r in report["latency"].items() if name.startswith("per_case_")]
    print_table(f"per RAGTruth held-out case ({threads} threads)", per_case, ["path", "cases", "p50 ms", "p95 ms"], console)
