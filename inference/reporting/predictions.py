"""Per-example predictions in a benchmark JSON -> scored sets, confusion matrices, worst errors.

Every list under a key `predictions` is read (an fp32 copy is dropped when the shipped model's
lists exist); items may carry `set` (several sets in one list: one curve each) and are one of

    binary      {id, label|gold: 0/1, score, question?, answer|text?, context?, language?}
    multilabel  {id, gold|labels: {label: 0|1|null}, scores: {label: p}, text}   (one set per label)
    spans       {id, gold: bool, score: P(hallucinated), predicted: bool, gold_spans, predicted_spans}
                with spans as [start, end] or {start, end, label}; texts looked up by id when absent

The set's threshold: `threshold`/`thresholds[label]` next to the list, else at the top level.
Where the item states `predicted`, that flag (not the score cut) decides errors and confusion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .jsonpath import group_name, number, walk
from .schema import Confusion, ErrorExample, Highlight, ReportConfig, ScoredSet


def prediction_lists(data: dict[str, Any]) -> list[tuple[tuple[str, ...], list[dict]]]:
    """Every `predictions` list; an fp32 copy is dropped when the shipped model's lists are there."""
    found = []
    for path, value in walk(data):
        if path and path[-1] == "predictions" and isinstance(value, list):
            found.append((path, [v for v in value if isinstance(v, dict)]))
    shipped = [f for f in found if "fp32" not in f[0]]
    return shipped or found


def _threshold(data: dict[str, Any], path: tuple[str, ...], label: str | None) -> float | None:
    parent: Any = data
    for segment in path[:-1]:
        parent = parent.get(segment, {}) if isinstance(parent, dict) else {}
    for holder in (parent, data):
        if not isinstance(holder, dict):
            continue
        if label and isinstance(holder.get("thresholds"), dict) and number(holder["thresholds"].get(label)) is not None:
            return number(holder["thresholds"][label])
        if not label and number(holder.get("threshold")) is not None:
            return number(holder["threshold"])
    return None


