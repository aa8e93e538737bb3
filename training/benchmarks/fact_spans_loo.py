"""`autovalidators benchmark fact-spans --leave-one-out`: the fact-span recipe on judged sets it never saw.

Why: a model chosen on the rows of the sets it trained on said nothing about answers from another
source (issue 24: +0.006 on the shared held-out rows, -0.06 on unseen RAG answers). Leaving a whole
set out and scoring it is the number that predicts a source nobody labelled for us.

For each judged set (`SETS`: RAGTruth QA, Summary and Data2txt counted as three, FaithBench,
XSumFaith, WiCE, SummEdits, FIB, BEGIN, FaithDial), every learned part of the combiner recipe
(`configs/fact_spans_combiner.yaml`: the combiner, the answer calibration, the thresholds, the span
mode, the narrower and its cuts) is fitted without that set's train and dev answers, then scored on
that set's held-out rows (RAGTruth, FaithBench: `<data>/heldout/`; the others: `answers/test.jsonl`)
through the runtime validator, beside the lexical heuristic on the same rows, with a paired
bootstrap. The recipe fitted on every set ("all sets") is scored on the same rows: the difference is
what not having seen the set costs.

Not refitted per fold: the cross-encoder. Fine-tuning it is about 1.5 CPU hours a fold; the frozen
one saw every set's train pairs (never the held-out rows), so with it a fold is optimistic.
`cross_encoder=None` runs the lexical recipe, where every learned part is refitted.

Ship rule (issue 24): the model is the default only when, left out, it beats the heuristic on
RAGTruth QA, Summary and Data2txt and on FaithBench in example F1 and character F1 (the 95% interval
of the difference above 0: a gain inside the interval is no gain), and on no set is worse beyond
the interval.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.grounding import task_of
from autovalidators.inference.validators.grounding_spans import GroundingFactSpans
from autovalidators.inference.validators.heuristic import HeuristicFactSpans

from autovalidators.training.benchmarks.common import machine, print_table
from autovalidators.training.benchmarks.grounding import load_judged_test, score_judged
from autovalidators.training.benchmarks.span_scoring import load_heldout, paired_bootstrap, score_group
from autovalidators.training.grounding.combiner import (CombinerConfig, MemoScorer, _capped, featurise,
                                                        fit_combiner, load_cross_encoder)

logger = logging.getLogger(__name__)

RAGTRUTH_TASKS = ("QA", "Summary", "Data2txt")
SETS = (*(f"ragtruth/{t}" for t in RAGTRUTH_TASKS), "faithbench", "xsumfaith", "wice", "summedits", "fib",
        "begin", "faithdial")
SHIP_SETS = (*(f"ragtruth/{t}" for t in RAGTRUTH_TASKS), "faithbench")
ALL = "all sets"


def set_of(record: dict) -> str:
    """The judged set an answer record belongs to; RAGTruth counts once per task type."""
    if record["source"] == "ragtruth":
        return f"ragtruth/{task_of(record.get('question', ''), record['context'])}"
    return record["source"]


def load_scorer(source: str | Path | None, cache_dir: Path, threads: int) -> tuple[MemoScorer | None, dict]:
    """The frozen cross-encoder of a folder (the shipped fact-span model, or an exported grounding
    run) with its scores kept in `cache_dir`, or None for the lexical recipe; and its identity."""
    if source is None:
        return None, {"cross_encoder": None}
    scorer, manifest = load_cross_encoder(source, threads)
    cache = cache_dir / f"score_cache-{manifest.model_sha256[:16]}.json"
    return MemoScorer(scorer, cache), {"cross_encoder": str(source), "cross_encoder_sha256": manifest.model_sha256}


def held_out_sets(data_dir: Path) -> dict[str, tuple[str, list[dict]]]:
    """Each set's never-trained-on rows: name -> (kind, records); kind "span" rows are span records
    (`score_group`), "judged" rows are judged texts (`score_judged`)."""
    heldout, _ = load_heldout(data_dir)
    out: dict[str, tuple[str, list[dict]]] = {name: ("span", records) for name, records in heldout.items()
                                              if name in SETS}
    out.update({name.removesuffix(" test"): ("judged", records) for name, records in load_judged_test(data_dir).items()
                if name.removesuffix(" test") in SETS})
    return {name: out[name] for name in SETS if name in out}


def _score(validator: Any, kind: str, records: list[dict]) -> dict[str, Any]:
    return score_group(validator, records) if kind == "span" else score_judged(validator, records)


def _metrics(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "predictions"}


def ship_rule(versus: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """`versus`: set -> paired bootstrap of the left-out model minus the heuristic."""
    reasons = []
    for name in SHIP_SETS:
        for metric in ("example_f1", "char_f1"):
            result = versus.get(name, {}).get(metric)
            if result is None:
                reasons.append(f"{name} {metric}: not measured")
            elif result["low"] <= 0:
                reasons.append(f"{name} {metric} {result['difference']:+.3f} [{result['low']:+.3f}, "
                               f"{result['high']:+.3f}]: not above the heuristic beyond the interval")
    for name, by_metric in versus.items():
        for metric, result in by_metric.items():
            if result["high"] < 0:
                reasons.append(f"{name} {metric} {result['difference']:+.3f} [{result['low']:+.3f}, "
                               f"{result['high']:+.3f}]: worse than the heuristic beyond the interval")
    return {"passes": not reasons, "reasons": reasons}


def leave_one_out(config: CombinerConfig, *, cross_encoder: str | Path | None, out_dir: Path,
                  cache_dir: Path | None = None, sets: Sequence[str] = SETS, threads: int = 2,
                  label: str = "") -> dict[str, Any]:
    """Fits the recipe once on every set and once without each of `sets` (each fit's files in a
    folder of `out_dir`), scores each left-out set beside the heuristic; returns the report (per
    set: rows, left-out and all-sets scores, paired bootstraps) and the ship rule's verdict.
    `cache_dir` keeps the cross-encoder's scores (default `out_dir`; recipes can share one)."""
    unknown = sorted(set(sets) - set(SETS))
    if unknown:
        raise ValueError(f"unknown set(s) {unknown}; known: {', '.join(SETS)}")
    data_dir = Path(config.data_dir)
    for split in ("train", "dev", "test"):
        if not (data_dir / "answers" / f"{split}.jsonl").is_file():
            raise FileNotFoundError(f"{data_dir}/answers/{split}.jsonl: missing; run `autovalidators prepare grounding`")
    scorer, identity = load_scorer(cross_encoder, cache_dir or out_dir, threads)
    train_records = _capped(list(read_jsonl(data_dir / "answers" / "train.jsonl")), config.max_answers_per_source,
                            config.seed)
    dev_records = list(read_jsonl(data_dir / "answers" / "dev.jsonl"))
    logger.info("featurising %d train and %d dev answers", len(train_records), len(dev_records))
    train, dev = featurise(train_records, scorer), featurise(dev_records, scorer)
    if scorer:
        scorer.save()
    train_sets, dev_sets = [set_of(r) for r in train.records], [set_of(r) for r in dev.records]
    tests = {name: value for name, value in held_out_sets(data_dir).items() if name in sets}

    def fitted(left_out: str | None) -> GroundingFactSpans:
        folder = out_dir / (left_out or ALL).replace("/", "_").replace(" ", "_")
        fit = fit_combiner(config, train.subset([s != left_out for s in train_sets]),
                           dev.subset([s != left_out for s in dev_sets]), folder)
        (folder / "fit.json").write_text(json.dumps(fit, indent=2) + "\n")
        return GroundingFactSpans.from_parts(folder, scorer, fit["thresholds"], fit, threads=threads,
                                             fallback_languages=("ru",))

    report: dict[str, Any] = {"label": label, **identity, "recipe": config.model_dump(), "data": str(data_dir),
                              "machine": machine(), "sets": {}}
    everything = fitted(None)
    for name, (kind, records) in tests.items():
        logger.info("%s: %d held-out rows; fitting without it", name, len(records))
        left_out = fitted(name)
        scores = {"left_out": _score(left_out, kind, records), "all_sets": _score(everything, kind, records),
                  "heuristic": _score(HeuristicFactSpans(), kind, records)}
        if scorer:
            scorer.save()
        report["sets"][name] = {
            "rows": len(records), "hallucinated": scores["heuristic"]["hallucinated"],
            "train_answers_left_out": sum(s == name for s in train_sets),
            "dev_answers_left_out": sum(s == name for s in dev_sets),
            **{key: _metrics(result) for key, result in scores.items()},
            "left_out_vs_heuristic": paired_bootstrap(scores["left_out"]["predictions"],
                                                      scores["heuristic"]["predictions"]),
            "all_sets_vs_heuristic": paired_bootstrap(scores["all_sets"]["predictions"],
                                                      scores["heuristic"]["predictions"]),
        }
    report["ship_rule"] = ship_rule({name: r["left_out_vs_heuristic"] for name, r in report["sets"].items()})
    print_report(report)
    return report


