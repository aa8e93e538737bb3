"""`autovalidators benchmark heuristic-spans`: which characters of a flagged sentence the lexical
heuristic should mark, and below which support a sentence is flagged: chosen on dev rows
(`--split dev`); `--split test` scores the held-out rows, once for each choice you would ship.

Why: the heuristic flags sentences, and a flagged sentence used to be HALLUCINATION from its first
character to its last, while RAGTruth's spans cover a few words ("in 2019", "the CDC"). Marking only
the words the context lacks changes no score and no gate decision (the answer's precision and worst
span score come from sentence support), only the character spans a reader is pointed at.

Every judged set is scored: `--split dev` reads `answers/dev.jsonl` (where a mode is chosen),
`--split test` the rows `benchmark fact-spans --leave-one-out` scores (RAGTruth and FaithBench
`heldout/`, the others `answers/test.jsonl`); both add the swapped-answer cases of `prepare
gate-sets` (English and Russian; `SWAPPED_SETS`) and the written answers of the same split
(`WRITTEN_SETS`: natural errors marked by their writers, `data_prep/fact_spans/written_errors.py`).
Per set: example P/R/F1 (the same in every mode);
on sets with character labels, each mode (`MODES`, one mode in every language) with character
P/R/F1 and, against the first (the whole sentence), a paired bootstrap, and the shipped heuristic's
sentence F1 (a sentence flagged when a HALLUCINATION span touches it; how long answers are judged); `shipped` is the default
validator, whose mode depends on the answer's language (`LANGUAGE_SPAN_MODES`). Then the support
thresholds (`compare_support_thresholds`) and the shipped heuristic against it without each of its
readings (`READINGS`, `compare_readings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autovalidators.data_prep.fact_spans.written_errors import WRITTEN_SETS, as_span_records, read_written_errors
from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.validators.heuristic import SUPPORTED_AT, TASK_SUPPORTED_AT, HeuristicFactSpans

from autovalidators.training.benchmarks.fact_spans_loo import SETS, held_out_sets, set_of
from autovalidators.training.benchmarks.grounding import score_judged
from autovalidators.training.benchmarks.span_scoring import paired_bootstrap, score_group

# name -> HeuristicFactSpans arguments; the first is the reference the others are compared with.
# Each mode but `shipped` applies in every language (language_modes={}).
_UNIFORM: dict[str, tuple[str, int]] = {
    "sentence": ("sentence", 1), "phrases_gap0": ("phrases", 0), "phrases_gap1": ("phrases", 1),
    "phrases_gap2": ("phrases", 2), "phrases_gap4": ("phrases", 4),
    "named_gap1": ("named_phrases", 1), "named_gap2": ("named_phrases", 2),
}
MODES: dict[str, dict[str, Any]] = {
    **{name: {"span_mode": mode, "phrase_gap": gap, "language_modes": {}} for name, (mode, gap) in _UNIFORM.items()},
    "shipped": {},  # HeuristicFactSpans(): the sentence, Russian answers' phrases (LANGUAGE_SPAN_MODES)
}
# The support below which a sentence is flagged, one value for every task (`task_supported_at={}`),
# with the shipped span modes: scored on dev only, where a task's value is chosen. Each lies above
# the caps of `heuristics.capped_support` (0.3, 0.4), so an unsupported number, name or negation
# still flags its sentence. The held-out rows score the shipped values (TASK_SUPPORTED_AT)
# against SUPPORTED_AT everywhere (the default), once.
SUPPORT_THRESHOLDS = (0.45, 0.5, 0.55, 0.6, 0.7, 0.8)
# Sets with character labels; the response-judged ones (SummEdits, FIB, BEGIN, FaithDial) are
# scored too, for example F1 alone (every mode flags the same answers).
SPAN_SETS = ("ragtruth/QA", "ragtruth/Summary", "ragtruth/Data2txt", "faithbench", "xsumfaith", "wice")
# Constructed, English and Russian: XQuAD / TyDi answers with another question's answer swapped in
# (`prepare gate-sets`, `meta.unsupported`); the written sets (`written_rows`) are the natural kind.
SWAPPED_SETS = ("swapped/en", "swapped/ru")


def swapped_rows(gate_sets: Path, split: str) -> dict[str, tuple[str, list[dict]]]:
    """The swapped answers of `<gate_sets>/<split>.jsonl` per language, as judged span records."""
    path = gate_sets / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run `autovalidators prepare gate-sets`")
    by_set: dict[str, list[dict]] = {}
    for case in read_jsonl(path):
        meta = case.get("meta", {})
        if meta.get("kind") == "swapped" and meta.get("unsupported"):
            by_set.setdefault(f"swapped/{meta['language']}", []).append(
                {"id": case["id"], "text": case["answer"], "context": case["context"], "label": 0,
                 "granularity": "span", "unsupported": meta["unsupported"], "source": meta["dataset"]})
    return {name: ("judged", by_set[name]) for name in SWAPPED_SETS if name in by_set}


def written_rows(split: str) -> dict[str, tuple[str, list[dict]]]:
    """The written answers of `split` per set (`WRITTEN_SETS`: Russian short answers, English long-form
    ones, faithful or with errors marked by their writers: a wrong number in a paraphrase, a wrong
    adjective, a plausible sentence the passage lacks), as span records with their questions."""
    return {name: ("span", as_span_records(read_written_errors(path, split=split))) for name, path in WRITTEN_SETS.items()}


def rows_of(data_dir: Path, split: str, gate_sets: Path) -> dict[str, tuple[str, list[dict]]]:
    """Span-labelled rows per set: name -> (kind, records), kind as in `fact_spans_loo`."""
    if split not in ("dev", "test"):
        raise ValueError(f"split {split!r}: choose dev or test")
    constructed_and_written = {**swapped_rows(gate_sets, split), **written_rows(split)}
    if split == "test":
        return {**held_out_sets(data_dir), **constructed_and_written}
    path = data_dir / "answers" / "dev.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run `autovalidators prepare grounding`")
    by_set: dict[str, list[dict]] = {}
    for record in read_jsonl(path):
        # the span sets' rows without spans (WiCE's claims, ...) would count as flagged-nowhere answers
        if record["granularity"] == "span" or set_of(record) not in SPAN_SETS:
            by_set.setdefault(set_of(record), []).append(record)
    return {**{name: ("judged", by_set[name]) for name in SETS if name in by_set}, **constructed_and_written}


def compare_span_modes(data_dir: Path, split: str, gate_sets: Path = Path("out/gate_sets")) -> dict[str, Any]:
    """Per set: example P/R/F1; on sets with character labels, per mode its character P/R/F1 and (after
    the first) the paired bootstrap of its character F1 minus the first mode's; and each mode's mean
    character F1 over those sets."""
    report: dict[str, Any] = {"data": str(data_dir), "gate_sets": str(gate_sets), "split": split, "modes": MODES,
                              "sets": {}}
    reference = next(iter(MODES))
    rows = rows_of(data_dir, split, gate_sets)
    shipped: dict[str, dict[str, Any]] = {}  # the shipped validator's scores, for the threshold section
    for name, (kind, records) in rows.items():
        # Modes differ only in character spans: a set judged per response is scored once.
        has_spans = kind == "span" or any(r["granularity"] == "span" for r in records)
        scored = {}
        for mode, arguments in (MODES if has_spans else {reference: MODES[reference]}).items():
            validator = HeuristicFactSpans(**arguments)
            scored[mode] = score_group(validator, records) if kind == "span" else score_judged(validator, records)
        if "shipped" in scored:
            shipped[name] = scored["shipped"]
        report["sets"][name] = {
            "rows": len(records),
            "hallucinated": scored[reference]["hallucinated"],
            "example": scored[reference]["example"],  # the same for every mode
            **{mode: {key: r[key] for key in ("char", "sentence") if key in r} for mode, r in scored.items() if "char" in r},
            "versus_" + reference: {mode: paired_bootstrap(r["predictions"], scored[reference]["predictions"])
                                    .get("char_f1") for mode, r in scored.items() if mode != reference and "char" in r},
        }
    spans = [s for s in report["sets"].values() if reference in s]
    report["mean_char_f1"] = {mode: sum(s[mode]["char"]["f1"] for s in spans) / max(1, len(spans)) for mode in MODES}
    report["support_thresholds"] = compare_support_thresholds(rows, split, shipped)
    report["readings"] = compare_readings(rows, shipped)
    return report


# A reading of the shipped heuristic, as the arguments that turn it off: each is scored on every set
# and the shipped validator paired against it, so a reading's gain or loss is one command's output.
READINGS: dict[str, dict[str, Any]] = {
    # a Russian sentence that only says what the passage lacks is noise (`SOURCE_LACKS_LANGUAGES`)
    "source_lacks": {"source_lacks_languages": frozenset()},
}


def compare_readings(rows: dict[str, tuple[str, list[dict]]],
                     shipped: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per reading (READINGS) and set: the paired bootstrap of the shipped heuristic minus it without
    that reading (example and, on span sets, character F1). `shipped`: scores already made."""
    report: dict[str, Any] = {}
    for reading, arguments in READINGS.items():
        without = HeuristicFactSpans(**arguments)
        report[reading] = {}
        for name, (kind, records) in rows.items():
            score = score_group if kind == "span" else score_judged
            ours = (shipped or {}).get(name) or score(HeuristicFactSpans(), records)
            report[reading][name] = paired_bootstrap(ours["predictions"], score(without, records)["predictions"])
    return report


