"""Assessor check: stratified sample, filled CSV read back, kappa/precision/recall and the floor."""

from __future__ import annotations

import csv

import pytest
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

import autovalidators.data_prep.tone.cli  # noqa: F401  (registers the label commands)
from autovalidators.data_prep.tone.assess import (ReviewRow, agreement, auto_source, draw_sample,
                                                  read_review_csv, write_review_csv)
from autovalidators.data_prep.tone.config import LabelSpec
from autovalidators.data_prep.tone.records import add_votes, merge, new_record
from autovalidators.inference.cli import app

LABELS = ["toxicity", "obscenity"]


def _records(n=40):
    records = []
    for i in range(n):
        record = new_record(f"text {i}", language="en", source="s", row=str(i), labels=LABELS)
        # Lexicon: toxicity positive for 1 in 4, obscenity positive for 1 in 5.
        add_votes(record, "lexicon", {"toxicity": int(i % 4 == 0), "obscenity": int(i % 5 == 0)})
        # Gold agrees except on a few rows; obscenity gold missing for odd rows.
        add_votes(record, "gold", {"toxicity": int(i % 4 == 0) if i % 10 else 1 - int(i % 4 == 0),
                                   "obscenity": int(i % 5 == 0) if i % 2 == 0 else None})
        merge(record, ["lexicon"])
        records.append(record)
    return records


def test_stratified_sample_has_positives_and_negatives_per_label():
    records = _records()
    rows = draw_sample(records, LABELS, auto_source("lexicon"), positives=3, negatives=4, seed=5)
    for label in LABELS:
        drawn = [r for r in rows if label in r.drawn_for]
        assert sum(r.auto[label] == 1 for r in drawn) == 3
        assert sum(r.auto[label] == 0 for r in drawn) == 4
        # Each drawn row stands for N/n rows of its stratum.
        population = sum(auto_source("lexicon")(r)[label] == 1 for r in records)
        assert {r.weights[label] for r in drawn if r.auto[label] == 1} == {round(population / 3, 4)}
    assert len({r.id for r in rows}) == len(rows)  # a row drawn for two labels is written once
    again = draw_sample(records, LABELS, auto_source("lexicon"), positives=3, negatives=4, seed=5)
    assert [r.id for r in again] == [r.id for r in rows]  # seeded


def test_prefill_only_draws_rows_the_stand_in_assessor_labelled():
    rows = draw_sample(_records(), LABELS, auto_source("lexicon"), positives=50, negatives=50, seed=1,
                       human_of=auto_source("gold"))
    assert all(r.human["obscenity"] is not None for r in rows if "obscenity" in r.drawn_for)
    assert all(int(r.id.split(":")[1]) % 2 == 0 for r in rows if "obscenity" in r.drawn_for)


def test_csv_round_trip_and_bad_row_names_the_line(tmp_path):
    rows = draw_sample(_records(), LABELS, auto_source("lexicon"), positives=2, negatives=2, seed=3,
                       human_of=auto_source("gold"))
    path = tmp_path / "review.csv"
    write_review_csv(path, rows, LABELS)
    back, labels, errors = read_review_csv(path)
    assert labels == LABELS and not errors
    assert [(r.id, r.auto, r.human, r.weights) for r in back] == [(r.id, r.auto, r.human, r.weights) for r in rows]
    # A person types "yes" into the third data row (line 4): that row is skipped and named.
    table = list(csv.reader(path.open(encoding="utf-8")))
    table[3][table[0].index("human_toxicity")] = "yes"
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(table)
    back, _, errors = read_review_csv(path)
    assert len(back) == len(rows) - 1
    assert errors == [f"{path}:4: column human_toxicity = 'yes'; expected 1, 0, or blank (not assessed)"]


def _row(i, auto, human, weight=1.0):
    return ReviewRow(f"r{i}", f"s:{i}", "s", "en", ["toxicity"], "t",
                     {"toxicity": auto}, {"toxicity": human}, {"toxicity": weight})


