"""What a user feels from the gate: friction (good answers it stops) and misses (bad answers it serves).

Labelled cases are ordinary cases with one more field: `label` (good | bad) or `expected_decision`
(ACCEPT means good; REVIEW or REJECT means bad). `meta.task` and `meta.language` group them
(else the task is inferred from question and context, and the language from the script).
`benchmark gate` reports these rates per task type and language with bootstrap intervals, and which
failure type stopped the good answers; `calibrate` fits the minimums that trade one for the other.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .case import Case, CaseError, parse_case, read_records
from .results import Decision, Result
from .text import language_of

LABEL_FIELDS = ("label", "expected_decision")
BOOTSTRAP_RESAMPLES = 1000


@dataclass(frozen=True)
class Labelled:
    case: Case
    good: bool
    language: str
    kind: str  # why a bad answer is bad (hallucinated, off_topic, ...), or what a good one is


def _label(record: dict[str, Any]) -> tuple[bool | None, str | None]:
    """(good?, None) or (None, why the label cannot be read)."""
    if "label" in record:
        value = str(record["label"]).strip().lower()
        if value in ("good", "bad"):
            return value == "good", None
        return None, f"label must be 'good' or 'bad', got {record['label']!r}"
    if "expected_decision" in record:
        value = str(record["expected_decision"]).strip().upper()
        if value in Decision.__members__:
            return value == "ACCEPT", None
        return None, f"expected_decision must be one of ACCEPT, REVIEW, REJECT, got {record['expected_decision']!r}"
    return None, "is required: every labelled case needs `label` (good|bad) or `expected_decision`"


def read_labelled(path: str | Path) -> tuple[list[Labelled], list[CaseError]]:
    """Labelled cases of a JSONL file, and an error naming file, line and field for each bad line."""
    return parse_labelled(read_records(path), str(path))


def is_labelled(records: Iterable[tuple[int, Any] | CaseError]) -> bool:
    """Whether any record of a file carries a label field: the file is then read as labelled."""
    return any(not isinstance(item, CaseError) and isinstance(item[1], dict) and bool(set(LABEL_FIELDS) & set(item[1]))
               for item in records)


def parse_labelled(records: Iterable[tuple[int, Any] | CaseError], source: str
                   ) -> tuple[list[Labelled], list[CaseError]]:
    """`read_records` items -> labelled cases, and an error per bad line."""
    cases: list[Labelled] = []
    errors: list[CaseError] = []
    for item in records:
        if isinstance(item, CaseError):
            errors.append(item)
            continue
        number, record = item
        if not isinstance(record, dict):
            errors.append(CaseError(number, None, "expected a JSON object", source=source))
            continue
        good, problem = _label(record)
        if problem:
            field = next((f for f in LABEL_FIELDS if f in record), "label")
            errors.append(CaseError(number, field, problem, id=str(record.get("id")), source=source))
            continue
        parsed = parse_case({k: v for k, v in record.items() if k not in LABEL_FIELDS}, line=number, source=source)
        if isinstance(parsed, CaseError):
            errors.append(parsed)
            continue
        language = str(parsed.meta.get("language") or language_of(parsed.answer))
        cases.append(Labelled(parsed, bool(good), language, str(parsed.meta.get("kind", "good" if good else "bad"))))
    return cases, errors


def rates(good: np.ndarray, accepted: np.ndarray) -> tuple[float | None, float | None]:
    """(friction, miss): the share of good answers not accepted, of bad answers accepted."""
    n_good, n_bad = int(good.sum()), int((~good).sum())
    friction = float((good & ~accepted).sum() / n_good) if n_good else None
    miss = float((~good & accepted).sum() / n_bad) if n_bad else None
    return friction, miss


def balanced_rates(good: np.ndarray, accepted: np.ndarray, groups: np.ndarray) -> tuple[float | None, float | None]:
    """(friction, miss) averaged over `groups` (a source per case), each group weighing the same:
    a source with many easy bad answers cannot pay for another's hard ones. One group = `rates`."""
    frictions, misses = [], []
    for group in np.unique(groups):
        friction, miss = rates(good[groups == group], accepted[groups == group])
        frictions += [friction] if friction is not None else []
        misses += [miss] if miss is not None else []
    return (float(np.mean(frictions)) if frictions else None, float(np.mean(misses)) if misses else None)


