"""`autovalidators benchmark tone`: quality (fp32 vs int8) and latency of the shipped tone model.

Everything is scored through the runtime `ToneValidator` (windowing and tokenisation as in
production), at the manifest's per-label thresholds, on sets never trained on:

- `test.jsonl` (the labeller's held-out split), per source: per-label precision/recall/F1 and
  ROC-AUC over the records that know the label; macro-F1 over labels with both classes.
- OLID level A on `benchmark_olid.jsonl` (the 20% of the OLID training file the labeller holds out):
  gold OFF/NOT is OLID's subtask_a (mapped to `toxicity` by the gold labeller). Rule: predict OFF
  when ANY abusive label (toxicity, obscenity, insult, threat, identity_hate) is flagged, since OLID's
  OFF covers insults, threats and untargeted profanity alike; macro-F1 over OFF/NOT as in
  OffensEval 2019. The `toxicity`-only rule is reported beside it.
- Russian toxic comments val (`benchmark_ru_toxic_val.jsonl`): toxicity P/R/F1, ROC-AUC. The default
  MiniLM encoder has an English vocabulary: Cyrillic text is split into single characters, which
  limits what the model can learn from Russian; read this figure with that in mind.

Scores are taken as served (`ToneValidator.served_scores`): texts in the manifest's
`fallback_languages` go to the lexicon heuristic, and its `lexicon_labels` take lexicon matches
(the served rows include them). For every set with such texts, the model's own
scores on it are reported beside ("<variant> model only"), so the routing is a measured choice.
The lexicon heuristic (the fallback without a model) is scored on the same sets at its own 0.5
threshold ("baseline: heuristic"): the bar a shipped model has to clear.

Latency: one short text (a one-sentence answer) and a batch of 32 such texts, `threads` intra-op
threads, p50/p95 of end-to-end `scores()` calls (tokenisation included); torch eager (model forward
only) beside it when torch is installed.

`--previous MODEL_DIR` scores another tone model folder (the one being replaced) as served, with
its own manifest thresholds and routing, on the same rows, and reports the shipped model minus it
with a paired bootstrap over texts (2,000 resamples: difference, 95% interval, share of resamples
not better) for OLID level-A macro-F1 and Russian toxicity F1: whether a replacement is better,
worse or within noise is measured, not read off two rounded numbers.

The JSON report also holds per-example predictions of the shipped model (set, id, text, gold
labels, scores) so that PR curves and calibration can be drawn later without re-running the model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autovalidators.data_prep.io import read_jsonl
from autovalidators.data_prep.tone.statements import DEFAULT_PATH as STATEMENTS, statement_records
from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators.heuristic import HeuristicTone
from autovalidators.inference.validators.tone import ToneValidator

from autovalidators.training.benchmarks.common import f1_from_counts, load_torch_model, machine, print_table, time_calls, update_manifest_metrics
from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import TaskSpec
from autovalidators.training.tasks.tone import TONE_LABELS, label_metrics, multilabel_report, target_matrix

logger = logging.getLogger(__name__)

ABUSIVE_LABELS = ("toxicity", "obscenity", "insult", "threat", "identity_hate")
OLID_FILE, RU_FILE = "benchmark_olid.jsonl", "benchmark_ru_toxic_val.jsonl"
LATENCY_TEXT = "Thanks for asking! Your order has shipped and should arrive within three business days."
BATCH = 32
SINGLE_RUNS, BATCH_RUNS = 100, 20


def olid_gold(record: dict) -> int | None:
    """OLID subtask_a as 1 (OFF) / 0 (NOT): the gold labeller's toxicity vote, else the merged label."""
    gold = (record.get("votes") or {}).get("gold", {}).get("toxicity")
    return gold if gold is not None else (record.get("labels") or {}).get("toxicity")


def abusive_flags(scores: np.ndarray, labels: Sequence[str], thresholds: dict[str, float]) -> np.ndarray:
    """Per row: flagged by any abusive (blocking) label at its threshold (0.5 when none is given)."""
    columns = [list(labels).index(label) for label in ABUSIVE_LABELS if label in labels]
    cuts = np.asarray([thresholds.get(labels[c], 0.5) for c in columns])
    return (scores[:, columns] >= cuts).any(axis=1)


