"""`autovalidators benchmark tone-dev`: tone candidates side by side on dev rows, to choose among them.

`benchmark tone` scores one model on the held-out sets, which a candidate should meet once; choosing
among candidates happens before, on dev. This command scores several model folders, each as served
(`ToneValidator.served_scores`, its own manifest thresholds and routing), on the same dev rows:

- a prepared tone dev file (`prepare tone` writes `dev_sampled.jsonl`): per neutral source group and
  language the share flagged by a blocking label, the share flagged among the Russian forum messages
  (`ru_appropriate`), toxicity F1 and ROC-AUC on the Russian toxic comments and on OLID's dev rows
  (the AUC sees a ranking loss that F1 at a cut chosen on the same dev rows hides: three candidates of
  2026-12-07 kept dev F1 within 0.005 and lost about 0.005 of Russian AUC beyond the interval; the two
  scored held out lost Russian toxic F1 there);
- the identity statements' dev split (held-out groups and wordings of the training ones): hateful
  statements caught and neutral ones flagged, per language;
- optionally genre files (JSONL with `text`, every text neutral, e.g.
  `data_prep/samples/tone/assistant_instructions_dev_ru.jsonl`): the share flagged, one measure each.

The first model is the reference: every other one is reported minus it with a paired bootstrap over
rows (2,000 resamples, 95% interval). A gain inside the interval is no gain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from sklearn.metrics import roc_auc_score

from autovalidators.data_prep.io import DataError, read_jsonl
from autovalidators.data_prep.tone.statements import DEFAULT_PATH as STATEMENTS, statement_records
from autovalidators.inference.gate_quality import bootstrap_interval
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators.tone import ToneValidator

from autovalidators.training.benchmarks.tone import abusive_flags, paired_auc_bootstrap, paired_f1_bootstrap
from autovalidators.training.tasks.tone import TONE_LABELS

RESAMPLES = 2000
FORUM_SOURCE = "ru_appropriate"
TOXICITY_SOURCES = {"ru_toxic": "Russian toxic comments", "olid": "OLID dev rows"}


def dev_rows(dev_file: Path, neutral_sources: Sequence[str], genre_files: Sequence[Path] = (),
             statements: Path = STATEMENTS) -> list[dict[str, Any]]:
    """Each dev row as {text, measure, kind, gold}: `kind` "rate" (share flagged, lower is better
    unless the measure catches hate) or "toxicity" (gold toxicity known, for F1)."""
    rows: list[dict[str, Any]] = []
    for number, record in enumerate(read_jsonl(dev_file), start=1):
        missing = [field for field in ("text", "source", "language") if not isinstance(record.get(field), str)]
        if missing:
            raise DataError(f"{dev_file}:{number}: field {missing[0]!r} missing or not a string")
        source, language, toxicity = record["source"], record["language"], (record.get("labels") or {}).get("toxicity")
        if source in neutral_sources:
            rows.append({"text": record["text"], "measure": f"neutral {language} flagged", "kind": "rate"})
        elif source == FORUM_SOURCE:
            rows.append({"text": record["text"], "measure": "forum messages flagged (ru)", "kind": "rate"})
        elif source in TOXICITY_SOURCES and toxicity is not None:
            rows.append({"text": record["text"], "measure": f"toxicity F1, {TOXICITY_SOURCES[source]}",
                         "kind": "toxicity", "gold": bool(toxicity)})
    for record in statement_records(statements, TONE_LABELS):
        if record["split"] == "dev":
            hateful = record["labels"]["identity_hate"] == 1
            rows.append({"text": record["text"], "kind": "rate", "measure":
                         f"{'hateful statements caught' if hateful else 'neutral statements flagged'} ({record['language']})"})
    for genre_file in genre_files:  # one measure each, named by the file
        for number, record in enumerate(read_jsonl(genre_file), start=1):
            if not isinstance(record.get("text"), str):
                raise DataError(f"{genre_file}:{number}: field 'text' missing or not a string")
            rows.append({"text": record["text"], "measure": f"genre flagged ({genre_file.stem})", "kind": "rate"})
    return rows


def served_flags(model_dir: Path, texts: Sequence[str], threads: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flagged by any blocking label, flagged for toxicity, toxicity score) per text, as the model serves them."""
    validator = ToneValidator(model_dir, load_manifest(model_dir), threads=threads)
    scores, _ = validator.served_scores(list(texts))
    toxicity = validator.labels.index("toxicity")
    return (abusive_flags(scores, validator.labels, validator.thresholds),
            scores[:, toxicity] >= validator.thresholds["toxicity"], scores[:, toxicity])


