"""The written answers with marked errors (Russian short answers, English long-form ones): each
shipped file reads clean, holds both splits, faithful answers and every kind of error, and a record
whose offsets do not hold its marked text is a clear error naming file, line and field."""

from __future__ import annotations

import json

import pytest

from autovalidators.data_prep.fact_spans.written_errors import (ERROR_KINDS, WRITTEN_SETS, as_span_records,
                                                                read_written_errors)
from autovalidators.inference.text import language_of, split_sentences
from autovalidators.data_prep.io import DataError


@pytest.mark.parametrize("name, language, sentences", [("written/ru", "ru", range(1, 7)),
                                                      ("written/en_longform", "en", range(4, 12))])
def test_each_shipped_file_holds_both_splits_faithful_answers_and_every_kind_of_error(name, language, sentences):
    path = WRITTEN_SETS[name]
    records = read_written_errors(path)
    assert len(records) >= 100 and len({r["id"] for r in records}) == len(records)
    assert all(language_of(r["answer"]) == language for r in records)
    assert all(len(split_sentences(r["answer"])) in sentences for r in records)  # short answers, long-form ones
    for split in ("dev", "test"):
        part = read_written_errors(path, split=split)
        assert {r["split"] for r in part} == {split}
        with_errors = [r for r in part if r["errors"]]
        assert 0.3 < len(with_errors) / len(part) < 0.7, split  # both classes, for example F1 and friction
        assert {e["kind"] for r in with_errors for e in r["errors"]} == set(ERROR_KINDS), split
    # The splits share no article: a choice made on dev is scored on passages it never saw.
    assert not ({r["title"] for r in read_written_errors(path, split="dev")}
                & {r["title"] for r in read_written_errors(path, split="test")})


def test_span_records_mark_the_error_characters_and_keep_the_question():
    records = read_written_errors(split="dev")
    rows = as_span_records(records)
    for record, row in zip(records, rows):
        assert row["question"] == record["question"] and row["answer"] == record["answer"]
        assert [row["answer"][s["start"]:s["end"]] for s in row["spans"]] == [e["text"] for e in record["errors"]]
        assert {s["label"] for s in row["spans"]} <= {"HALLUCINATION"}


GOOD = {"id": "a", "split": "dev", "question": "Когда?", "context": "Мост открыт в 1932 году.",
        "answer": "Мост открыли в 1935 году.", "errors": [{"text": "1935", "kind": "number", "start": 15, "end": 19}]}


def _with_second_line(tmp_path, record):
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (GOOD, record)) + "\n", encoding="utf-8")
    return path


def test_a_record_whose_offsets_miss_its_text_is_an_error_naming_file_line_and_field(tmp_path):
    assert read_written_errors(_with_second_line(tmp_path, {**GOOD, "id": "b"}))[1]["errors"][0]["text"] == "1935"
    error = GOOD["errors"][0]
    for record, field in (({**GOOD, "errors": [{**error, "start": 14, "end": 18}]}, r"errors\[0\]\.text"),
                          ({**GOOD, "errors": [{**error, "kind": "typo"}]}, r"errors\[0\]\.kind"),
                          ({**GOOD, "errors": [{**error, "end": 99}]}, r"errors\[0\]: start/end"),
                          ({**GOOD, "split": "train"}, "'split'"), ({**GOOD, "answer": ""}, "'answer'")):
        with pytest.raises(DataError, match=rf"answers\.jsonl:2: field {field}"):
            read_written_errors(_with_second_line(tmp_path, record))
