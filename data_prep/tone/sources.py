"""Gold labeller: reads the labelled source files and maps their columns onto the label scheme.

The mapping lives in `configs/tone.yaml` (one list of rules per label and source), so changing
"what does OLID's UNT mean for `insult`" is a config edit reviewed like any other. A label a source
has no rule for stays missing (None): silence is not a negative.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import sys
from pathlib import Path
from typing import Iterable, Iterator

from ..io import DataError, iter_jsonl
from .config import Rule, SourceSpec, ToneConfig
from .records import ToneRecord, add_votes, new_record

logger = logging.getLogger(__name__)

# Russian comment files hold very long fields; the csv default (128 KiB) is not enough for some.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def apply_rules(rules: list[Rule], row: dict[str, str], where: str) -> tuple[int | None, str]:
    """1 if any rule says positive, else 0 if any says negative, else None; plus which rule said it."""
    verdicts: list[tuple[int, str]] = []
    for rule in rules:
        value = (row.get(rule.column) or "").strip()
        if not value:
            continue
        if rule.threshold is not None:
            try:
                number = float(value)
            except ValueError:
                raise DataError(f"{where}: column {rule.column!r} = {value!r} is not a number") from None
            verdicts.append((int(number >= rule.threshold), f"{rule.column}={value} (>= {rule.threshold:g} is 1)"))
        elif value in rule.positive:
            verdicts.append((1, f"{rule.column}={value}"))
        elif value in rule.negative:
            verdicts.append((0, f"{rule.column}={value}"))
    if not verdicts:
        return None, ""
    positive = [v for v in verdicts if v[0] == 1]
    return positive[0] if positive else verdicts[0]


def _keep(row_key: str, spec: SourceSpec, total: int) -> bool:
    """Deterministic ~max_rows sample, independent of file order."""
    if spec.max_rows is None or total <= spec.max_rows:
        return True
    digest = hashlib.sha256(row_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < spec.max_rows / total


def _check_columns(path: Path, spec: SourceSpec, present: Iterable[str]) -> None:
    wanted = ([spec.text_column, spec.id_column, *spec.paired_columns, *spec.keep_rows_at_most]
              + [r.column for rules in spec.labels.values() for r in rules])
    present = list(present)
    missing = sorted({c for c in wanted if c and c not in present})
    if missing:
        raise DataError(f"{path}: no column(s) {missing} (columns: {', '.join(present)})")


def _jsonl_rows(path: Path, spec: SourceSpec) -> Iterator[tuple[int, dict[str, str]]]:
    """JSONL rows with every value as text (as a csv cell would be); the first row's keys are the columns."""
    checked = False
    for number, record, problem in iter_jsonl(path):
        if problem is not None:
            raise DataError(f"{path}:{number}: {problem}")
        if not checked:
            _check_columns(path, spec, record)
            checked = True
        yield number, {key: "" if value is None else str(value) for key, value in record.items()}


def _squad_sentence_rows(path: Path, spec: SourceSpec) -> Iterator[tuple[int, dict[str, str]]]:
    """Encyclopaedic sentences from the dev side of the gate sets' split: the held-out side is where
    `benchmark gate --tone-texts` measures neutral flags, so training here never sees those articles."""
    from ..gate_sets import side_sentences, squad_paragraphs_by_split  # the split lives with the gate sets

    _check_columns(path, spec, ["text", "id"])
    dev_side = squad_paragraphs_by_split(path, path.stem, spec.language)["dev"]
    for number, text in enumerate(side_sentences(dev_side), start=1):
        yield number, {"text": text, "id": str(number)}


def _rows(path: Path, spec: SourceSpec) -> Iterator[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise DataError(f"{path}: no such file (set data_root in the config or pass --data-root)")
    if spec.format == "jsonl":
        yield from _jsonl_rows(path, spec)
        return
    if spec.format == "squad_sentences":
        yield from _squad_sentence_rows(path, spec)
        return
    delimiter = "\t" if spec.format == "tsv" else ","
    quoted = spec.quoted if spec.quoted is not None else spec.format == "csv"
    quoting = csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, fieldnames=spec.columns, delimiter=delimiter, quoting=quoting)
        if reader.fieldnames is None:
            raise DataError(f"{path}: empty file")
        _check_columns(path, spec, reader.fieldnames)
        line = reader.line_num
        for row in reader:
            yield line + 1, row  # the line the record starts on
            line = reader.line_num


def _paired_records(row: dict[str, str], row_id: str, spec: SourceSpec, name: str,
                    config: ToneConfig) -> list[ToneRecord]:
    """The row's rewrites (spec.paired_columns), each a record with spec.paired_labels as gold."""
    records = []
    for column in spec.paired_columns:
        rewrite = (row.get(column) or "").strip()
        if not rewrite:  # ParaDetox gives 1 to 3 rewrites: an empty column is no rewrite, not an error
            continue
        record = new_record(rewrite, language=spec.language, source=name, row=f"{row_id}:{column}",
                            labels=config.labels)
        add_votes(record, "gold", dict(spec.paired_labels),
                  {label: f"{column}: a rewrite of {row_id}" for label in spec.paired_labels})
        records.append(record)
    return records


def read_source(name: str, config: ToneConfig,
                data_root: str | Path | None = None) -> tuple[list[ToneRecord], list[str]]:
    """All rows of one source as records carrying gold votes, and the errors of rows skipped.

    A missing file or column stops the run (DataError); a bad cell skips only its row, and the
    error names file:line so the rest of the source is still used.
    """
    spec = config.sources[name]
    records: list[ToneRecord] = []
    errors: list[str] = []
    for path in config.source_paths(name, data_root):
        rows = []
        for line, row in _rows(path, spec):
            try:
                if spec.keeps_row(row, f"{path}:{line}"):
                    rows.append((line, row))
            except DataError as exc:
                errors.append(f"{exc}; row skipped")
        for line, row in rows:
            where = f"{path}:{line}"
            text = (row.get(spec.text_column) or "").strip()
            if not text:
                errors.append(f"{where}: empty {spec.text_column}; row skipped")
                continue
            row_id = f"{path.name}:{row[spec.id_column]}" if spec.id_column else f"{path.name}:{line}"
            if not _keep(f"{name}:{row_id}", spec, len(rows)):
                continue
            record = new_record(text, language=spec.language, source=name, row=row_id, labels=config.labels)
            votes = dict(spec.fixed_labels)
            details = {label: f"every {name} text is {value}" for label, value in spec.fixed_labels.items()}
            try:
                for label, rules in spec.labels.items():
                    verdict, detail = apply_rules(rules, row, where)
                    if verdict is not None:
                        votes[label], details[label] = verdict, detail
            except DataError as exc:
                errors.append(f"{exc}; row skipped")
                continue
            add_votes(record, "gold", votes, details)
            records.append(record)
            records.extend(_paired_records(row, row_id, spec, name, config))
    for error in errors[:20]:
        logger.warning("%s", error)
    if len(errors) > 20:
        logger.warning("source %s: %d more bad rows (all listed in labelling_report.json)", name, len(errors) - 20)
    logger.info("source %s: %d rows, %d skipped", name, len(records), len(errors))
    return records, errors
