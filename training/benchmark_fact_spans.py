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
from typing import Any, Sequence

import numpy as np
from rich.console import Console

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.results import FactSpansOutput, Span, SpanLabel
from autovalidators.inference.validators.fact_spans import FactSpanValidator
from autovalidators.inference.validators.base import Validator, ValidatorInfo
from autovalidators.inference.validators.grounding_spans import TASK as GROUNDING_TASK
from autovalidators.inference.validators.heuristic import HeuristicFactSpans

from .benchmark import (f1_from_counts, load_torch_model, machine, print_table, time_calls, time_torch_forward,
                        update_manifest_metrics)
from .config import TaskConfig
from .tasks.base import TaskSpec

logger = logging.getLogger(__name__)

LATENCY_TOKENS = (128, 256, 512)
RUNS = {128: 40, 256: 30, 512: 20}
BATCH = 8
FP32_EXAMPLES = 80  # per group: fp32 vs int8 is compared on this many examples


def load_heldout(data_dir: Path) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Benchmark groups ("ragtruth/Summary", "ragtruth/Data2txt", "faithbench") and excluded counts."""
    groups: dict[str, list[dict]] = {}
    excluded: dict[str, int] = {}
    for dataset in ("ragtruth", "faithbench"):
        path = data_dir / "heldout" / f"{dataset}.jsonl"
        if not path.is_file():
            continue
        for record in read_jsonl(path):
            name = f"ragtruth/{record['task_type']}" if dataset == "ragtruth" else dataset
            if not record.get("grounding_usable", True) or not record["context"].strip():
                excluded[name] = excluded.get(name, 0) + 1
                continue
            groups.setdefault(name, []).append(record)
    if not groups:
        raise FileNotFoundError(f"{data_dir}/heldout: no benchmark data; run the fact-spans prepare step")
    return groups, excluded


def _chars(ranges: Sequence[tuple[int, int]], length: int) -> np.ndarray:
    mask = np.zeros(length, dtype=bool)
    for start, end in ranges:
        mask[start:end] = True
    return mask


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


class AlwaysHallucinated:
    """Baseline: every answer hallucinated from its first character to its last."""

    info = ValidatorInfo("fact_spans", "baseline", "always-hallucinated")

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        return [FactSpansOutput(applies=True, hallucinated=True, hallucination_score=1.0, precision=0.0,
                                spans=(Span(0, len(c.answer), SpanLabel.HALLUCINATION, 1.0, c.answer),),
                                source="baseline") for c in cases]


# Baselines scored beside the model; each is a fact-span validator needing no model files.
BASELINES = {"always_hallucinated": AlwaysHallucinated, "heuristic": HeuristicFactSpans}


def score_baselines(groups: dict[str, list[dict]]) -> dict[str, dict[str, Any]]:
    """`score_group` of every baseline on every group: {baseline: {group: scores}}."""
    return {name: add_ragtruth_total({group: score_group(factory(), records)
                                      for group, records in sorted(groups.items())})
            for name, factory in BASELINES.items()}


def add_ragtruth_total(by_group: dict[str, Any]) -> dict[str, Any]:
    """Adds "ragtruth/all": the RAGTruth tasks pooled (the issue's target is over all held-out
    RAGTruth responses), from the per-example predictions already made."""
    pooled = [p for group, r in sorted(by_group.items()) if group.startswith("ragtruth/") and "predictions" in r
              for p in r["predictions"]]
    if pooled:
        by_group["ragtruth/all"] = {**summarise(pooled), "predictions": pooled}
    return by_group


def score_group(validator: Validator, records: list[dict]) -> dict[str, Any]:
    """Example- and character-level metrics plus per-example predictions for one group."""
    cases = [Case(id=r["id"], question=r["question"], context=[r["context"]], answer=r["answer"]) for r in records]
    outputs = []
    for start in range(0, len(cases), BATCH):
        outputs += validator.predict(cases[start:start + BATCH])
    predictions = []
    for record, output in zip(records, outputs):
        gold_ranges = [(s["start"], s["end"]) for s in record["spans"] if s["label"] == "HALLUCINATION"]
        pred_ranges = [(s.start, s.end) for s in output.spans if s.label is SpanLabel.HALLUCINATION]
        length = len(record["answer"])
        keep = ~_chars([(r["start"], r["end"]) for r in record.get("ignored", [])], length)
        gold, pred = _chars(gold_ranges, length) & keep, _chars(pred_ranges, length) & keep
        predictions.append({"id": record["id"], "gold": bool(gold_ranges), "score": output.hallucination_score,
                            "predicted": bool(output.hallucinated), "precision": output.precision,
                            "recall": output.recall, "gold_spans": gold_ranges, "predicted_spans": pred_ranges,
                            "char_tp": int((gold & pred).sum()), "char_fp": int((pred & ~gold).sum()),
                            "char_fn": int((gold & ~pred).sum())})
    return {**summarise(predictions), "predictions": predictions}


def summarise(predictions: Sequence[dict]) -> dict[str, Any]:
    """Example-level and character-level (micro) P/R/F1 of per-example predictions."""
    example = _prf(tp=sum(p["gold"] and p["predicted"] for p in predictions),
                   fp=sum(p["predicted"] and not p["gold"] for p in predictions),
                   fn=sum(p["gold"] and not p["predicted"] for p in predictions))
    char = _prf(tp=sum(p["char_tp"] for p in predictions), fp=sum(p["char_fp"] for p in predictions),
                fn=sum(p["char_fn"] for p in predictions))
    return {"examples": len(predictions), "hallucinated": sum(p["gold"] for p in predictions),
            "example": example, "char": char}


def paired_bootstrap(model: Sequence[dict], baseline: Sequence[dict], resamples: int = 2000,
                     seed: int = 13) -> dict[str, dict[str, float]]:
    """Model minus baseline example F1 and character F1 on the same rows (per-example predictions of
    `score_group`/`score_judged`, same order), with a paired bootstrap over examples: the observed
    difference, its 95% interval and the share of resamples where the model is not better. With
    100-odd answers a few points of F1 are noise; this says which differences are not."""
    if [p["id"] for p in model] != [p["id"] for p in baseline]:
        raise ValueError("paired_bootstrap: model and baseline predictions are not on the same rows")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(model), size=(resamples, len(model))) if len(model) else np.zeros((0, 0), dtype=int)

    def f1s(predictions: Sequence[dict]) -> dict[str, tuple[np.ndarray, float]]:
        gold = np.asarray([p["gold"] for p in predictions], dtype=bool)
        predicted = np.asarray([p["predicted"] for p in predictions], dtype=bool)
        columns = {"example_f1": ((gold & predicted), (predicted & ~gold), (gold & ~predicted))}
        # character F1 only where the rows have spans (`score_judged` marks response-labelled rows)
        if all("char_tp" in p for p in predictions) and any(p.get("granularity", "span") == "span"
                                                             for p in predictions):
            columns["char_f1"] = tuple(np.asarray([p[k] for p in predictions], dtype=np.float64)
                                       for k in ("char_tp", "char_fp", "char_fn"))
        out = {}
        for name, (tp, fp, fn) in columns.items():
            tp, fp, fn = (np.asarray(c, dtype=np.float64) for c in (tp, fp, fn))
            out[name] = (f1_from_counts(tp[picks].sum(1), fp[picks].sum(1), fn[picks].sum(1)),
                         float(f1_from_counts(tp.sum(keepdims=True), fp.sum(keepdims=True), fn.sum(keepdims=True))[0]))
        return out

    ours, theirs = f1s(model), f1s(baseline)
    result = {}
    for name in ours.keys() & theirs.keys():
        differences = ours[name][0] - theirs[name][0]
        low, high = np.quantile(differences, [0.025, 0.975]) if len(differences) else (0.0, 0.0)
        result[name] = {"difference": ours[name][1] - theirs[name][1], "low": float(low), "high": float(high),
                        "p_not_better": float(np.mean(differences <= 0)) if len(differences) else 1.0}
    return result


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
        from .benchmark_grounding import benchmark_grounding

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
