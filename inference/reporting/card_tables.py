"""Metric trees (nested JSON objects of numbers) as markdown tables, with fixed number formats.

Used by the model cards (`model_card.py`): the same JSON gives the same bytes, so a card can be
checked against a fresh render.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Optional, Sequence

# Columns in this order first, the rest alphabetically; integers are counts, floats are metrics.
COLUMN_ORDER = ("precision", "recall", "f1", "macro_f1", "f1_not", "f1_off", "accuracy", "balanced_accuracy",
                "roc_auc", "macro_roc_auc", "map", "mrr", "value", "dev_example_f1", "threshold", "ours", "theirs",
                "difference", "low", "high", "p_not_better", "p50_ms", "p95_ms", "p99_ms", "mean_ms")
HEADERS = {"f1": "F1", "macro_f1": "macro-F1", "roc_auc": "ROC-AUC", "macro_roc_auc": "macro ROC-AUC", "map": "MAP",
           "mrr": "MRR", "f1_not": "F1 NOT", "f1_off": "F1 OFF", "p_not_better": "P(not better)",
           "dev_example_f1": "dev example F1", "p50_ms": "p50 ms", "p95_ms": "p95 ms", "p99_ms": "p99 ms",
           "mean_ms": "mean ms"}
THRESHOLD_KEYS = ("threshold", "value")  # four decimals: a cut, not a score
SIGNED_KEYS = ("difference", "low", "high")


def plain(value: Any) -> str:
    """A recorded value as written (config values, paths): shortest float repr, JSON for lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "null" if value is None else str(value)


def fmt(key: str, value: Any) -> str:
    """A metric for a table: 3 decimals for scores, 4 for thresholds, 2 for ms and MB, ints as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return cell(plain(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "n/a"
    if key.endswith("_ms") or key.endswith("_mb"):
        return f"{value:.2f}"
    if key in THRESHOLD_KEYS or key.endswith("threshold"):
        return f"{value:.4f}"
    if key in SIGNED_KEYS:
        return f"{value:+.3f}"
    if value != 0 and abs(value) < 0.001:
        return f"{value:.2e}"
    return f"{value:.3f}"


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def header(key: str) -> str:
    """A column title for a JSON key."""
    return HEADERS.get(key, key.replace("_", " "))


def markdown_table(titles: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a markdown table with `titles` as its header row."""
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def bullets(items: Iterable[str]) -> list[str]:
    """A markdown bullet list, one item a line."""
    return [f"- {item.strip()}" for item in items]


def is_number(value: Any) -> bool:
    """True for ints and floats (NaN included), False for bools."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def pivot(numbers: dict[str, Any], labels: Sequence[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Splits flat `<label>_<metric>` keys (tone's dev metrics) into one child per label."""
    own, by_label = dict(numbers), {}
    for label in sorted(labels, key=len, reverse=True):
        keys = [k for k in own if k.startswith(label + "_")]
        if len(keys) >= 2:
            by_label[label] = {k[len(label) + 1:]: own.pop(k) for k in keys}
    return own, by_label


def collect_rows(node: dict[str, Any], labels: Sequence[str] = (), prefix: tuple[str, ...] = (),
                 inherited: Optional[dict[str, int]] = None) -> tuple[list[tuple[str, dict]], list[str]]:
    """Rows (name, numbers) and notes (strings found on the way) of a metric subtree.

    Every object with a float in it is a row named by its path; its integer counts (examples,
    positives) carry down to the rows below it. An object of counts only, with rows below it,
    is not a row of its own. Objects and keys come out sorted.
    """
    inherited = inherited or {}
    numbers = {k: v for k, v in node.items() if is_number(v)}
    numbers, pivoted = pivot(numbers, labels)
    notes = [f"`{' / '.join(prefix + (k,))}`: {cell(plain(v))}" for k, v in sorted(node.items())
             if isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(x, str) for x in v))]
    counts = {**inherited, **{k: v for k, v in numbers.items() if isinstance(v, int)}}
    children = sorted([(k, v) for k, v in node.items() if isinstance(v, dict)] + list(pivoted.items()))
    rows: list[tuple[str, dict]] = []
    for key, child in children:
        child_rows, child_notes = collect_rows(child, labels, prefix + (key,), counts)
        rows += child_rows
        notes += child_notes
    has_float = any(isinstance(v, float) for v in numbers.values())
    if has_float or (numbers and not rows):
        rows.insert(0, (" / ".join(prefix) or "all", {**inherited, **numbers}))
    return rows, notes


def is_empty(row: dict[str, Any]) -> bool:
    """A row whose every score is NaN (the set had no example of that kind)."""
    scores = [v for k, v in row.items() if isinstance(v, float) and k not in THRESHOLD_KEYS]
    return bool(scores) and all(math.isnan(v) for v in scores)


def column_order(rows: list[tuple[str, dict]]) -> list[str]:
    """The columns of `rows`: COLUMN_ORDER first, then the other keys alphabetically."""
    keys = {k for _, row in rows for k in row}
    return [k for k in COLUMN_ORDER if k in keys] + sorted(keys - set(COLUMN_ORDER))


def render_rows(rows: list[tuple[str, dict]], first: str = "set") -> list[str]:
    """A markdown table; one row or a few wide ones are turned to read down the page."""
    columns = column_order(rows)
    if len(rows) == 1 or (len(rows) <= 3 and len(columns) > 6):
        body = [[header(c)] + [fmt(c, row[c]) if c in row else "" for _, row in rows] for c in columns]
        return markdown_table(["metric"] + [cell(name) for name, _ in rows], body)
    body = [[cell(name)] + [fmt(c, row[c]) if c in row else "" for c in columns] for name, row in rows]
    return markdown_table([first] + [header(c) for c in columns], body)
