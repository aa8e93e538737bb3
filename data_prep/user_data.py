"""Bring your own data: any task's training data from your file or a Hugging Face dataset.

`autovalidators prepare <task> --data PATH_OR_HUB_NAME [--split NAME] [--columns theirs=ours,...]`
reads a local `.json`/`.jsonl`/`.csv`/`.parquet` file (format from the suffix) or a hub dataset
through `datasets.load_dataset`, renames columns by the mapping, checks every row, splits, and
writes what `train|export|benchmark <task>` read. Schemas (column: meaning; * = required):

- fact_spans: context*, answer*, question, and per row one of
  spans (list of {start, end, label}: character offsets into answer, label HALLUCINATION | FACT |
  NOISE; uncovered characters are FACT), sentence_labels (one label per answer sentence, with
  `sentences` or as `split_sentences` splits the answer) or label (the whole answer: 1/true/
  hallucinated or 0/false/faithful; weak token supervision).
- qa_relevance: question*, answer*, label* (1/true/relevant or 0/false/irrelevant).
- tone: text*, and 0/1 per label column of the tone task (toxicity, obscenity, insult, threat,
  identity_hate, politics; at least one column, a blank cell = not labelled, masked in training).
- abstention: answer*, question, label* (1/true/abstains = declines to answer, 0/false/answers).
- every task: id, group (rows sharing it stay in one split), split (train | dev | validation |
  test), language (en | ru; detected from the text when absent).

A row that breaks its schema is skipped and named (row number counted from 1 at the first data
row, field, why); a mapping naming an unknown column or field, or a required column missing, is
one `UserDataError`. Splits: the `split` column when present; else `--split NAME` puts every row
into that one split (and reads only that split of a hub dataset); else every row read (a hub
dataset's splits pooled) is split 80/10/10 by group, seeded (`splits.grouped_split`). Output folder: `dataset/` (a `datasets.DatasetDict`, Arrow,
`save_to_disk`), `<split>.jsonl` (what the trainers read; fact spans also `heldout/user.jsonl`,
the test split, for `benchmark fact-spans`), `bad_rows.jsonl`, a data card; the command adds
`config.yaml` (data_prep/user_data_cli.py): the task's train/export recipe pointed at this folder.
A page with one table and example per task: data_prep/USER_DATA.md.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from autovalidators.inference.text import language_of, split_sentences
from autovalidators.training.tasks.tone import TONE_LABELS

from .data_card import write_data_card
from .fact_spans.converters import text_key
from .fact_spans.schema import Origin, Provenance, SpanLabel, SpanRecord, TaskType, fill_spans
from .io import DataError, write_jsonl
from .qa_relevance import normalize
from .splits import SplitError, grouped_split
from .tone.records import text_group

logger = logging.getLogger(__name__)

FORMATS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}  # of groups, when the data brings no split
SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test"}
COMMON = {"id": "row id (default: <row number>)", "group": "split key: rows sharing it stay in one split",
          "split": "train, dev (or validation) or test", "language": "en or ru (default: detected)"}
SHOWN_BAD_ROWS = 50  # bad rows named in the data card; all of them are in bad_rows.jsonl


class UserDataError(DataError):
    """The data cannot be prepared at all (unreadable file, bad mapping, missing column)."""


class RowError(ValueError):
    """One row breaks its schema: `field` and why."""

    def __init__(self, field_name: str, reason: str):
        super().__init__(f"{field_name}: {reason}")
        self.field, self.reason = field_name, reason


@dataclass(frozen=True)
class BadRow:
    row: int  # 1 = the first data row of its source split
    field: str
    reason: str
    source_split: str = ""

    def __str__(self) -> str:
        where = f"row {self.row}" + (f" of split {self.source_split!r}" if self.source_split else "")
        return f"{where}: {self.field}: {self.reason}"


# ---- reading values -------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    # CSV readers give NaN for blank numeric cells and None or "" for blank text cells.
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip())


def _text(row: dict, name: str, required: bool = True) -> str:
    value = row.get(name)
    if _missing(value):
        if required:
            raise RowError(name, "missing or empty")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RowError(name, f"must be text, got {type(value).__name__}")
    return value if isinstance(value, str) else str(value)  # offsets index the text as given: no strip


def _binary(value: Any, name: str, words: dict[str, int]) -> int:
    """0/1 from 0/1, true/false, yes/no or the task's own words (e.g. relevant/irrelevant)."""
    if _missing(value):
        raise RowError(name, "missing or empty")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    known = {"0": 0, "1": 1, "false": 0, "true": 1, "no": 0, "yes": 1, **words}
    if isinstance(value, str) and value.strip().lower() in known:
        return known[value.strip().lower()]
    raise RowError(name, f"must be one of 0, 1, true, false{''.join(', ' + w for w in words)}; got {value!r}")


