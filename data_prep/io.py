"""JSONL in and out, with errors that name the file and line."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any, Iterable, Iterator


class DataError(ValueError):
    """A data file that cannot be read as expected; the message names file, line and field."""


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """`(line number, record, problem)` per non-blank line of a JSONL file. A line that is not
    UTF-8, not JSON or not a JSON object comes with `record=None` and what is wrong, so a reader of
    user files can skip it, say so and go on."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if number == 1 and raw.startswith(codecs.BOM_UTF8):  # a byte-order mark is not data
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield number, None, f"invalid UTF-8 ({exc.reason} at byte {exc.start})"
            except json.JSONDecodeError as exc:
                yield number, None, f"malformed JSON ({exc.msg})"
            else:
                if isinstance(record, dict):
                    yield number, record, None
                else:
                    yield number, None, f"expected a JSON object, got {type(record).__name__}"


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yields each non-blank line of a JSONL file as a dict; raises DataError naming the first bad
    line (files the project writes itself, where a bad line means a broken build)."""
    path = Path(path)
    for number, record, problem in iter_jsonl(path):
        if problem is not None:
            raise DataError(f"{path}:{number}: {problem}")
        yield record


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    """Writes records (dicts or pydantic models) one per line; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            if hasattr(record, "model_dump"):
                record = record.model_dump(mode="json")
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
