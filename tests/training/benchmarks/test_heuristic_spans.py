"""benchmark heuristic-spans on tiny offline data: every mode scored on each span set, dev and
test rows read from where the other benchmarks read them, swapped answers per language."""

from __future__ import annotations

from pathlib import Path

import pytest

from autovalidators.data_prep.io import write_jsonl
from autovalidators.training.benchmarks.heuristic_spans import (MODES, READINGS, SUPPORT_THRESHOLDS, compare_span_modes,
                                                                 compare_support_thresholds, reading_rows, rows_of,
                                                                 table_rows, threshold_rows)

CONTEXT = "The bridge opened in 1932 in Sydney. It was designed by John Bradfield."


def _judged(i: int, source: str) -> dict:
    # A faithful sentence, then one whose year and city the context never states.
    text = "The bridge opened in 1932 in Sydney. It was designed by John Bradfield in 1977 in Melbourne."
    start = text.index("1977")
    return {"id": f"{source}-{i}", "source": source, "group": f"g{i}", "granularity": "span", "context": CONTEXT,
            "text": text, "label": 0, "unsupported": [[start, start + len("1977 in Melbourne")]], "question": ""}


def _swapped(i: int, language: str) -> dict:
    answer = "Мост открылся в 1932 году в Перми." if language == "ru" else "The bridge opened in 1932 in Perth."
    swapped = "Пермь" if language == "ru" else "Perth"
    start = answer.index(swapped[:4])
    return {"id": f"x{i}-swap", "question": "Where?", "context": CONTEXT, "answer": answer, "label": "bad",
            "meta": {"dataset": "xquad", "task": "QA", "language": language, "kind": "swapped", "group": f"g{i}",
                     "unsupported": [[start, answer.index(".", start)]]}}


@pytest.fixture()
def folders(tmp_path) -> tuple[Path, Path]:
    data, gate_sets = tmp_path / "grounding", tmp_path / "gate_sets"
    write_jsonl(data / "answers" / "dev.jsonl", [_judged(i, "xsumfaith") for i in range(4)]
                + [{**_judged(9, "begin"), "granularity": "response"}])
    write_jsonl(gate_sets / "dev.jsonl", [_swapped(i, lang) for i in range(3) for lang in ("en", "ru")]
                + [{**_swapped(7, "en"), "meta": {"kind": "extractive", "language": "en", "dataset": "xquad"}}])
    return data, gate_sets


def test_every_mode_is_scored_on_each_span_set_and_narrowing_shows_where_the_claim_is(folders):
    data, gate_sets = folders
    report = compare_span_modes(data, "dev", gate_sets)
    assert list(report["sets"]) == ["xsumfaith", "begin", "swapped/en", "swapped/ru", "written/ru",
                                    "written/en_longform"]
    begin = report["sets"]["begin"]  # judged per response: example F1 only
    assert "sentence" not in begin and begin["example"]["f1"] == pytest.approx(1.0)
    assert report["sets"]["swapped/ru"]["rows"] == 3
    xsum = report["sets"]["xsumfaith"]
    # The whole second sentence against the unsupported phrase: narrowing is exact here, the sentence is not.
    assert xsum["phrases_gap1"]["char"]["f1"] == pytest.approx(1.0)
    assert xsum["sentence"]["char"]["precision"] < 0.6
    assert xsum["example"]["f1"] == pytest.approx(1.0)  # every answer is hallucinated and flagged
    assert set(xsum["versus_sentence"]) == set(MODES) - {"sentence"}
    # The shipped default: the whole sentence in English, the unsupported phrases in Russian.
    for name, narrowed in (("xsumfaith", False), ("swapped/en", False), ("swapped/ru", True)):
        result = report["sets"][name]
        assert result["shipped"] == result["phrases_gap4" if narrowed else "sentence"], name
    assert report["sets"]["swapped/ru"]["shipped"]["char"]["f1"] > report["sets"]["swapped/ru"]["sentence"]["char"]["f1"]
    assert [row["set"] for row in table_rows(report)] == ["xsumfaith", "begin", "swapped/en", "swapped/ru",
                                                          "written/ru", "written/en_longform", "mean (span sets)"]
    # The written answers of the split, read with their questions: every mode scores them.
    for name in ("written/ru", "written/en_longform"):
        written = report["sets"][name]
        assert written["rows"] >= 50 and 0 < written["hallucinated"] < written["rows"] and set(MODES) <= set(written)


def test_support_thresholds_are_swept_on_dev_and_only_the_shipped_ones_score_the_held_out_rows(folders):
    data, gate_sets = folders
    dev = compare_span_modes(data, "dev", gate_sets)["support_thresholds"]
    assert dev["thresholds"] == [f"{t:g}" for t in SUPPORT_THRESHOLDS] + ["shipped"] and dev["default"] == "0.6"
    xsum = dev["sets"]["xsumfaith"]
    # The year and city the context lacks cap the sentence at 0.3: flagged at every threshold.
    assert all(xsum[label]["example"]["f1"] == pytest.approx(1.0) for label in dev["thresholds"])
    assert xsum["shipped"] == xsum["0.6"]  # a prose context: no task's own threshold
    assert xsum["shipped_versus_default"]["char_f1"]["difference"] == 0.0
    assert [row["set"] for row in threshold_rows({"support_thresholds": dev})] == list(dev["sets"])
    rows = rows_of(data, "dev", gate_sets)
    assert compare_support_thresholds(rows, "test")["thresholds"] == ["0.6", "shipped"]


def test_a_missing_split_or_file_is_a_clear_error(folders, tmp_path):
    data, gate_sets = folders
    with pytest.raises(ValueError, match="choose dev or test"):
        compare_span_modes(data, "train", gate_sets)
    with pytest.raises(FileNotFoundError, match="prepare gate-sets"):
        compare_span_modes(data, "dev", tmp_path / "nowhere")


def test_each_reading_is_paired_against_the_shipped_heuristic_on_every_set(folders):
    data, gate_sets = folders
    report = compare_span_modes(data, "dev", gate_sets)
    readings = report["readings"]["source_lacks"]
    assert set(readings) == set(report["sets"]) and set(report["readings"]) == set(READINGS)
    # The Russian written answers that only say what the passage lacks are no longer flagged: a gain.
    assert readings["written/ru"]["example_f1"]["difference"] > 0
    assert readings["written/ru"]["char_f1"]["difference"] > 0
    # The reading is Russian: English sets are untouched.
    for name in ("xsumfaith", "swapped/en", "written/en_longform"):
        assert all(d["difference"] == 0.0 for d in readings[name].values()), name
    assert [row["set"] for row in reading_rows(report)] == list(report["sets"])