def _span_label(value: Any, name: str) -> SpanLabel:
    if isinstance(value, str) and value.strip().upper() in SpanLabel.__members__:
        return SpanLabel[value.strip().upper()]
    try:  # 1 / true = hallucinated, 0 / false = supported
        return SpanLabel.HALLUCINATION if _binary(value, name, {}) else SpanLabel.FACT
    except RowError:
        raise RowError(name, f"must be HALLUCINATION, FACT, NOISE, 1 or 0; got {value!r}") from None


def _list(value: Any, name: str) -> list:
    if isinstance(value, str):  # a CSV cell holds the list as JSON
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(name, f"not a JSON list ({exc.msg})") from None
    if not isinstance(value, list):
        raise RowError(name, f"must be a list, got {type(value).__name__}")
    return value


def _language(row: dict, text: str) -> str:
    if _missing(row.get("language")):
        return language_of(text)
    language = str(row["language"]).strip().lower()
    if language not in ("en", "ru"):
        raise RowError("language", f"must be en or ru, got {row['language']!r}")
    return language


def _common(row: dict, where: str, text: str, group: str) -> dict[str, Any]:
    """id (default `where`: the row number), group, language and split (None = not given) of a row."""
    split = None
    if not _missing(row.get("split")):
        split = SPLIT_NAMES.get(str(row["split"]).strip().lower())
        if split is None:
            raise RowError("split", f"must be train, dev, validation or test, got {row['split']!r}")
    return {"id": _text(row, "id", required=False) or where,
            "group": _text(row, "group", required=False) or group, "language": _language(row, text), "split": split}


# ---- one converter per task: a row (our field names) -> the record that task's trainer reads -----

def _qa_relevance(row: dict, where: str, source: str) -> dict:
    question, answer = _text(row, "question"), _text(row, "answer")
    label = _binary(row.get("label"), "label", {"relevant": 1, "irrelevant": 0})
    return {**_common(row, where, question, normalize(question)), "question": question, "answer": answer,
            "label": label, "source": "user", "qid": ""}


def _tone(row: dict, where: str, source: str) -> dict:
    text = _text(row, "text")
    labels = {name: None if _missing(row.get(name)) else _binary(row[name], name, {}) for name in TONE_LABELS}
    if all(value is None for value in labels.values()):
        raise RowError("labels", f"no label given: every one of {', '.join(TONE_LABELS)} is blank")
    provenance = {name: None if value is None else {"labeller": "gold", "source": source, "row": where,
                                                    "detail": "your data"} for name, value in labels.items()}
    return {**_common(row, where, text, text_group(text)), "text": text, "source": "user", "row": where,
            "labels": labels, "provenance": provenance}


def _abstention(row: dict, where: str, source: str) -> dict:
    answer = _text(row, "answer")
    label = _binary(row.get("label"), "label", {"abstains": 1, "answers": 0})
    common = _common(row, where, answer, text_key(answer))
    return {**common, "text": answer, "question": _text(row, "question", required=False), "label": label,
            "kind": "user_refusal" if label else "user_answer", "family": common["group"], "source": "user"}


Labelled = list[tuple[int, int, SpanLabel, str]]  # (start, end, label, kind) over the answer


def _given_spans(row: dict, answer: str) -> Labelled:
    labelled = []
    for i, span in enumerate(_list(row["spans"], "spans")):
        start, end = (span.get("start"), span.get("end")) if isinstance(span, dict) else (None, None)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
            raise RowError(f"spans[{i}]", f"must be {{start, end, label}} with integer offsets, got {span!r}")
        if not 0 <= start < end <= len(answer):
            raise RowError(f"spans[{i}]", f"[{start}, {end}) is not inside the answer ({len(answer)} chars)")
        labelled.append((start, end, _span_label(span.get("label"), f"spans[{i}].label"), "user"))
    return labelled