def paired_rate_bootstrap(ours: np.ndarray, theirs: np.ndarray, *, resamples: int = RESAMPLES,
                          seed: int = 13) -> dict[str, float]:
    """Our share flagged minus theirs on the same rows, with a paired bootstrap over rows (the
    interval of the mean row difference, as `benchmark gate --baseline` computes its own)."""
    differences = np.asarray(ours, dtype=float) - np.asarray(theirs, dtype=float)
    low, high = bootstrap_interval(differences, seed, resamples) or (differences.mean(), differences.mean())
    return {"difference": float(differences.mean()), "low": float(low), "high": float(high),
            "rows": int(len(differences))}


def compare(models: Sequence[Path], rows: Sequence[dict[str, Any]], threads: int = 2) -> dict[str, Any]:
    """Every measure for every model, and each model after the first minus the first."""
    if not rows:
        raise ValueError("no dev rows: the dev file holds none of the measured sources")
    if len({str(m) for m in models}) < len(models):
        raise ValueError(f"a model folder is named twice in {[str(m) for m in models]}")
    texts = [r["text"] for r in rows]
    flags = {str(model): served_flags(model, texts, threads) for model in models}
    reference = str(models[0])
    measures: dict[str, Any] = {}
    for measure in dict.fromkeys(r["measure"] for r in rows):
        index = np.asarray([i for i, r in enumerate(rows) if r["measure"] == measure])
        kind = rows[index[0]]["kind"]
        entry: dict[str, Any] = {"rows": int(len(index)), "kind": kind, "models": {}, "versus_first": {}}
        if kind == "rate":
            for model, (flagged, _, _) in flags.items():
                entry["models"][model] = {"flagged": int(flagged[index].sum()), "rate": float(flagged[index].mean())}
                if model != reference:
                    entry["versus_first"][model] = paired_rate_bootstrap(flagged[index], flags[reference][0][index])
        else:
            gold = np.asarray([rows[i]["gold"] for i in index])
            both_classes = 0 < gold.sum() < len(gold)  # ROC-AUC needs toxic and non-toxic rows
            for model, (_, toxic, score) in flags.items():
                versus = paired_f1_bootstrap(gold, toxic[index], flags[reference][1][index], macro=False)
                entry["models"][model] = {"f1": versus["ours"],
                                          "roc_auc": float(roc_auc_score(gold, score[index])) if both_classes else None}
                if model != reference:
                    # The bootstrap of AUCs costs a second or two per model; the reference is not bootstrapped against itself.
                    ranking = paired_auc_bootstrap(gold, score[index], flags[reference][2][index]) if both_classes else None
                    entry["versus_first"][model] = {
                        **{k: versus[k] for k in ("difference", "low", "high", "rows")},
                        "roc_auc": {k: ranking[k] for k in ("difference", "low", "high")} if ranking else None}
        measures[measure] = entry
    return {"models": [str(m) for m in models], "reference": reference, "resamples": RESAMPLES, "measures": measures}


def table_rows(report: dict[str, Any]) -> list[list[str]]:
    """One printable row per measure (a toxicity measure also prints its ROC-AUC row): its rows, each
    model's value, each later model's difference [95%]."""
    printed = []
    for measure, entry in report["measures"].items():
        cells = [measure, str(entry["rows"])]
        for model in report["models"]:
            value = entry["models"][model]
            cells.append(f"{value['flagged']} ({value['rate']:.1%})" if entry["kind"] == "rate" else f"{value['f1']:.3f}")
        cells += [_difference(entry["versus_first"][model]) for model in report["models"][1:]]
        printed.append(cells)
        if entry["kind"] == "toxicity" and entry["models"][report["reference"]]["roc_auc"] is not None:
            printed.append([measure.replace("toxicity F1", "toxicity ROC-AUC"), str(entry["rows"]),
                            *(f"{entry['models'][model]['roc_auc']:.4f}" for model in report["models"]),
                            *(_difference(entry["versus_first"][model]["roc_auc"], digits=4)
                              for model in report["models"][1:])])
    return printed


def _difference(d: dict[str, float], digits: int = 3) -> str:
    return f"{d['difference']:+.{digits}f} [{d['low']:+.{digits}f}, {d['high']:+.{digits}f}]"
