"""Reading benchmark JSON by shape: walk every nested value with its path, name groups by path."""

from __future__ import annotations

import math
from typing import Any, Iterator

LANGUAGES = {"en", "ru"}
BREAKDOWNS = {"by_language": "language", "per_language": "language", "languages": "language",
              "by_source": "source", "per_source": "source", "sources": "source",
              "labels": "label", "by_label": "label", "per_label": "label"}
# Path segments that only group things and would clutter a row name.
GENERIC = {"quality", "metrics", "results", "predictions", *BREAKDOWNS}


def number(value: Any) -> float | None:
    """A finite float, or None (NaN, inf, strings and missing values are not numbers to show)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) for `value` and everything nested in it, depth first, in file order."""
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from walk(child, path + (str(key),))
    elif isinstance(value, list) and not (path and path[-1] == "predictions"):
        for index, child in enumerate(value):
            yield from walk(child, path + (str(index),))


def group_name(path: tuple[str, ...]) -> str:
    return " / ".join(p for p in path if p not in GENERIC) or "overall"