def numeric_rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per left-out set, numbers only (the manifest and the model card's table)."""
    out = {}
    for name, r in report["sets"].items():
        row: dict[str, Any] = {"rows": r["rows"], "hallucinated": r["hallucinated"]}
        for metric, key in (("example", "example_f1"), ("char", "char_f1")):
            if metric not in r["heuristic"]:
                continue
            versus = r["left_out_vs_heuristic"].get(key, {})
            row.update({f"heuristic_{key}": r["heuristic"][metric]["f1"], f"left_out_{key}": r["left_out"][metric]["f1"],
                        **{f"{key}_{part}": versus[part] for part in ("difference", "low", "high") if part in versus},
                        f"all_sets_{key}": r["all_sets"][metric]["f1"]})
        out[name] = row
    return out


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """`numeric_rows` as the printed table's columns (difference and interval in one cell)."""
    def interval(row: dict[str, Any], key: str) -> str:
        if f"{key}_difference" not in row:
            return ""
        return f"{row[f'{key}_difference']:+.3f} [{row[f'{key}_low']:+.3f}, {row[f'{key}_high']:+.3f}]"

    return [{"left out": name, "n": row["rows"], "halluc.": row["hallucinated"],
             **{f"{who} {short} F1": row[f"{prefix}_{key}"] for key, short in (("example_f1", "ex"), ("char_f1", "char"))
                if f"heuristic_{key}" in row
                for who, prefix in (("heur.", "heuristic"), ("model", "left_out"), ("all sets", "all_sets"))},
             "ex F1 Δ [95%]": interval(row, "example_f1"), "char F1 Δ [95%]": interval(row, "char_f1")}
            for name, row in numeric_rows(report).items()]


COLUMNS = ["left out", "n", "halluc.", "heur. ex F1", "model ex F1", "ex F1 Δ [95%]", "all sets ex F1",
           "heur. char F1", "model char F1", "char F1 Δ [95%]", "all sets char F1"]


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(stderr=True, width=200)
    encoder = report.get("cross_encoder") or "none (lexical recipe)"
    print_table(f"fact_spans leave-one-dataset-out {report.get('label', '')} (cross-encoder: {encoder}; "
                "model = fitted without the set, Δ = model - heuristic, paired bootstrap)",
                table_rows(report), COLUMNS, console)
    verdict = report["ship_rule"]
    console.print(f"ship rule: {'PASS' if verdict['passes'] else 'FAIL'}")
    for reason in verdict["reasons"]:
        console.print(f"  - {reason}")