def _sentence_spans(row: dict, answer: str) -> Labelled:
    """One span per sentence: the `sentences` given (found in order), else the answer split here."""
    labels = [_span_label(v, f"sentence_labels[{i}]") for i, v in enumerate(_list(row["sentence_labels"],
                                                                                 "sentence_labels"))]
    if _missing(row.get("sentences")):
        bounds = [(s.start, s.end) for s in split_sentences(answer)]
    else:
        bounds, cursor = [], 0
        for i, sentence in enumerate(map(str, _list(row["sentences"], "sentences"))):
            start = answer.find(sentence, cursor)
            if start < 0 or not sentence.strip():
                raise RowError(f"sentences[{i}]", "is not in the answer (after the sentence before it)")
            bounds.append((start, start + len(sentence)))
            cursor = start + len(sentence)
    if len(bounds) != len(labels):
        raise RowError("sentence_labels", f"{len(labels)} labels for {len(bounds)} sentences; give a "
                                          "`sentences` column when the answer splits differently")
    return [(start, end, label, "") for (start, end), label in zip(bounds, labels)]


def _fact_spans(row: dict, where: str, source: str) -> dict:
    context, answer = _text(row, "context"), _text(row, "answer")
    if not _missing(row.get("spans")):
        how, labelled = "spans", _given_spans(row, answer)
    elif not _missing(row.get("sentence_labels")):
        how, labelled = "sentence_labels", _sentence_spans(row, answer)
    elif not _missing(row.get("label")):
        # Weak supervision: the whole answer takes its label, token by token.
        hallucinated = _binary(row["label"], "label", {"hallucinated": 1, "hallucination": 1, "faithful": 0})
        how, labelled = "label", [(0, len(answer), SpanLabel.HALLUCINATION if hallucinated else SpanLabel.FACT,
                                   "answer_label")]
    else:
        raise RowError("spans", "no labels: give spans, sentence_labels or label")
    common = _common(row, where, answer, text_key(context))
    try:
        record = SpanRecord(
            id=common["id"], context=context, question=_text(row, "question", required=False), answer=answer,
            spans=fill_spans(answer, labelled, default=SpanLabel.FACT), source="user", group=common["group"],
            language=common["language"], task_type=TaskType.QA, origin=Origin.HUMAN,
            provenance=Provenance(dataset="user", file=source, row=where, licence="yours"),
            meta={"labelled_by": how})
    except ValidationError as exc:
        raise RowError("spans", exc.errors()[0]["msg"]) from None
    return {**record.model_dump(mode="json"), "split": common["split"]}


@dataclass(frozen=True)
class Schema:
    """A task's columns (field -> meaning), which are required, and how a row becomes a record."""

    fields: dict[str, str]
    required: tuple[str, ...]
    convert: Callable[[dict, str, str], dict]  # (row, row id, data name) -> record
    data_key: str  # the task config's `prepare` key naming the data folder (benchmarks read it)
    one_of: tuple[str, ...] = ()  # at least one of these columns must exist
    breakdowns: dict[str, Callable[[dict], Any]] = field(default_factory=dict)  # counted in the data card


SCHEMAS: dict[str, Schema] = {
    "fact_spans": Schema(
        {"context": "the reference text the answer must stick to", "answer": "the answer to label",
         "question": "the question asked (optional)", "spans": "list of {start, end, label}: answer offsets",
         "sentence_labels": "one label per answer sentence", "sentences": "the sentences sentence_labels label",
         "label": "the whole answer: 1 hallucinated, 0 faithful", **COMMON},
        ("context", "answer"), _fact_spans, "out_dir", one_of=("spans", "sentence_labels", "label"),
        breakdowns={"hallucinated": lambda r: any(s["label"] == "HALLUCINATION" for s in r["spans"]),
                    "labelled_by": lambda r: r["meta"]["labelled_by"], "language": lambda r: r["language"]}),
    "qa_relevance": Schema(
        {"question": "the question", "answer": "the reply", "label": "1 relevant, 0 irrelevant", **COMMON},
        ("question", "answer", "label"), _qa_relevance, "output_dir",
        breakdowns={"label": lambda r: r["label"], "language": lambda r: r["language"]}),
    "tone": Schema(
        {"text": "the text", **{name: f"1 {name}, 0 not, blank = not labelled" for name in TONE_LABELS}, **COMMON},
        ("text",), _tone, "output_dir", one_of=TONE_LABELS,
        breakdowns={**{name: (lambda r, name=name: r["labels"][name]) for name in TONE_LABELS},
                    "language": lambda r: r["language"]}),
    "abstention": Schema(
        {"answer": "the answer", "question": "the question (optional, not read by the model)",
         "label": "1 declines to answer, 0 answers", **COMMON},
        ("answer", "label"), _abstention, "out_dir",
        breakdowns={"label": lambda r: r["label"], "language": lambda r: r["language"]}),
}
USER_DATA_TASKS = tuple(SCHEMAS)


