"""`label distill`: soft tone targets from teacher models, per language, never inventing labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from autovalidators.data_prep.tone.distill import Teacher, distill_records, soften
from autovalidators.inference.cli import _register_commands, app
from autovalidators.training.tasks.tone import compute_pos_weight, target_matrix

REPO = Path(__file__).resolve().parents[2]


def invoke(*args: str):
    _register_commands()
    return CliRunner().invoke(app, ["label", "distill", *args])


class ConstantScores:
    """A stand-in teacher model: the same score for every label of every text; records its inputs."""

    def __init__(self, value: float, labels: int):
        self.value, self.labels, self.seen = value, labels, []

    def scores(self, texts):
        self.seen.extend(texts)
        return np.full((len(texts), self.labels), self.value)


def teacher(name: str, value: float, skips=()) -> Teacher:
    labels = ("toxicity", "insult")
    return Teacher(name, labels, frozenset(skips), ConstantScores(value, len(labels)))


def record(text: str, **labels) -> dict:
    return {"id": text, "text": text, "source": "test", "labels": labels}


def test_known_labels_move_halfway_to_the_teacher_and_missing_ones_stay_missing():
    soft = soften(record("x", toxicity=1, insult=None, politics=0), {"toxicity": 0.2, "insult": 0.9}, 0.5)
    assert soft["labels"] == {"toxicity": 0.6, "insult": None, "politics": 0}  # no teacher score for politics


def test_teachers_are_averaged_only_over_the_languages_they_read():
    english, russian = record("you are an idiot", toxicity=1), record("ты идиот", toxicity=1)
    both = teacher("e5", 0.8)
    english_only = teacher("minilm", 0.0, skips={"ru"})
    out, report = distill_records([english, russian], [both, english_only], weight=0.5)
    assert out[0]["labels"]["toxicity"] == pytest.approx(0.5 * 1 + 0.5 * 0.4)  # mean of 0.8 and 0.0
    assert out[1]["labels"]["toxicity"] == pytest.approx(0.5 * 1 + 0.5 * 0.8)  # the English model did not vote
    assert english_only.validator.seen == ["you are an idiot"]
    assert report.teachers == {"e5": 2, "minilm": 1} and report.softened == 2


def test_a_record_no_teacher_reads_keeps_its_gold_targets():
    russian = record("ты идиот", toxicity=1)
    out, report = distill_records([russian], [teacher("minilm", 0.0, skips={"ru"})], weight=0.5)
    assert out == [russian] and report.gold_only == 1


def test_a_weight_above_one_half_is_refused_because_gold_must_decide_the_side():
    with pytest.raises(ValueError, match=r"\(0, 0.5\]"):
        distill_records([record("x", toxicity=1)], [teacher("t", 0.0)], weight=0.7)


def test_soft_targets_count_on_their_side_of_one_half_for_pos_weight():
    hard = [record("a", toxicity=1), record("b", toxicity=0), record("c", toxicity=0), record("d", toxicity=None)]
    soft, _ = distill_records(hard, [teacher("t", 0.3)], weight=0.5)
    labels = ("toxicity",)
    assert compute_pos_weight(target_matrix(soft, labels)).tolist() == compute_pos_weight(
        target_matrix(hard, labels)).tolist() == [2.0]


def test_cli_softens_with_the_shipped_model_and_names_a_bad_line(tmp_path):
    rows = [record("You are a complete idiot.", toxicity=1, insult=1), record("Thank you, have a nice day.", toxicity=0)]
    source = tmp_path / "train.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows[:1]) + '\n{"id": "broken", "labels": {}}\n'
                      + json.dumps(rows[1]) + "\n", encoding="utf-8")
    output = tmp_path / "soft.jsonl"
    result = invoke("--input", str(source), "--output", str(output), "--teacher", str(REPO / "models" / "tone"),
                    "--threads", "1")
    assert result.exit_code == 1, result.output  # one bad line: the rest is written, and it says so
    assert f"{source}:2: field 'text' missing" in " ".join(result.output.split())
    written = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["id"] for r in written] == [rows[0]["id"], rows[1]["id"]]
    toxic, clean = written[0]["labels"]["toxicity"], written[1]["labels"]["toxicity"]
    assert 0.5 <= toxic < 1.0 and 0.0 < clean < 0.5  # moved towards the teacher, still on the gold side


def test_cli_without_a_teacher_model_is_a_clear_error(tmp_path):
    source = tmp_path / "train.jsonl"
    source.write_text(json.dumps(record("x", toxicity=1)) + "\n")
    result = invoke("--input", str(source), "--output", str(tmp_path / "o.jsonl"), "--teacher", str(tmp_path / "nowhere"))
    assert result.exit_code == 2
    assert "nowhere" in result.output


def test_labels_limits_the_softening_and_the_others_keep_gold():
    out, report = distill_records([record("you idiot", toxicity=1, insult=1), record("plain", insult=0)],
                                  [teacher("t", 0.2)], weight=0.5, labels=["toxicity"])
    assert out[0]["labels"] == {"toxicity": 0.6, "insult": 1}
    assert out[1]["labels"] == {"insult": 0}  # no toxicity target to soften: not counted as softened
    assert (report.softened, report.gold_only, report.records) == (1, 0, 2)


@pytest.mark.parametrize("option, names, unknown", [("--labels", "toxicity,sarcasm", "sarcasm"),
                                                  ("--sources", "test,olid", "olid")])
def test_cli_refuses_a_label_no_teacher_scores_or_a_source_the_file_does_not_hold(tmp_path, option, names, unknown):
    source = tmp_path / "train.jsonl"
    source.write_text(json.dumps(record("x", toxicity=1)) + "\n")  # its source is "test"
    result = invoke("--input", str(source), "--output", str(tmp_path / "o.jsonl"),
                    "--teacher", str(REPO / "models" / "tone"), option, names)
    assert result.exit_code == 2 and unknown in result.output
    assert not (tmp_path / "o.jsonl").exists()


def test_sources_limits_the_teaching_to_their_records_and_the_others_are_not_even_scored():
    abusive = {**record("you idiot", toxicity=1), "source": "ru_toxic"}
    written_for_us = {**record("Cut the chicken at the joint.", toxicity=0), "source": "instructions2_en"}
    model = teacher("shipped", 0.8)
    out, report = distill_records([abusive, written_for_us], [model], weight=0.5, sources=["ru_toxic"])
    assert out[0]["labels"]["toxicity"] == pytest.approx(0.9)
    assert out[1] == written_for_us  # the new neutral text keeps its gold 0, not the teacher's 0.8
    assert model.validator.seen == ["you idiot"]
    assert (report.softened, report.other_sources, report.gold_only) == (1, 1, 0)