def test_kappa_precision_recall_and_floor():
    pairs = [(1, 1)] * 8 + [(1, 0)] * 2 + [(0, 1)] * 1 + [(0, 0)] * 9
    rows = [_row(i, a, h) for i, (a, h) in enumerate(pairs)] + [_row(99, 1, None)]  # unassessed row ignored
    spec = {"toxicity": LabelSpec(description="rude or hostile text", kappa_floor=0.6, min_assessed=10)}
    [result] = agreement(rows, spec, ["toxicity"])
    expected = cohen_kappa_score([h for _, h in pairs], [a for a, _ in pairs])
    assert result.n == 20 and result.kappa == pytest.approx(expected)
    assert result.precision == pytest.approx(8 / 10) and result.recall == pytest.approx(8 / 9)
    assert result.confusion == {"tp": 8, "fp": 2, "fn": 1, "tn": 9}
    assert result.passed
    strict = {"toxicity": LabelSpec(description="rude or hostile text", kappa_floor=0.9, min_assessed=10)}
    assert not agreement(rows, strict, ["toxicity"])[0].passed
    few = {"toxicity": LabelSpec(description="rude or hostile text", kappa_floor=0.1, min_assessed=50)}
    assert "only 20 assessed rows" in agreement(rows, few, ["toxicity"])[0].reason


def test_single_class_kappa_is_undefined_not_perfect():
    rows = [_row(i, 0, 0) for i in range(30)]
    spec = {"toxicity": LabelSpec(description="rude or hostile text", min_assessed=5)}
    [result] = agreement(rows, spec, ["toxicity"])
    assert result.kappa is None and not result.passed


def _config(tmp_path, floor):
    path = tmp_path / "tone.yaml"
    path.write_text(
        "labels:\n"
        f"  toxicity: {{description: rude or hostile text, kappa_floor: {floor}, min_assessed: 5}}\n"
        f"  obscenity: {{description: profanity and vulgar words, kappa_floor: {floor}, min_assessed: 5}}\n")
    return path


def test_agreement_command_exit_codes_and_report(tmp_path):
    rows = draw_sample(_records(), LABELS, auto_source("lexicon"), positives=6, negatives=6, seed=2,
                       human_of=auto_source("gold"))
    review = tmp_path / "review.csv"
    write_review_csv(review, rows, LABELS)
    runner = CliRunner()
    ok = runner.invoke(app, ["label", "agreement", "--review", str(review), "--out", str(tmp_path / "ok"),
                             "--config", str(_config(tmp_path, 0.1))])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "ok" / "agreement.json").is_file() and (tmp_path / "ok" / "AGREEMENT.md").is_file()
    high = runner.invoke(app, ["label", "agreement", "--review", str(review), "--out", str(tmp_path / "high"),
                               "--config", str(_config(tmp_path, 0.99))])
    assert high.exit_code == 1  # under the floor: the training pipeline must stop
    missing = runner.invoke(app, ["label", "agreement", "--review", str(tmp_path / "absent.csv"),
                                  "--out", str(tmp_path / "x"), "--config", str(_config(tmp_path, 0.1))])
    assert missing.exit_code == 2


def test_sample_for_review_command_writes_a_fillable_csv(tmp_path):
    from autovalidators.data_prep.io import write_jsonl

    write_jsonl(tmp_path / "train.jsonl", _records())
    out = tmp_path / "review.csv"
    result = CliRunner().invoke(app, ["label", "sample-for-review", "--input", str(tmp_path / "train.jsonl"),
                                      "--out", str(out), "--config", str(_config(tmp_path, 0.5)),
                                      "--auto", "lexicon", "--positives", "2", "--negatives", "2"])
    assert result.exit_code == 0, result.output
    header = next(csv.reader(out.open(encoding="utf-8")))
    assert {"text", "human_toxicity", "auto_toxicity", "human_obscenity", "auto_obscenity"} <= set(header)
    rows, _, errors = read_review_csv(out)
    assert not errors and all(r.human["toxicity"] is None for r in rows)  # left for the person
