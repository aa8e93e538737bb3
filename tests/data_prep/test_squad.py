"""The shared SQuAD-format reader."""

from __future__ import annotations

import json

import pytest

from autovalidators.data_prep.io import DataError
from autovalidators.data_prep.squad import iter_squad


def test_yields_every_question_with_raw_offsets_and_positions(tmp_path):
    path = tmp_path / "squad.json"
    context = "\ufeffMoscow was first mentioned in 1147."
    path.write_text(json.dumps({"data": [{"title": "Moscow", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "When?", "answers": [{"text": "1147", "answer_start": context.index("1147")}]},
        {"id": "q2", "question": "Who?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "Moscow", "answer_start": 1}]},
    ]}]}]}), encoding="utf-8")
    first, second = iter_squad(path)
    assert (first.article, first.paragraph, first.title, first.id) == (0, 0, "Moscow", "q1")
    start = first.answers[0]["answer_start"]
    assert first.context[start:start + 4] == "1147"  # the BOM is kept, so offsets stay valid
    assert second.is_impossible and second.plausible_answers[0]["text"] == "Moscow"


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"version": 2}', "not a SQuAD-format file"),
    ("[1, 2]", "not a SQuAD-format file"),
])
def test_a_file_that_is_not_squad_is_named(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as info:
        list(iter_squad(path))
    assert str(path) in str(info.value)


def test_a_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        list(iter_squad(tmp_path / "absent.json"))
