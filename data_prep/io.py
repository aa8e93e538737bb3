"""JSONL in and out, with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator


class DataError(ValueError):
    """A data file that cannot be read as expected; the message names file, line and field."""


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yields each non-blank line of a JSONL file as a dict; raises DataError naming the line."""
    path = Path(path)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: malformed JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
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