def olid_decisions(scores: np.ndarray, records: Sequence[dict], labels: Sequence[str],
                   thresholds: dict[str, float]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(rows with OLID gold, gold OFF 0/1, predicted OFF by the any-abusive-label rule) on those rows."""
    keep = [i for i, r in enumerate(records) if olid_gold(r) is not None]
    gold = np.asarray([olid_gold(records[i]) for i in keep], dtype=int)
    return keep, gold, abusive_flags(scores[keep], labels, thresholds)


def paired_f1_bootstrap(gold: np.ndarray, ours: np.ndarray, theirs: np.ndarray, *, macro: bool,
                        resamples: int = 2000, seed: int = 13) -> dict[str, float]:
    """Our F1 minus theirs on the same rows (binary F1 of class 1, or the macro over both classes),
    with a paired bootstrap over rows: difference, 95% interval, share of resamples not better."""
    gold, ours, theirs = (np.asarray(a, dtype=bool) for a in (gold, ours, theirs))
    # Row 0 is the observed sample itself, rows 1.. the resamples: one vectorised pass scores both.
    picks = np.vstack([np.arange(len(gold)),
                       np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))])

    def f1(predicted: np.ndarray) -> np.ndarray:
        tp, fp, fn, tn = (m[picks].sum(axis=1).astype(np.float64)
                          for m in (gold & predicted, ~gold & predicted, gold & ~predicted, ~gold & ~predicted))
        positive = f1_from_counts(tp, fp, fn)
        return (positive + f1_from_counts(tn, fn, fp)) / 2 if macro else positive

    mine, previous = f1(ours), f1(theirs)
    return _paired_summary(float(mine[0]), float(previous[0]), mine[1:] - previous[1:], len(gold))


def _paired_summary(ours: float, theirs: float, differences: np.ndarray, rows: int) -> dict[str, float]:
    """The observed values, their difference, the 95% interval of the resampled differences and the
    share of resamples in which ours is not better."""
    differences = np.asarray(differences, dtype=float)
    low, high = np.quantile(differences, [0.025, 0.975])
    return {"ours": ours, "theirs": theirs, "difference": ours - theirs, "low": float(low), "high": float(high),
            "p_not_better": float(np.mean(differences <= 0)), "rows": int(rows)}


def paired_auc_bootstrap(gold: np.ndarray, ours: np.ndarray, theirs: np.ndarray, *, resamples: int = 2000,
                         seed: int = 13) -> dict[str, float]:
    """Our ROC-AUC minus theirs from scores on the same rows, with a paired bootstrap over rows (the keys of
    `paired_f1_bootstrap`). Threshold-free, so it sees a ranking loss that F1 at a cut chosen on dev hides.
    A resample holding one class only has no AUC and is left out."""
    from sklearn.metrics import roc_auc_score

    gold = np.asarray(gold, dtype=bool)
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    if gold.all() or not gold.any():
        raise ValueError("ROC-AUC needs rows of both classes")
    mine, previous = roc_auc_score(gold, ours), roc_auc_score(gold, theirs)
    differences = []
    for pick in np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold))):
        if 0 < gold[pick].sum() < len(pick):
            differences.append(roc_auc_score(gold[pick], ours[pick]) - roc_auc_score(gold[pick], theirs[pick]))
    return _paired_summary(float(mine), float(previous), np.asarray(differences), len(gold))


def versus_previous(ours: dict[str, np.ndarray], our_thresholds: dict[str, float], theirs: dict[str, np.ndarray],
                    their_thresholds: dict[str, float], sets: dict[str, list[dict]],
                    labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Paired bootstraps of OLID level-A macro-F1 and Russian toxicity F1, each model at its own thresholds."""
    result = {}
    if "olid" in sets:
        _, gold, mine = olid_decisions(ours["olid"], sets["olid"], labels, our_thresholds)
        _, _, previous = olid_decisions(theirs["olid"], sets["olid"], labels, their_thresholds)
        result["olid_level_a_macro_f1"] = paired_f1_bootstrap(gold, mine, previous, macro=True)
    if "ru_toxic_val" in sets:
        column = list(labels).index("toxicity")
        target = target_matrix(sets["ru_toxic_val"], labels)[:, column]
        known = target >= 0
        result["ru_toxic_val_toxicity_f1"] = paired_f1_bootstrap(
            target[known] == 1, ours["ru_toxic_val"][known, column] >= our_thresholds.get("toxicity", 0.5),
            theirs["ru_toxic_val"][known, column] >= their_thresholds.get("toxicity", 0.5), macro=False)
    return result


def olid_level_a(scores: np.ndarray, records: Sequence[dict], labels: Sequence[str],
                 thresholds: dict[str, float]) -> dict[str, Any]:
    """Macro-F1 of OFF/NOT predicted by the module docstring's rule (and by toxicity alone)."""
    from sklearn.metrics import accuracy_score, f1_score

    keep, gold, any_abusive = olid_decisions(scores, records, labels, thresholds)
    result: dict[str, Any] = {"examples": len(keep), "off": int(gold.sum()),
                              "rule": "OFF if any of " + ", ".join(ABUSIVE_LABELS) + " is flagged"}
    for name, predicted in (("any_abusive", any_abusive),
                            ("toxicity_only", scores[keep, labels.index("toxicity")] >= thresholds.get("toxicity", 0.5))):
        predicted = predicted.astype(int)
        per_class = f1_score(gold, predicted, average=None, labels=[0, 1], zero_division=0)
        result[name] = {"macro_f1": float(per_class.mean()), "f1_not": float(per_class[0]),
                        "f1_off": float(per_class[1]), "accuracy": float(accuracy_score(gold, predicted))}
    result["macro_f1"] = result["any_abusive"]["macro_f1"]
    return result


def load_sets(data_dir: Path) -> dict[str, list[dict]]:
    sets = {}
    for name, file in (("test", "test.jsonl"), ("olid", OLID_FILE), ("ru_toxic_val", RU_FILE)):
        if (data_dir / file).is_file():
            sets[name] = list(read_jsonl(data_dir / file))
    if not sets:
        raise FileNotFoundError(f"{data_dir}: no test.jsonl or benchmark_*.jsonl; run "
                                "`autovalidators prepare tone --config configs/tone_model.yaml`")
    # The identity statements' test split (held-out wordings and groups; the file ships with the code).
    sets["statements"] = [r for r in statement_records(STATEMENTS, TONE_LABELS) if r["split"] == "test"]
    return sets


def statements_caught(scores: np.ndarray, records: Sequence[dict], labels: Sequence[str],
                      thresholds: dict[str, float]) -> dict[str, Any]:
    """Per language: hateful statements flagged by any abusive label (want 100%) and neutral
    statements about the same groups and subjects flagged (want 0%)."""
    flagged = abusive_flags(scores, labels, thresholds)
    result: dict[str, Any] = {}
    for language in sorted({r["language"] for r in records}):
        for kind in ("hateful", "neutral"):
            rows = [i for i, r in enumerate(records) if r["language"] == language and r["row"].startswith(kind)]
            if rows:
                result[f"{kind}_{language}"] = {"texts": len(rows), "flagged": int(flagged[rows].sum()),
                                                "rate": float(flagged[rows].mean())}
    return result


def quality(scores: dict[str, np.ndarray], sets: dict[str, list[dict]], labels: Sequence[str],
            thresholds: dict[str, float]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if "test" in sets:
        test, test_scores = sets["test"], scores["test"]
        result["test_all"] = multilabel_report(test_scores, target_matrix(test, labels), labels, thresholds)
        result["test_by_source"] = {}
        for source in sorted({r["source"] for r in test}):
            rows = [i for i, r in enumerate(test) if r["source"] == source]
            result["test_by_source"][source] = multilabel_report(
                test_scores[rows], target_matrix([test[i] for i in rows], labels), labels, thresholds)
    if "olid" in sets:
        olid = sets["olid"]
        result["olid_level_a"] = olid_level_a(scores["olid"], olid, labels, thresholds)
        result["olid_labels"] = multilabel_report(scores["olid"], target_matrix(olid, labels), labels, thresholds)
    if "ru_toxic_val" in sets:
        ru = sets["ru_toxic_val"]
        column = list(labels).index("toxicity")
        result["ru_toxic_val"] = label_metrics(scores["ru_toxic_val"][:, column],
                                               target_matrix(ru, labels)[:, column], thresholds.get("toxicity", 0.5))
    if "statements" in sets:
        result["statements"] = statements_caught(scores["statements"], sets["statements"], labels, thresholds)
    return result


def predictions(scores: dict[str, np.ndarray], sets: dict[str, list[dict]], labels: Sequence[str]) -> list[dict]:
    rows = []
    for name, records in sets.items():
        for record, row in zip(records, scores[name]):
            rows.append({"set": name, "id": record["id"], "source": record.get("source"), "text": record["text"],
                         "gold": record.get("labels", {}),
                         "scores": {label: round(float(s), 5) for label, s in zip(labels, row)}})
    return rows


def heuristic_scores(fallback: HeuristicTone, texts: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """(n_texts, n_labels) scores of the lexicon heuristic, in `labels` order (0 for a label it lacks)."""
    outputs = fallback.predict([Case(id=str(i), question="", answer=text) for i, text in enumerate(texts)])
    return np.array([[o.scores.get(label, 0.0) for label in labels] for o in outputs], dtype=np.float64)


def latency(validator: ToneValidator) -> dict[str, Any]:
    return {"single_short": time_calls(lambda: validator.scores([LATENCY_TEXT]), SINGLE_RUNS),
            f"batch_{BATCH}_short": time_calls(lambda: validator.scores([LATENCY_TEXT] * BATCH), BATCH_RUNS)}


def torch_latency(spec: TaskSpec, best: Path, validator: ToneValidator, threads: int) -> dict[str, Any] | None:
    model = load_torch_model(spec, best, threads)
    if model is None:
        return None
    import torch
    ids = validator.windows([LATENCY_TEXT])[0].windows[0]

    def batch_of(n: int) -> dict[str, Any]:
        return {"input_ids": torch.tensor([ids] * n), "attention_mask": torch.ones(n, len(ids), dtype=torch.long),
                "token_type_ids": torch.zeros(n, len(ids), dtype=torch.long)}

    single, batch = batch_of(1), batch_of(BATCH)
    with torch.inference_mode():
        return {"single_short": time_calls(lambda: model(**single), SINGLE_RUNS),
                f"batch_{BATCH}_short": time_calls(lambda: model(**batch), BATCH_RUNS)}


def _tables(report: dict[str, Any], labels: Sequence[str], threads: int) -> None:
    rows = []
    for variant, result in report["quality"].items():
        olid = result.get("olid_level_a", {})
        rows.append({"model": variant, "OLID-A macro-F1": olid.get("macro_f1"),
                     "OLID-A (toxicity only)": olid.get("toxicity_only", {}).get("macro_f1"),
                     "test macro-F1": result.get("test_all", {}).get("macro_f1"),
                     "test macro-AUC": result.get("test_all", {}).get("macro_roc_auc"),
                     "ru val tox F1": result.get("ru_toxic_val", {}).get("f1"),
                     "ru val tox AUC": result.get("ru_toxic_val", {}).get("roc_auc"),
                     **{f"stmt {k}": v["rate"] for k, v in result.get("statements", {}).items()}})
    print_table("tone quality (manifest thresholds)", rows, list(rows[0]))
    shipped = next(iter(report["quality"].values()))
    label_rows = []
    for set_name, per_set in [("test", shipped.get("test_all"))] + list(shipped.get("test_by_source", {}).items()) \
            + [("olid holdout", shipped.get("olid_labels"))]:
        for label, m in (per_set or {}).get("labels", {}).items():
            if m["known"]:
                label_rows.append({"set": set_name, "label": label, "known": m["known"], "pos": m["positives"],
                                   "P": m["precision"], "R": m["recall"], "F1": m["f1"], "AUC": m["roc_auc"],
                                   "thr": m["threshold"]})
    print_table(f"tone per label ({next(iter(report['quality']))})", label_rows,
                ["set", "label", "known", "pos", "P", "R", "F1", "AUC", "thr"])
    latency_rows = [{"runtime": name, "1 text p50 ms": r["single_short"]["p50_ms"],
                     "1 text p95 ms": r["single_short"]["p95_ms"],
                     f"{BATCH} texts p50 ms": r[f"batch_{BATCH}_short"]["p50_ms"],
                     f"{BATCH} texts p95 ms": r[f"batch_{BATCH}_short"]["p95_ms"]}
                    for name, r in report["latency"].items()]
    print_table(f"tone latency ({threads} threads)", latency_rows, list(latency_rows[0]))
    if report.get("versus_previous"):
        rows = [{"metric": metric, "this model": r["ours"], "previous": r["theirs"],
                 "difference [95%]": f"{r['difference']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]",
                 "not better": r["p_not_better"], "rows": r["rows"]} for metric, r in report["versus_previous"].items()]
        print_table(f"this model minus {report['previous']['model_dir']} on the same texts (paired bootstrap, "
                    "2000 resamples)", rows, list(rows[0]))


def benchmark(spec: TaskSpec, task_config: TaskConfig, model_dir: Path, *, run_dir: Path | None = None,
              threads: int = 2, torch_latency: bool = True, update_manifest: bool = False,
              previous: Path | None = None) -> dict[str, Any]:
    manifest = load_manifest(model_dir)
    labels = list(manifest.labels)
    run_dir = Path(run_dir or manifest.training.get("run_dir", ""))
    data_dir = Path(task_config.prepare.output_dir)
    sets = load_sets(data_dir)
    shipped = "int8" if manifest.metrics.get("precision", "int8") == "int8" else "shipped"
    variants: dict[str, Path | None] = {shipped: None}
    fp32 = run_dir / "onnx" / "model_fp32.onnx"
    if fp32.is_file():
        variants["fp32"] = fp32
    report: dict[str, Any] = {
        "task": spec.name, "model_dir": str(model_dir), "model_version": manifest.version,
        "model_sha256": manifest.model_sha256, "thresholds": manifest.thresholds,
        "model_mb": round((model_dir / manifest.model_file).stat().st_size / 1e6, 2),
        "threads": threads, "machine": machine(), "window": manifest.window.model_dump(),
        "data": {name: len(records) for name, records in sets.items()}, "data_dir": str(data_dir),
        "olid_rule": "OFF if any of " + ", ".join(ABUSIVE_LABELS) + " is flagged at its manifest threshold",
        "fallback_languages": manifest.fallback_languages, "lexicon_labels": manifest.lexicon_labels,
        "quality": {}, "latency": {},
    }
    validator = None
    for name, path in variants.items():
        validator = ToneValidator(model_dir, manifest, threads=threads, model_path=path)
        scores, model_only, routed_sets = {}, {}, {}
        for set_name, records in sets.items():
            logger.info("scoring %s with %s: %d texts", set_name, name, len(records))
            texts = [r["text"] for r in records]
            # The model's own scores on every text, routed ones included: the evidence for (or
            # against) routing; the served scores reuse them for the texts the model keeps.
            alone = validator.scores(texts)
            scores[set_name], routed = validator.served_scores(texts, model_scores=alone)
            if routed.any():
                model_only[set_name] = alone
                routed_sets[set_name] = records
                report.setdefault("routed_to_heuristic", {})[set_name] = int(routed.sum())
        report["quality"][name] = quality(scores, sets, labels, validator.thresholds)
        if model_only:
            report["quality"][f"{name} model only"] = quality(model_only, routed_sets, labels, validator.thresholds)
        report["latency"][name] = latency(validator)
        if name == shipped:
            report["predictions"] = predictions(scores, sets, labels)
            shipped_scores, shipped_thresholds = scores, dict(validator.thresholds)
    # The lexicon heuristic the gate falls back to without a model, on the same sets: the bar a
    # shipped model has to clear.
    fallback = HeuristicTone()
    baseline_scores = {name: heuristic_scores(fallback, [r["text"] for r in records], labels)
                       for name, records in sets.items()}
    report["quality"]["baseline: heuristic"] = quality(baseline_scores, sets, labels,
                                                       {label: fallback.threshold for label in labels})
    if previous is not None:
        previous_manifest = load_manifest(previous)
        older = ToneValidator(previous, previous_manifest, threads=threads)
        older_scores = {name: older.served_scores([r["text"] for r in records])[0] for name, records in sets.items()}
        report["previous"] = {"model_dir": str(previous), "model_version": previous_manifest.version,
                              "model_sha256": previous_manifest.model_sha256,
                              "fallback_languages": previous_manifest.fallback_languages}
        report["quality"][f"previous: {previous_manifest.version}"] = quality(older_scores, sets, labels, older.thresholds)
        report["versus_previous"] = versus_previous(shipped_scores, shipped_thresholds, older_scores,
                                                    older.thresholds, sets, labels)
    if torch_latency and validator is not None:
        measured = globals()["torch_latency"](spec, run_dir / "best", validator, threads)
        if measured:
            report["latency"]["torch_eager"] = measured
    _tables(report, labels, threads)
    if update_manifest:
        quality_shipped = report["quality"][shipped]
        update_manifest_metrics(model_dir, {"benchmark": {
            "olid_level_a": quality_shipped.get("olid_level_a"), "ru_toxic_val": quality_shipped.get("ru_toxic_val"),
            "test_all": quality_shipped.get("test_all"), "test_by_source": quality_shipped.get("test_by_source"),
            "statements": quality_shipped.get("statements"),
            "fp32": {k: report["quality"]["fp32"].get(k) for k in ("olid_level_a", "ru_toxic_val")}
            if "fp32" in report["quality"] else None,
            "fallback_languages": manifest.fallback_languages, "lexicon_labels": manifest.lexicon_labels,
            "routed_to_heuristic": report.get("routed_to_heuristic", {}),
            "model_only": {k: report["quality"][f"{shipped} model only"].get(k) for k in ("ru_toxic_val", "test_all")}
            if f"{shipped} model only" in report["quality"] else None,
            "baseline_heuristic": {k: report["quality"]["baseline: heuristic"].get(k)
                                   for k in ("olid_level_a", "ru_toxic_val", "test_all")},
            "versus_previous": report.get("versus_previous"), "previous": report.get("previous"),
            "latency": report["latency"][shipped], "threads": threads,
            "machine": report["machine"]}})
    return report
