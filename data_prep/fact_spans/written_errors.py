"""RAG answers with marked errors, written the way LLMs answer, not constructed by swaps.

Why: the only Russian spans this repository had were constructed (`prepare gate-sets`' swaps put
another question's answer inside a copied sentence), and issue 24 measures Russian error spans on
natural answers, where an error is a wrong number inside a paraphrase, a wrong adjective, or a
plausible sentence the passage never states. `data_prep/samples/fact_spans/written_errors_ru.jsonl`
holds such answers over TyDi QA Russian passages (Apache-2.0): writers who read no file of this
repository answered each question from its passage, faithfully or with one to three errors of a
named kind, and marked each error's characters. Its `split` follows the gate sets' article split of
TyDi-ru (`squad_paragraphs_by_split`), so the dev side is where a choice is made and the test side
is scored once per candidate (`benchmark heuristic-spans`).

`data_prep/samples/fact_spans/written_longform_en.jsonl` is the English counterpart for long-form
answers: five to nine sentences over two to four passages of a TyDi QA English article, to an open
question the writer asked (issue 25 measures how many faithful long-form answers the gate accepts).
`WRITTEN_SETS` names each file's set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autovalidators.data_prep.io import DataError, iter_jsonl

WRITTEN_ERRORS_RU = Path(__file__).resolve().parents[1] / "samples" / "fact_spans" / "written_errors_ru.jsonl"
WRITTEN_LONGFORM_EN = WRITTEN_ERRORS_RU.with_name("written_longform_en.jsonl")
# set name (`benchmark heuristic-spans`; `prepare gate-sets` writes `<name with _>_<split>.jsonl`) -> file
WRITTEN_SETS: dict[str, Path] = {"written/ru": WRITTEN_ERRORS_RU, "written/en_longform": WRITTEN_LONGFORM_EN}
ERROR_KINDS = ("number", "entity", "attribute", "addition", "negation")
SPLITS = ("dev", "test")
_TEXT_FIELDS = ("id", "question", "context", "answer")


def _checked(record: dict[str, Any], where: str) -> dict[str, Any]:
    for field in _TEXT_FIELDS:
        if not isinstance(record.get(field), str) or not record[field].strip():
            raise DataError(f"{where}: field {field!r}: expected a non-empty string")
    if record.get("split") not in SPLITS:
        raise DataError(f"{where}: field 'split': expected one of {', '.join(SPLITS)}, got {record.get('split')!r}")
    errors = record.get("errors")
    if not isinstance(errors, list):
        raise DataError(f"{where}: field 'errors': expected a list (empty for a faithful answer)")
    answer = record["answer"]
    for number, error in enumerate(errors):
        field = f"errors[{number}]"
        if not isinstance(error, dict) or error.get("kind") not in ERROR_KINDS:
            raise DataError(f"{where}: field {field}.kind: expected one of {', '.join(ERROR_KINDS)}")
        start, end = error.get("start"), error.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(answer)):
            raise DataError(f"{where}: field {field}: start/end must be offsets inside the answer")
        if answer[start:end] != error.get("text"):
            raise DataError(f"{where}: field {field}.text: {error.get('text')!r} is not answer[{start}:{end}] "
                            f"({answer[start:end]!r})")
    return record


def read_written_errors(path: Path = WRITTEN_ERRORS_RU, split: str | None = None) -> list[dict[str, Any]]:
    """The answers of `path` (of one split when given), each checked: a record whose error offsets
    do not hold its marked text is a DataError naming file, line and field (this file is part of
    the repository; a bad line is a broken build, not a user's record to skip)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split {split!r}: choose one of {', '.join(SPLITS)}")
    records = []
    for line, record, problem in iter_jsonl(path):
        where = f"{path}:{line}"
        if problem is not None:
            raise DataError(f"{where}: {problem}")
        record = _checked(record, where)
        if split is None or record["split"] == split:
            records.append(record)
    return records


def as_span_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answers as span records, the form of the held-out RAGTruth rows (`span_scoring.score_group`:
    question, context, answer and HALLUCINATION spans over the marked characters)."""
    return [{"id": r["id"], "question": r["question"], "context": r["context"], "answer": r["answer"],
             "spans": [{"start": e["start"], "end": e["end"], "label": "HALLUCINATION"} for e in r["errors"]],
             "source": r.get("source", "written")} for r in records]
