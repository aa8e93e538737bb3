"""data_prep.io: the tolerant line reader that user-file readers share, and the strict one built on it."""

from __future__ import annotations

import pytest

from autovalidators.data_prep.io import DataError, iter_jsonl, read_jsonl, write_jsonl


def test_iter_jsonl_names_each_bad_line_and_keeps_reading(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{broken\n"text"\n{"b": "\xff"}\n{"c": "\xd0\xbf\xd1\x80\xd0\xb8"}\n')
    rows = list(iter_jsonl(path))
    assert [(n, r) for n, r, problem in rows if problem is None] == [(1, {"a": 1}), (6, {"c": "при"})]
    problems = {n: problem for n, _, problem in rows if problem is not None}
    assert set(problems) == {3, 4, 5}  # the blank line 2 is neither a record nor a problem
    assert problems[3].startswith("malformed JSON") and "got str" in problems[4] and "invalid UTF-8" in problems[5]


def test_iter_jsonl_skips_a_byte_order_mark_opening_the_file(tmp_path):
    path = tmp_path / "exported.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n{"b": 2}\r\n')
    assert [(n, r, problem) for n, r, problem in iter_jsonl(path)] == [(1, {"a": 1}, None), (2, {"b": 2}, None)]


def test_read_jsonl_round_trips_and_raises_on_the_first_bad_line(tmp_path):
    path = tmp_path / "out.jsonl"
    assert write_jsonl(path, [{"id": 1, "text": "Привет"}, {"id": 2}]) == 2
    assert list(read_jsonl(path)) == [{"id": 1, "text": "Привет"}, {"id": 2}]
    path.write_text('{"id": 1}\n[1]\n{broken\n')
    with pytest.raises(DataError, match=r"out.jsonl:2: expected a JSON object, got list"):
        list(read_jsonl(path))