def reading_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per set: per reading, shipped minus without it in example / character F1 [95%]."""
    rows: dict[str, dict[str, Any]] = {}
    for reading, sets in report["readings"].items():
        for name, paired in sets.items():
            row = rows.setdefault(name, {"set": name})
            row[reading] = " / ".join(f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                                      for key, d in paired.items())
    return list(rows.values())


def compare_support_thresholds(rows: dict[str, tuple[str, list[dict]]], split: str,
                               shipped: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per set: example (and character) P/R/F1 at each of SUPPORT_THRESHOLDS in every task (on test,
    SUPPORTED_AT alone: the `default`), of the shipped per-task values, and the paired bootstrap of
    shipped minus default. `shipped`: the shipped validator's scores of sets already scored; the sets
    scored here are added to it."""
    default = f"{SUPPORTED_AT:g}"
    values = SUPPORT_THRESHOLDS if split == "dev" else (SUPPORTED_AT,)
    candidates = {f"{t:g}": HeuristicFactSpans(supported_at=t, task_supported_at={}) for t in values}
    report: dict[str, Any] = {"thresholds": [*candidates, "shipped"], "default": default,
                              "task_supported_at": TASK_SUPPORTED_AT, "supported_at": SUPPORTED_AT, "sets": {}}

    def score(validator: HeuristicFactSpans, kind: str, records: list[dict]) -> dict[str, Any]:
        return score_group(validator, records) if kind == "span" else score_judged(validator, records)

    for name, (kind, records) in rows.items():
        scored = {label: score(v, kind, records) for label, v in candidates.items()}
        scored["shipped"] = (shipped or {}).get(name) or score(HeuristicFactSpans(), kind, records)
        if shipped is not None:
            shipped[name] = scored["shipped"]  # kept for `compare_readings`, which pairs against it
        report["sets"][name] = {
            **{label: {key: r[key] for key in ("example", "char", "sentence") if key in r} for label, r in scored.items()},
            "shipped_versus_default": paired_bootstrap(scored["shipped"]["predictions"], scored[default]["predictions"]),
        }
    return report