# ---- reading the data ---------------------------------------------------------------------------

def parse_columns(text: str | None) -> dict[str, str]:
    """`"their=ours,..."` -> {their: ours}; a malformed pair is a UserDataError."""
    mapping: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in (text or "").split(","))):
        theirs, sep, ours = (part.strip() for part in pair.partition("="))
        if not sep or not theirs or not ours:
            raise UserDataError(f"--columns: {pair!r} is not THEIRS=OURS (e.g. user_msg=question)")
        mapping[theirs] = ours
    return mapping


def load_user_dataset(data: str, split: str | None = None) -> dict[str, Any]:
    """{source split: datasets.Dataset} from a local file (format from its suffix) or a hub dataset."""
    import datasets

    path = Path(data)
    try:
        if path.is_file():
            if path.suffix.lower() not in FORMATS:
                raise UserDataError(f"{data}: unknown format {path.suffix!r}; use one of {', '.join(FORMATS)}")
            # A throwaway cache: a local file is read into memory, never copied into ~/.cache.
            with tempfile.TemporaryDirectory() as cache:
                loaded = datasets.load_dataset(FORMATS[path.suffix.lower()], data_files=str(path), split="train",
                                               cache_dir=cache, keep_in_memory=True)
            return {"": loaded}
        if path.suffix.lower() in FORMATS or path.exists():
            raise UserDataError(f"{data}: no such file (formats: {', '.join(FORMATS)}; or a hub dataset name)")
        loaded = datasets.load_dataset(data, split=split)
        return {"": loaded} if split else dict(loaded)
    except UserDataError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow, pandas, hub and network errors: one clear message
        cause = exc.__cause__ or exc
        raise UserDataError(f"{data}: could not be read ({type(cause).__name__}: {cause})") from None


def resolve_columns(task: str, columns: list[str], mapping: dict[str, str]) -> dict[str, str]:
    """{our field: their column}: mapped columns first, then columns already named like a field."""
    schema = SCHEMAS[task]
    unknown_columns = [c for c in mapping if c not in columns]
    if unknown_columns:
        raise UserDataError(f"--columns: column {unknown_columns[0]!r} is not in the data (columns: "
                            f"{', '.join(columns)})")
    unknown_fields = [f for f in mapping.values() if f not in schema.fields]
    if unknown_fields:
        raise UserDataError(f"--columns: {unknown_fields[0]!r} is not a {task} field (fields: "
                            f"{', '.join(schema.fields)})")
    resolved = {ours: theirs for theirs, ours in mapping.items()}
    resolved.update({c: c for c in columns if c in schema.fields and c not in resolved and c not in mapping})
    for name in schema.required:
        if name not in resolved:
            raise UserDataError(f"required column {name!r} is missing (columns: {', '.join(columns)}); "
                                f"map one with --columns THEIRS={name}")
    if schema.one_of and not any(name in resolved for name in schema.one_of):
        raise UserDataError(f"{task} needs at least one of the columns {', '.join(schema.one_of)} (columns: "
                            f"{', '.join(columns)}); map one with --columns")
    return resolved


# ---- preparing ----------------------------------------------------------------------------------

@dataclass
class UserDataReport:
    out: Path
    splits: dict[str, list[dict]]
    bad_rows: list[BadRow]
    card: dict[str, Any]


def convert_rows(task: str, sources: dict[str, Any], columns: dict[str, str], name: str
                 ) -> tuple[list[dict], list[BadRow]]:
    """Every row checked and converted; a bad row is reported, the rest kept."""
    records, bad = [], []
    for source_split, dataset in sources.items():
        for index, raw in enumerate(dataset):
            row = {ours: raw.get(theirs) for ours, theirs in columns.items()}
            where = f"{source_split}:{index + 1}" if source_split else str(index + 1)  # the default id
            try:
                record = SCHEMAS[task].convert(row, where, name)
                if "split" in columns and record["split"] is None:
                    raise RowError("split", "missing or empty (the data has a split column)")
            except RowError as exc:
                bad.append(BadRow(index + 1, exc.field, exc.reason, source_split))
            else:
                records.append(record)
    return records, bad