def bootstrap_interval(values: np.ndarray, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> list[float] | None:
    """95% percentile bootstrap interval of a mean (of 0/1 values, or of paired differences)."""
    if len(values) < 2:
        return None
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


def group_row(name: str, good: np.ndarray, accepted: np.ndarray) -> dict[str, Any]:
    friction, miss = rates(good, accepted)
    return {"group": name, "good": int(good.sum()), "bad": int((~good).sum()),
            "friction": friction, "friction_ci": bootstrap_interval((~accepted[good]).astype(float), 1),
            "miss": miss, "miss_ci": bootstrap_interval(accepted[~good].astype(float), 2)}


def evaluate(labelled: Sequence[Labelled], results: Sequence[Result]) -> dict[str, Any]:
    """Friction and miss overall, per language, per task, per dataset x task x language; what stops
    good answers (failure type), which kinds of bad answer get through and, where the cases mark their
    errors (`meta.error_kinds`), how many answers with each kind of error are served."""
    good = np.array([item.good for item in labelled], dtype=bool)
    accepted = np.array([r.decision is Decision.ACCEPT for r in results], dtype=bool)
    keys: dict[str, list[str]] = {
        "language": [item.language for item in labelled],
        "task": [str(r.meta.get("task", "?")) for r in results],
        "set": [f"{item.case.meta.get('dataset', 'cases')} {r.meta.get('task', '?')} {item.language}"
                for item, r in zip(labelled, results)],
    }
    groups: dict[str, list[dict[str, Any]]] = {"all": [group_row("all", good, accepted)]}
    for scope, values in keys.items():
        column = np.array(values)
        groups[scope] = [group_row(value, good[column == value], accepted[column == value])
                         for value in sorted(set(values))]
    stopped: dict[str, Counter] = defaultdict(Counter)
    missed: dict[str, Counter] = defaultdict(Counter)
    # Bad answers whose errors are marked by kind (`meta.error_kinds`: number, entity, ...; the written
    # sets of `prepare gate-sets`): per kind, how many answers with such an error the gate served.
    with_error: dict[str, Counter] = defaultdict(Counter)
    served_error: dict[str, Counter] = defaultdict(Counter)
    for item, result in zip(labelled, results):
        if item.good and result.decision is not Decision.ACCEPT:
            stopped[item.language][f"{result.decision.value} {result.failure_type.value}"] += 1
        if not item.good and result.decision is Decision.ACCEPT:
            missed[item.language][item.kind] += 1
        if not item.good:
            for kind in set(item.case.meta.get("error_kinds") or ()):
                with_error[item.language][kind] += 1
                served_error[item.language][kind] += result.decision is Decision.ACCEPT
    cases = [{"id": item.case.id, "good": item.good, "accepted": bool(ok), "decision": r.decision.value,
              "failure_type": r.failure_type.value, "language": lang, "task": task, "set": group}
             for item, r, ok, lang, task, group in zip(labelled, results, accepted, keys["language"], keys["task"],
                                                        keys["set"])]
    return {"groups": groups,
            "good_stopped_by": {lang: dict(c.most_common()) for lang, c in sorted(stopped.items())},
            "bad_accepted_by_kind": {lang: dict(c.most_common()) for lang, c in sorted(missed.items())},
            "bad_accepted_by_error": {lang: {kind: {"served": served_error[lang][kind], "of": total}
                                             for kind, total in sorted(c.items())}
                                      for lang, c in sorted(with_error.items())},
            "cases": cases}


def paired_change(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Friction and miss of `after` minus `before` on the cases both scored (matched by id), overall
    and per language and task, with 95% paired bootstrap intervals: a change inside its interval is
    no change."""
    earlier = {c["id"]: c for c in before}
    pairs = [(earlier[c["id"]], c) for c in after if c["id"] in earlier]
    if not pairs:
        raise ValueError("the two runs share no case id")
    rows = []
    scopes = [("all", lambda c: "all"), ("language", lambda c: c["language"]), ("task", lambda c: c["task"])]
    for scope, key in scopes:
        for group in sorted({key(b) for b, _ in pairs}):
            members = [(b, a) for b, a in pairs if key(b) == group]
            row: dict[str, Any] = {"scope": scope, "group": group, "cases": len(members)}
            for metric, wanted in (("friction", True), ("miss", False)):
                # friction counts good answers not accepted; miss counts bad answers accepted
                subset = [(b, a) for b, a in members if b["good"] is wanted]
                flag = (lambda c: not c["accepted"]) if wanted else (lambda c: c["accepted"])
                old = np.array([flag(b) for b, _ in subset], dtype=float)
                new = np.array([flag(a) for _, a in subset], dtype=float)
                row[f"{metric}_before"] = float(old.mean()) if len(old) else None
                row[f"{metric}_after"] = float(new.mean()) if len(new) else None
                row[f"{metric}_change"] = float((new - old).mean()) if len(old) else None
                row[f"{metric}_change_ci"] = bootstrap_interval(new - old, 5) if len(old) else None
            rows.append(row)
    return rows


def tone_rates(texts: Iterable[dict[str, Any]], flagged: Sequence[bool]) -> list[dict[str, Any]]:
    """Per dataset: the share of texts the tone check flags (neutral: false flags; abusive: catches)."""
    by_set: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for text, flag in zip(texts, flagged):
        by_set[(text["language"], text["label"], text["dataset"])].append(bool(flag))
    rows = []
    for (language, label, dataset), flags in sorted(by_set.items()):
        values = np.array(flags, dtype=float)
        rows.append({"language": language, "label": label, "dataset": dataset, "texts": len(flags),
                     "flag_rate": float(values.mean()), "flag_rate_ci": bootstrap_interval(values, 3)})
    for language in sorted({t[0] for t in by_set}):
        neutral = [f for (lang, label, _), flags in by_set.items() if lang == language and label == "neutral"
                   for f in flags]
        if neutral:
            values = np.array(neutral, dtype=float)
            rows.append({"language": language, "label": "neutral", "dataset": "all neutral", "texts": len(neutral),
                         "flag_rate": float(values.mean()), "flag_rate_ci": bootstrap_interval(values, 4)})
    return rows


def paired_tone_change(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flag rates of `after` minus `before` on the tone texts both flagged or not (matched by id and
    text), per language and label (`dataset` "all"), then per dataset where `after`'s entries name
    one, each with a 95% paired bootstrap interval: one tone model against another on the same texts.
    Each entry of either: {id, text_sha256, language, label, flagged[, dataset]}. A language's total
    can hide a set that moved the other way (forum messages against encyclopaedic sentences)."""
    earlier = {(t["id"], t["text_sha256"]): t for t in before}
    pairs = [(earlier[(t["id"], t["text_sha256"])], t) for t in after if (t["id"], t["text_sha256"]) in earlier]
    if not pairs:
        raise ValueError("the two runs share no tone text")
    groups: dict[tuple[str, str, str], list[tuple[dict, dict]]] = {}
    for b, a in pairs:
        groups.setdefault((a["language"], a["label"], "all"), []).append((b, a))
        if a.get("dataset"):
            groups.setdefault((a["language"], a["label"], a["dataset"]), []).append((b, a))
    rows = []
    def order(key: tuple[str, str, str]) -> tuple[str, str, bool, str]:  # a language's total before its sets
        language, label, dataset = key
        return language, label, dataset != "all", dataset

    for (language, label, dataset), members in sorted(groups.items(), key=lambda item: order(item[0])):
        old = np.array([b["flagged"] for b, _ in members], dtype=float)
        new = np.array([a["flagged"] for _, a in members], dtype=float)
        rows.append({"language": language, "label": label, "dataset": dataset, "texts": len(old),
                     "before": float(old.mean()), "after": float(new.mean()), "change": float((new - old).mean()),
                     "change_ci": bootstrap_interval(new - old, 6)})
    return rows


def plot_rates(groups: list[dict[str, Any]], path: Path) -> Path | None:
    """Friction and miss per group as paired bars with their intervals; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = [g["group"] for g in groups]
    positions = np.arange(len(names))
    figure, axis = plt.subplots(figsize=(max(6.0, 0.7 * len(names) + 2), 4.2))
    for offset, metric, colour in ((-0.2, "friction", "tab:orange"), (0.2, "miss", "tab:red")):
        values = np.array([g[metric] if g[metric] is not None else np.nan for g in groups])
        low = np.array([g[metric] - g[f"{metric}_ci"][0] if g.get(f"{metric}_ci") else 0 for g in groups])
        high = np.array([g[f"{metric}_ci"][1] - g[metric] if g.get(f"{metric}_ci") else 0 for g in groups])
        axis.bar(positions + offset, values, width=0.4, color=colour, label=metric,
                 yerr=np.vstack([low, high]), capsize=2)
    axis.set_xticks(positions, names, rotation=35, ha="right", fontsize=8)
    axis.set_ylim(0, 1)
    axis.set_ylabel("share of answers")
    axis.set_title("friction (good answers stopped) and miss (bad answers served)")
    axis.legend()
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # --json may name a folder not made yet
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
