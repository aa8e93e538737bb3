"""The one input record everywhere: a question, the retrieved context and the answer to check.

Also the JSONL reader that turns a file of cases into `Case` objects and per-line errors, so a
batch with one bad record still processes the rest and says which line and field was wrong.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# A 5 MB answer is almost certainly a logging accident, and tokenising it would stall a batch.
DEFAULT_MAX_TEXT_CHARS = 200_000


class Case(BaseModel):
    """One answer to validate.

    `context` may be one string or a list of passages; it is empty when nothing was retrieved.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    question: str
    context: list[str] = Field(default_factory=list)
    answer: str
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, value: Any) -> Any:
        # Integer ids are common in logs; they are still a stable key once turned into text.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("context", mode="before")
    @classmethod
    def _context_to_passages(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    @property
    def context_text(self) -> str:
        """All passages joined, the form that lexical scores and windowing work on."""
        return "\n\n".join(p for p in self.context if p.strip())

    @property
    def has_context(self) -> bool:
        return bool(self.context_text.strip())


@dataclass(frozen=True)
class CaseError:
    """Why one input record could not become a `Case`."""

    line: int
    field: str | None
    message: str
    id: str | None = None
    source: str | None = None

    def __str__(self) -> str:
        where = f"{self.source or 'input'}:{self.line}"
        field = f" field '{self.field}'" if self.field else ""
        return f"{where}{field}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "error": {
                "line": self.line,
                "field": self.field,
                "message": self.message,
                "source": self.source,
            },
        }


def parse_case(
    record: Any, *, line: int = 0, source: str | None = None, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
) -> Case | CaseError:
    """Turns one decoded JSON value into a `Case`, or a `CaseError` naming the first bad field."""
    if not isinstance(record, dict):
        return CaseError(line, None, f"expected a JSON object, got {type(record).__name__}", source=source)
    raw_id = record.get("id")
    case_id = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
    for field in ("question", "answer"):
        text = record.get(field)
        if isinstance(text, str) and len(text) > max_text_chars:
            return CaseError(
                line,
                field,
                f"{len(text):,} characters is over the limit of {max_text_chars:,}; split or trim it",
                id=case_id,
                source=source,
            )
    context = record.get("context")
    context_chars = len(context) if isinstance(context, str) else 0
    if isinstance(context, list):
        context_chars = sum(len(p) for p in context if isinstance(p, str))
    # Contexts are windowed by the models, so they may be longer than answers, but not unbounded.
    if context_chars > 10 * max_text_chars:
        return CaseError(
            line, "context", f"{context_chars:,} characters is over the limit of {10 * max_text_chars:,}",
            id=case_id, source=source,
        )
    try:
        return Case.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "missing":
            message = "is required"
        elif first["type"] == "extra_forbidden":
            message = "is not a case field (allowed: id, question, context, answer, meta)"
        return CaseError(line, field, message, id=case_id, source=source)


def decode_line(raw: bytes, line_number: int, source: str) -> Any:
    """One JSONL line (`raw`, its bytes) as its decoded JSON value, or a `CaseError` when it is not
    UTF-8 or not JSON. A byte-order mark opening the file (line 1) is skipped."""
    if line_number == 1 and raw.startswith(codecs.BOM_UTF8):  # Windows editors and exports write one
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CaseError(line_number, None, f"invalid UTF-8 at byte {exc.start} of the line (save the file as UTF-8)",
                         source=source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return CaseError(line_number, None, f"malformed JSON: {exc.msg} at column {exc.colno}", source=source)


def read_records(path: str | Path) -> Iterator[tuple[int, Any] | CaseError]:
    """`(line number, decoded JSON value)` for every non-blank line of a JSONL file, or a `CaseError`
    for a line that is not UTF-8 or not JSON. Lines are decoded one by one, so a bad line spoils
    only itself."""
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            if raw.strip():
                value = decode_line(raw, line_number, str(path))
                yield value if isinstance(value, CaseError) else (line_number, value)


def read_cases(
    path: str | Path, *, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
) -> Iterator[Case | CaseError]:
    """Yields a `Case` or a `CaseError` for every non-blank line of a JSONL file, in order."""
    for item in read_records(path):
        if isinstance(item, CaseError):
            yield item
        else:
            line_number, record = item
            yield parse_case(record, line=line_number, source=str(path), max_text_chars=max_text_chars)