def assign_splits(records: list[dict], split: str | None, seed: int) -> dict[str, list[dict]]:
    """The rows' own `split` values, else all into `split`, else a grouped FRACTIONS split."""
    if all(r["split"] for r in records):  # the data has a split column (convert_rows checked every row)
        named = {name: [r for r in records if r["split"] == name] for name in FRACTIONS}
        return {name: rows for name, rows in named.items() if rows}
    if split:
        target = SPLIT_NAMES.get(split.split("[")[0].strip().lower())
        if target is None:
            raise UserDataError(f"--split {split!r}: use train, dev (validation) or test")
        return {target: [{**r, "split": target} for r in records]}
    try:
        parts = grouped_split(records, lambda r: r["group"], FRACTIONS, seed=seed)
    except SplitError as exc:
        raise UserDataError(f"{exc}; or give a split column, or --split NAME for one split") from None
    return {name: [{**r, "split": name} for r in rows] for name, rows in parts.items()}


def write_outputs(task: str, out: Path, splits: dict[str, list[dict]]) -> None:
    """`<split>.jsonl` for the trainers and `dataset/` (DatasetDict on disk) with one set of features."""
    from datasets import Dataset, DatasetDict

    out.mkdir(parents=True, exist_ok=True)
    for stale in [out / f"{name}.jsonl" for name in FRACTIONS] + [out / "heldout" / "user.jsonl"]:
        stale.unlink(missing_ok=True)  # a split left over from an earlier run must not be trained on
    shutil.rmtree(out / "dataset", ignore_errors=True)
    for name, rows in splits.items():
        write_jsonl(out / f"{name}.jsonl", rows)
    if task == "fact_spans" and "test" in splits:  # the fact-span benchmark scores heldout/*.jsonl
        write_jsonl(out / "heldout" / "user.jsonl", splits["test"])
    features = Dataset.from_list([r for rows in splits.values() for r in rows]).features
    DatasetDict({name: Dataset.from_list(rows, features=features) for name, rows in splits.items()}
                ).save_to_disk(str(out / "dataset"))


def prepare_user_data(task: str, data: str, out: str | Path, *, split: str | None = None,
                      columns: str | dict[str, str] | None = None, seed: int = 13) -> UserDataReport:
    """Reads, checks, splits and writes `data` for `task` (see the module docstring).

    Args:
        task: one of USER_DATA_TASKS.
        data: a local .json/.jsonl/.csv/.parquet file or a Hugging Face hub dataset name.
        out: the output folder.
        split: put every row into this split (and read only this split of a hub dataset).
        columns: "their=ours,..." or {their: ours}.
        seed: the grouped split's seed.

    Raises:
        UserDataError: the data cannot be read, the mapping is wrong, a required column is
            missing, or no row is usable.
    """
    if task not in SCHEMAS:
        raise UserDataError(f"bring-your-own data is not supported for {task!r}; tasks: {', '.join(SCHEMAS)}")
    out = Path(out)
    mapping = parse_columns(columns) if not isinstance(columns, dict) else dict(columns)
    sources = load_user_dataset(data, split)
    names = list(dict.fromkeys(c for dataset in sources.values() for c in dataset.column_names))
    resolved = resolve_columns(task, names, mapping)
    records, bad = convert_rows(task, sources, resolved, data)
    logger.info("%s: %d rows kept, %d bad", data, len(records), len(bad))
    if not records:
        raise UserDataError(f"{data}: no usable row ({len(bad)} bad); first: " + "; ".join(map(str, bad[:3])))
    splits = assign_splits(records, split, seed)
    write_outputs(task, out, splits)
    write_jsonl(out / "bad_rows.jsonl", [asdict(b) for b in bad])
    unused = [c for c in names if c not in resolved.values()]
    notes = [f"skipped {b}" for b in bad[:SHOWN_BAD_ROWS]]
    if len(bad) > SHOWN_BAD_ROWS:
        notes.append(f"... and {len(bad) - SHOWN_BAD_ROWS} more bad rows: all are in bad_rows.jsonl")
    if unused:
        notes.append(f"columns not used: {', '.join(unused)}")
    absent = [name for name in FRACTIONS if name not in splits]
    if absent:
        notes.append(f"no {' or '.join(absent)} split: `train` needs train and dev, `benchmark` reads test")
    card = write_data_card(
        out, task=task, splits=splits, breakdowns=SCHEMAS[task].breakdowns,
        sources={"user": f"{data}" + (f" (split {split})" if split else "")},
        config={"data": data, "split": split, "columns": mapping, "resolved_columns": resolved, "seed": seed,
                "fractions": FRACTIONS, "rows_read": len(records) + len(bad), "rows_kept": len(records),
                "rows_bad": len(bad)},
        notes=notes)
    return UserDataReport(out, splits, bad, card)