def threshold_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per set: example / character F1 at each threshold, and shipped minus default (Δ)."""
    section = report["support_thresholds"]
    rows = []
    for name, result in section["sets"].items():
        row: dict[str, Any] = {"set": name}
        for label in section["thresholds"]:
            row[label] = "/".join(f"{result[label][key]['f1']:.3f}" for key in ("example", "char") if key in result[label])
        for key, d in result["shipped_versus_default"].items():
            row[f"Δ {key.split('_')[0]}"] = f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
        rows.append(row)
    return rows


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    reference = next(iter(MODES))
    rows = []
    for name, result in report["sets"].items():
        row: dict[str, Any] = {"set": name, "rows": result["rows"], "example F1": f"{result['example']['f1']:.3f}"}
        if "sentence" in result.get("shipped", {}):
            row["sentence F1 (shipped)"] = f"{result['shipped']['sentence']['f1']:.3f}"
        for mode in MODES:
            if mode not in result:
                continue
            row[mode] = f"{result[mode]['char']['f1']:.3f}"
            versus = result["versus_" + reference].get(mode)
            if versus:
                row[mode] += f" ({versus['difference']:+.3f} [{versus['low']:+.3f}, {versus['high']:+.3f}])"
        rows.append(row)
    rows.append({"set": "mean (span sets)", "rows": "", **{m: f"{v:.3f}" for m, v in report["mean_char_f1"].items()}})
    return rows
