"""`benchmark tone-dev` on the shipped tone model: each measure over the rows it names, the reference
minus the same model in another folder exactly zero, a toxic comment told from a polite one, and a bad dev line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import autovalidators.training.cli  # noqa: F401  (registers the training commands)
from autovalidators.data_prep.io import DataError, write_jsonl
from autovalidators.data_prep.tone.statements import DEFAULT_PATH, statement_records
from autovalidators.inference.cli import app
from autovalidators.training.benchmarks.tone import paired_auc_bootstrap
from autovalidators.training.benchmarks.tone_dev import compare, dev_rows, table_rows
from autovalidators.training.tasks.tone import TONE_LABELS

SHIPPED = Path(__file__).resolve().parents[3] / "models" / "tone"
NEUTRAL = ["qnli_sentences", "tydiqa_ru_sentences"]


def record(text: str, source: str, language: str, toxicity: int | None = None) -> dict:
    return {"text": text, "source": source, "language": language, "labels": {"toxicity": toxicity}}


@pytest.fixture
def dev_file(tmp_path: Path) -> Path:
    path = tmp_path / "dev_sampled.jsonl"
    write_jsonl(path, [
        record("Ты тупой урод, заткнись и не пиши сюда больше.", "ru_toxic", "ru", 1),
        record("Спасибо за совет, всё получилось с первого раза.", "ru_toxic", "ru", 0),
        record("Подскажите, какой врач лечит боли в спине?", "ru_appropriate", "ru"),
        record("The committee published its report in March.", "qnli_sentences", "en"),
        record("Москва расположена на реке Москве.", "tydiqa_ru_sentences", "ru"),
        record("you are a disgusting idiot", "davidson", "en", 1),  # not a measured source: left out
    ])
    return path


def test_each_measure_counts_its_rows_and_the_reference_minus_itself_is_zero(dev_file, tmp_path):
    genre, recipes = tmp_path / "genre.jsonl", tmp_path / "recipes.jsonl"
    write_jsonl(genre, [{"text": "Нарежьте мясо поперёк волокон."}, {"text": "Промойте рану чистой водой."}])
    write_jsonl(recipes, [{"text": "Взбейте яйца с сахаром и влейте молоко."}])
    rows = dev_rows(dev_file, NEUTRAL, [genre, recipes])
    with pytest.raises(ValueError, match="named twice"):
        compare([SHIPPED, SHIPPED], rows)
    same = tmp_path / "same_model"
    same.symlink_to(SHIPPED.resolve(), target_is_directory=True)
    report = compare([SHIPPED, same], rows)
    measures = report["measures"]
    dev_statements = [r for r in statement_records(DEFAULT_PATH, TONE_LABELS) if r["split"] == "dev"]
    hateful_ru = sum(r["language"] == "ru" and r["labels"]["identity_hate"] == 1 for r in dev_statements)
    assert measures["hateful statements caught (ru)"]["rows"] == hateful_ru
    assert measures["forum messages flagged (ru)"]["rows"] == 1
    assert measures["neutral en flagged"]["rows"] == 1 and measures["neutral ru flagged"]["rows"] == 1
    assert measures["genre flagged (genre)"]["rows"] == 2 and measures["genre flagged (recipes)"]["rows"] == 1
    assert not any("OLID" in name for name in measures)  # no OLID row, no OLID measure
    assert len(rows) == 5 + len(dev_statements) + 3  # the davidson row is not measured
    # The shipped model tells the abusive comment from the polite one.
    assert measures["toxicity F1, Russian toxic comments"]["models"][str(SHIPPED)]["f1"] == 1.0
    assert measures["toxicity F1, Russian toxic comments"]["models"][str(SHIPPED)]["roc_auc"] == 1.0
    for entry in measures.values():
        versus = entry["versus_first"][str(same)]
        assert versus["difference"] == versus["low"] == versus["high"] == 0.0
        if entry["kind"] == "toxicity":
            assert versus["roc_auc"] == {"difference": 0.0, "low": 0.0, "high": 0.0}


def test_a_dev_line_without_a_source_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "dev.jsonl"
    write_jsonl(path, [record("fine", "qnli_sentences", "en"), {"text": "no source", "language": "en"}])
    with pytest.raises(DataError, match=r"dev\.jsonl:2: field 'source'"):
        dev_rows(path, NEUTRAL)
    result = CliRunner().invoke(app, ["benchmark", "tone-dev", str(SHIPPED), "--dev-file", str(path),
                                      "--output", str(tmp_path / "out.json")])
    assert result.exit_code == 2 and "dev.jsonl:2: field 'source'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_command_writes_its_report(dev_file, tmp_path):
    output = tmp_path / "tone_dev.json"
    genres = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    for path in genres:
        write_jsonl(path, [{"text": "Рубите капусту крупно, если собираетесь её квасить."}])
    result = CliRunner().invoke(app, ["benchmark", "tone-dev", str(SHIPPED), "--dev-file", str(dev_file),
                                      "--genre-file", str(genres[0]), "--genre-file", str(genres[1]),
                                      "--output", str(output)])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert report["reference"] == str(SHIPPED) and report["command"].startswith("autovalidators benchmark tone-dev")
    # Each genre file is its own measure, and the command line names both, so it reruns as it ran.
    assert {"genre flagged (first)", "genre flagged (second)"} <= set(report["measures"])
    assert report["command"].count("--genre-file") == 2
    # What the command wrote is what it measured: the neutral rows unflagged, the abusive comment caught.
    for measure in ("forum messages flagged (ru)", "neutral en flagged", "neutral ru flagged"):
        assert report["measures"][measure]["models"][str(SHIPPED)]["flagged"] == 0, measure
    assert report["measures"]["toxicity F1, Russian toxic comments"]["models"][str(SHIPPED)]["f1"] == 1.0


def test_the_paired_auc_sees_a_ranking_loss_and_a_toxicity_measure_prints_its_auc_row():
    import numpy as np

    rng = np.random.default_rng(0)
    gold = rng.random(400) < 0.4
    ranks_well = gold + rng.normal(0, 0.5, 400)  # toxic rows mostly above the polite ones
    ranks_worse = gold + rng.normal(0, 1.5, 400)
    versus = paired_auc_bootstrap(gold, ranks_worse, ranks_well)
    assert versus["difference"] < 0 and versus["high"] < 0 and versus["ours"] < versus["theirs"]
    same = paired_auc_bootstrap(gold, ranks_well, ranks_well)
    assert same["difference"] == same["low"] == same["high"] == 0.0
    with pytest.raises(ValueError, match="both classes"):
        paired_auc_bootstrap(np.ones(5, dtype=bool), ranks_well[:5], ranks_well[:5])
    report = {"models": ["a", "b"], "reference": "a", "measures": {"toxicity F1, OLID dev rows": {
        "rows": 400, "kind": "toxicity", "models": {"a": {"f1": 0.8, "roc_auc": 0.9}, "b": {"f1": 0.79, "roc_auc": 0.88}},
        "versus_first": {"b": {"difference": -0.01, "low": -0.02, "high": 0.0, "rows": 400,
                               "roc_auc": {"difference": -0.02, "low": -0.03, "high": -0.01}}}}}}
    assert table_rows(report) == [
        ["toxicity F1, OLID dev rows", "400", "0.800", "0.790", "-0.010 [-0.020, +0.000]"],
        ["toxicity ROC-AUC, OLID dev rows", "400", "0.9000", "0.8800", "-0.0200 [-0.0300, -0.0100]"]]
