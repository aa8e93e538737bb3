"""The one tone record format, and the rule that merges labellers' votes into its labels.

A label is 1, 0 or None. None means *nobody said*: a source that never annotated threats leaves
`threat` missing, and training masks it out of the loss rather than learning "not a threat".
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from ..io import DataError, read_jsonl

LabelValue = int | None


class Provenance(BaseModel):
    """Who decided a label: the labeller, and for gold the source file and row."""

    model_config = ConfigDict(extra="forbid")

    labeller: str
    source: str
    row: str
    detail: str = ""  # e.g. the matched word, the column rule, the prompt version


class ToneRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    language: str
    source: str
    row: str  # id column value or file:line in the source
    group: str  # split key: identical texts share it, so no text lands in two splits
    split: str | None = None
    labels: dict[str, LabelValue]
    provenance: dict[str, Provenance | None]
    # labeller -> label -> value, as each labeller said it before merging (kept for the assessor
    # check, which compares one labeller's votes with people).
    votes: dict[str, dict[str, LabelValue]] = {}
    vote_details: dict[str, dict[str, str]] = {}
    duplicates: list[str] = []


def text_group(text: str) -> str:
    """A key shared by texts that differ only in case, spacing, @mentions and URLs."""
    normal = re.sub(r"https?://\S+|@\w+", " ", text.lower())
    normal = " ".join(re.findall(r"\w+", normal))
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:16]


def new_record(text: str, *, language: str, source: str, row: str, labels: Iterable[str]) -> ToneRecord:
    names = list(labels)
    return ToneRecord(
        id=f"{source}:{row}", text=text, language=language, source=source, row=row, group=text_group(text),
        labels={n: None for n in names}, provenance={n: None for n in names},
    )


def add_votes(record: ToneRecord, labeller: str, votes: dict[str, LabelValue],
              details: dict[str, str] | None = None) -> None:
    """Records a labeller's votes; a None vote is not stored (the labeller said nothing)."""
    said = {label: value for label, value in votes.items() if value is not None}
    if not said:
        return
    record.votes.setdefault(labeller, {}).update(said)
    if details:
        record.vote_details.setdefault(labeller, {}).update(
            {label: d for label, d in details.items() if label in said})


def merge(record: ToneRecord, priority: list[str]) -> Counter:
    """Sets labels/provenance from the votes; the first labeller in `priority` with a value wins.

    Returns a Counter of disagreements, keyed "label: winner=value vs other=value", for the
    labelling report (how often, e.g., the lexicon contradicts gold).
    """
    disagreements: Counter = Counter()
    for label in record.labels:
        decided: tuple[str, int] | None = None
        for labeller in priority:
            value = record.votes.get(labeller, {}).get(label)
            if value is None:
                continue
            if decided is None:
                decided = (labeller, value)
            elif value != decided[1]:
                disagreements[f"{label}: {decided[0]}={decided[1]} vs {labeller}={value}"] += 1
        if decided is None:
            record.labels[label], record.provenance[label] = None, None
        else:
            labeller, value = decided
            record.labels[label] = value
            detail = record.vote_details.get(labeller, {}).get(label, "")
            source = record.source if labeller == "gold" else labeller
            record.provenance[label] = Provenance(labeller=labeller, source=source, row=record.row, detail=detail)
    return disagreements


def read_records(path: str | Path) -> Iterator[ToneRecord]:
    """Reads tone JSONL; a malformed line raises DataError naming file and line."""
    for number, raw in enumerate(read_jsonl(path), start=1):
        try:
            yield ToneRecord.model_validate(raw)
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise DataError(f"{path}: record {number} (id {raw.get('id', '?')}): {problem}") from None