def _gold(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    return int(value) if number(value) is not None and value in (0, 1) else None


def _highlights(record: dict) -> list[Highlight]:
    marks = []
    for key, prefix in (("gold_spans", "gold"), ("predicted_spans", "predicted")):
        for span in record.get(key) or []:
            if isinstance(span, (list, tuple)) and len(span) == 2:  # [start, end] of a hallucination
                span = {"start": span[0], "end": span[1]}
            label = str(span.get("label", "HALLUCINATION"))
            if label.upper() in ("FACT", "O"):
                continue  # only what was (or should have been) flagged is highlighted
            marks.append(Highlight(start=int(span["start"]), end=int(span["end"]), label=f"{prefix} {label}"))
    return marks


def _example(record: dict, group: str, error: str, score: float, gold: int, context_chars: int) -> ErrorExample:
    text = str(record.get("answer") or record.get("text") or "")
    context = record.get("context") or ""
    if isinstance(context, list):
        context = "\n\n".join(str(c) for c in context)
    if len(context) > context_chars:
        context = context[:context_chars] + " …"
    return ErrorExample(id=str(record.get("id", "")), group=group, error=error, score=score, gold=str(gold),
                        question=str(record.get("question") or ""), text=text, context=str(context),
                        language=str(record.get("language") or ""),
                        highlights=[h for h in _highlights(record) if 0 <= h.start < h.end <= len(text)])


def _pairs(record: dict) -> list[tuple[str | None, float | None, int | None, int | None]]:
    """(label or None, score, gold 0/1, predicted 0/1 if the benchmark states it) of one prediction."""
    if isinstance(record.get("scores"), dict):
        gold = record["gold"] if isinstance(record.get("gold"), dict) else record.get("labels") or {}
        return [(label, number(s), _gold(gold.get(label)), None) for label, s in record["scores"].items()]
    gold = next((record[k] for k in ("label", "gold", "hallucinated") if k in record), None)
    return [(None, number(record.get("score")), _gold(gold), _gold(record.get("predicted")))]


def scored_sets(data: dict[str, Any], config: ReportConfig,
                texts: dict[str, dict] | None = None) -> tuple[list[ScoredSet], list[ErrorExample], list[str]]:
    """Scored sets (binary, or one per label and `set`) and the worst errors, from `predictions` lists.

    `texts` (id -> record with answer/context/question) fills in examples whose prediction holds
    only ids. An error is a prediction on the wrong side of the threshold, or, where the benchmark
    states its own `predicted` flag, a flag that disagrees with gold; worst = farthest from the cut.
    """
    sets, candidates, notes = [], [], []
    for path, records in prediction_lists(data):
        base = group_name(path[:-1]) if len(path) > 1 else ""
        per_set: dict[tuple[str, str | None], list[tuple[float, int, int | None, dict]]] = {}
        skipped = 0
        for record in records:
            subset = " / ".join(str(x) for x in (base, record.get("set")) if x) or "predictions"
            for label, score, target, predicted in _pairs(record):
                if score is None or target is None:
                    skipped += 1 if label is None else 0  # a missing label of a multi-label record is normal
                    continue
                per_set.setdefault((subset, label), []).append((score, target, predicted, record))
        if skipped:
            notes.append(f"{base or 'predictions'}: {skipped} prediction(s) without a 0/1 gold or a score left out")
        for (subset, label), items in per_set.items():
            threshold = _threshold(data, path, label)
            set_name = f"{subset} / {label}" if label else subset
            kept = items[:config.max_points]
            if len(items) > len(kept):
                notes.append(f"{set_name}: curves use the first {len(kept)} of {len(items)} predictions")
            stated = all(p is not None for _, _, p, _ in kept)
            sets.append(ScoredSet(name=set_name, scores=[s for s, *_ in kept], labels=[t for _, t, _, _ in kept],
                                  threshold=threshold, predicted=[int(p) for _, _, p, _ in kept] if stated else None))
            cut = 0.5 if threshold is None else threshold
            for score, target, predicted, record in items:
                flagged = bool(predicted) if predicted is not None else score >= cut
                if flagged != bool(target):
                    error = "false positive" if target == 0 else "false negative"
                    shown = {**(texts or {}).get(str(record.get("id")), {}), **record}
                    candidates.append((abs(score - cut), _example(shown, set_name, error, score, target,
                                                                  config.context_chars)))
    candidates.sort(key=lambda c: -c[0])
    return sets, [example for _, example in candidates[:config.worst_errors]], notes


def confusions(data: dict[str, Any], sets: list[ScoredSet]) -> list[Confusion]:
    found = []
    for path, value in walk(data):
        if path and path[-1] in ("confusion", "confusion_matrix") and isinstance(value, list) and len(value) == 2:
            found.append(Confusion(name=group_name(path[:-1]), matrix=[[int(x) for x in row] for row in value]))
    for scored in sets:
        cut = 0.5 if scored.threshold is None else scored.threshold
        matrix = [[0, 0], [0, 0]]
        predicted = scored.predicted or [int(score >= cut) for score in scored.scores]
        for label, flag in zip(scored.labels, predicted):
            matrix[label][flag] += 1
        found.append(Confusion(name=scored.name, matrix=matrix, threshold=scored.threshold,
                               origin="computed from the benchmark's predictions"))
    return found


def texts_by_id(files: dict[str, str], limit: int = 200_000) -> dict[str, dict]:
    """id -> record from the benchmark's JSONL data, for predictions that carry only ids."""
    found: dict[str, dict] = {}
    for path in files.values():
        if not (path.endswith(".jsonl") and Path(path).is_file()):
            continue
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the benchmark already reported bad lines; text lookup is best effort
                if isinstance(record, dict) and "id" in record:
                    found[str(record["id"])] = {k: record.get(k) for k in ("answer", "text", "context", "question",
                                                                           "language") if k in record}
                if len(found) >= limit:
                    return found
    return found
