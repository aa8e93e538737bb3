"""Texts that decide which vocabulary pieces a trimmed base model keeps, and held-out text to check it.

A corpus source names files under the datasets folder and the fields that hold text: JSON keys
(found at any depth of a `.json` file or `.jsonl` line), CSV/TSV column names, or column numbers
for files without a header. Every field value is one document. A stable hash of the document puts
`heldout_fraction` of them aside: the vocabulary is chosen on the rest, and the segmentation check
runs on the held-out documents' sentences (plus `unseen` sources that never take part).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field

from autovalidators.inference.config import StrictModel

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


class CorpusSource(StrictModel):
    name: str
    language: Literal["en", "ru"]
    # Files under the datasets folder; glob patterns allowed (`summedits/data/summedits/*.json`).
    paths: list[str]
    # JSON keys / CSV column names holding text, or column numbers (0-based) for header-less files.
    fields: list[str | int]
    # Documents read per source at most (None = all), in file order: keeps huge sources in proportion.
    max_documents: int | None = Field(None, gt=0)


@dataclass
class Corpus:
    """Documents per language, split into the trimming part and the held-out part."""

    train: dict[str, list[str]] = field(default_factory=dict)
    heldout: dict[str, list[str]] = field(default_factory=dict)
    stats: dict[str, dict] = field(default_factory=dict)  # per source: files, documents, characters


def _strings(value, fields: set, inside: bool = False) -> Iterator[str]:
    """String values under any of `fields`, at any depth (lists of strings included)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, fields, key in fields)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, fields, inside)
    elif inside and isinstance(value, str):
        yield value


def read_documents(path: Path, fields: list[str | int]) -> Iterator[str]:
    """The text fields of one file (.json, .jsonl, .csv, .tsv, .txt = TSV)."""
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        names, text = set(fields), path.read_text(encoding="utf-8")
        try:
            values = [json.loads(text)] if suffix == ".json" else None
        except json.JSONDecodeError:  # some ".json" files hold one object per line
            values = None
        if values is None:
            values = (json.loads(line) for line in text.splitlines() if line.strip())
        for value in values:
            yield from _strings(value, names)
        return
    delimiter = "," if suffix == ".csv" else "\t"
    csv.field_size_limit(sys.maxsize)
    with open(path, encoding="utf-8", newline="") as handle:
        if all(isinstance(f, int) for f in fields):
            for row in csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL):
                yield from (row[i] for i in fields if i < len(row))
        else:
            reader = csv.DictReader(handle, delimiter=delimiter,
                                    quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
            for row in reader:
                yield from (row[f] for f in fields if isinstance(f, str) and row.get(f))


def _heldout(document: str, fraction: float, seed: int) -> bool:
    digest = hashlib.sha1(f"{seed}:{document}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def load_corpus(sources: list[CorpusSource], data_root: Path, heldout_fraction: float, seed: int) -> Corpus:
    """Reads every source once; identical documents are kept once (they would skew nothing else)."""
    corpus, seen = Corpus(), set()
    for source in sources:
        files = sorted({p for pattern in source.paths for p in data_root.glob(pattern) if p.is_file()})
        if not files:
            raise FileNotFoundError(f"corpus source {source.name!r}: no file matches {source.paths} under "
                                    f"{data_root}; set data_root or fix the paths")
        documents = chars = 0
        for path in files:
            for text in read_documents(path, source.fields):
                text = text.strip()
                if not text or text in seen:
                    continue
                if source.max_documents is not None and documents >= source.max_documents:
                    break
                seen.add(text)
                documents += 1
                chars += len(text)
                part = corpus.heldout if _heldout(text, heldout_fraction, seed) else corpus.train
                part.setdefault(source.language, []).append(text)
        corpus.stats[source.name] = {"language": source.language, "files": [str(p.relative_to(data_root)) for p in files],
                                     "documents": documents, "characters": chars}
    return corpus


def sentences(documents: list[str], min_chars: int = 2, max_chars: int = 1000) -> list[str]:
    """Documents cut at sentence ends and line breaks; pieces outside the length range dropped."""
    out = []
    for document in documents:
        out += [s.strip() for s in _SENTENCE_END.split(document) if min_chars <= len(s.strip()) <= max_chars]
    return out
