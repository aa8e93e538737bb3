"""benchmark fact-spans --leave-one-out on tiny offline data: folds by set, every learned part
refitted without the left-out set, the ship rule, and the frozen cross-encoder scored once per pair."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from autovalidators.data_prep.io import write_jsonl  # noqa: E402
from autovalidators.training.benchmarks.fact_spans_loo import leave_one_out, set_of, ship_rule  # noqa: E402
from autovalidators.training.grounding.combiner import CombinerConfig, MemoScorer  # noqa: E402
from autovalidators.training.tiny import QA_FACTS  # noqa: E402

FACTS = [answer for _, answer in QA_FACTS]


def _answer(i: int, source: str, task: str = "Summary") -> dict:
    """A judged answer over a two-fact context: faithful, or with a sentence from another context."""
    first, second = FACTS[i % len(FACTS)], FACTS[(i + 3) % len(FACTS)]
    context = f"{first}. {second}."
    if task == "Data2txt":
        context = f"name: {first}\nnote: {second}"
    question = "" if task == "Summary" else "what is true about it"
    if i % 2:
        borrowed = FACTS[(i + 5) % len(FACTS)].capitalize()
        text = f"{first.capitalize()}. {borrowed}."
        unsupported = [[text.index(borrowed), text.index(borrowed) + len(borrowed)]]
    else:
        text, unsupported = f"{first.capitalize()}.", []
    return {"id": f"{source}-{task}-{i}", "source": source, "group": f"{source}-g{i}", "granularity": "span",
            "context": context, "text": text, "label": 0 if unsupported else 1, "unsupported": unsupported,
            "language": "en", "question": question}


def _span_record(answer: dict, task: str) -> dict:
    spans = [{"start": s, "end": e, "label": "HALLUCINATION"} for s, e in answer["unsupported"]]
    return {"id": answer["id"], "context": answer["context"], "question": answer["question"], "answer": answer["text"],
            "spans": spans, "ignored": [], "facts": [], "source": answer["source"], "group": answer["group"],
            "language": "en", "task_type": task, "origin": "human", "grounding_usable": True,
            "provenance": {"dataset": "tiny", "file": "tiny", "row": "1", "licence": "MIT"}, "meta": {}}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("grounding")
    rows = {"train": range(0, 40), "dev": range(40, 60)}
    for split, numbers in rows.items():
        write_jsonl(folder / "answers" / f"{split}.jsonl",
                    [_answer(i, "ragtruth", "Summary") for i in numbers]
                    + [_answer(i, "ragtruth", "QA") for i in numbers]
                    + [_answer(i, "xsumfaith") for i in numbers])
    write_jsonl(folder / "answers" / "test.jsonl", [_answer(i, "xsumfaith") for i in range(60, 72)])
    write_jsonl(folder / "heldout" / "ragtruth.jsonl",
                [_span_record(_answer(i, "ragtruth", "QA"), "QA") for i in range(60, 72)]
                + [_span_record(_answer(i, "ragtruth", "Summary"), "Summary") for i in range(60, 72)])
    return folder


def test_sets_fold_ragtruth_by_task_and_others_by_source():
    assert set_of(_answer(1, "ragtruth", "QA")) == "ragtruth/QA"
    assert set_of(_answer(1, "ragtruth", "Summary")) == "ragtruth/Summary"
    assert set_of(_answer(1, "ragtruth", "Data2txt")) == "ragtruth/Data2txt"
    assert set_of(_answer(1, "wice")) == "wice"


def _versus(low: float, high: float) -> dict:
    return {"example_f1": {"difference": (low + high) / 2, "low": low, "high": high},
            "char_f1": {"difference": (low + high) / 2, "low": low, "high": high}}


def test_ship_rule_needs_a_gain_beyond_the_interval_on_every_target_set():
    targets = ("ragtruth/QA", "ragtruth/Summary", "ragtruth/Data2txt", "faithbench")
    assert ship_rule({name: _versus(0.01, 0.08) for name in targets})["passes"]
    inside = ship_rule({**{name: _versus(0.01, 0.08) for name in targets}, "ragtruth/QA": _versus(-0.01, 0.08)})
    assert not inside["passes"] and any("ragtruth/QA" in r and "not above" in r for r in inside["reasons"])
    missing = ship_rule({name: _versus(0.01, 0.08) for name in targets[:3]})
    assert not missing["passes"] and any("faithbench" in r and "not measured" in r for r in missing["reasons"])
    worse = ship_rule({**{name: _versus(0.01, 0.08) for name in targets}, "wice": _versus(-0.2, -0.01)})
    assert not worse["passes"] and any("wice" in r and "worse" in r for r in worse["reasons"])


class CountingScorer:
    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def scores(self, pairs):
        self.seen += list(pairs)
        return np.asarray([len(a + b) % 7 / 7 for a, b in pairs])


def test_memo_scorer_scores_each_pair_once_and_keeps_them(tmp_path):
    inner = CountingScorer()
    memo = MemoScorer(inner, tmp_path / "cache.json")
    first = memo.scores([("a", "b"), ("c", "d"), ("a", "b")])
    again = memo.scores([("c", "d"), ("a", "b")])
    assert inner.seen == [("a", "b"), ("c", "d")]
    assert list(again) == [first[1], first[0]]
    memo.save()
    reloaded = MemoScorer(CountingScorer(), tmp_path / "cache.json")
    assert list(reloaded.scores([("a", "b")])) == [first[0]] and not reloaded.scorer.seen


def test_each_set_is_scored_by_a_fit_that_never_saw_it(data, tmp_path):
    config = CombinerConfig(data_dir=str(data), cross_encoder=None, model="logistic",
                            threshold_sources=["ragtruth", "xsumfaith"], span_mode_sources=["ragtruth", "xsumfaith"],
                            min_task_answers=5, narrower={"enabled": False})
    report = leave_one_out(config, cross_encoder=None, out_dir=tmp_path / "loo")
    assert list(report["sets"]) == ["ragtruth/QA", "ragtruth/Summary", "xsumfaith"]
    for name, result in report["sets"].items():
        assert result["rows"] == 12
        assert result["train_answers_left_out"] == 40 and result["dev_answers_left_out"] == 20
        assert set(result["left_out_vs_heuristic"]) == {"example_f1", "char_f1", "sentence_f1"}
    # The fold without ragtruth/QA fitted its thresholds on dev answers with no QA task among them.
    fit = json.loads((tmp_path / "loo" / "ragtruth_QA" / "fit.json").read_text())
    assert "hallucination/QA" not in fit["thresholds"]
    everything = json.loads((tmp_path / "loo" / "all_sets" / "fit.json").read_text())
    assert "hallucination/QA" in everything["thresholds"]
    # Borrowed sentences share no words with the context: the recipe finds them left out too.
    assert report["sets"]["xsumfaith"]["left_out"]["example"]["f1"] > 0.9
    assert "ship_rule" in report and not report["ship_rule"]["passes"]  # no FaithBench or Data2txt rows


def test_cli_prints_the_table_and_writes_json(data, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import autovalidators.training.cli  # noqa: F401  (registers the task commands)
    from autovalidators.inference.cli import app

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"model: logistic\ndata_dir: {data}\ncross_encoder: null\nthreshold_sources: [ragtruth, xsumfaith]\n"
                      "span_mode_sources: [ragtruth, xsumfaith]\nmin_task_answers: 5\nnarrower: {enabled: false}\n")
    monkeypatch.chdir(tmp_path)  # the folds' files go under runs/
    output = tmp_path / "loo.json"
    result = CliRunner().invoke(app, ["benchmark", "fact-spans", "--leave-one-out", "--recipe", str(recipe),
                                      "--output", str(output)])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert report["cross_encoder"] is None  # the recipe has none: every learned part is refitted
    assert set(report["sets"]) == {"ragtruth/QA", "ragtruth/Summary", "xsumfaith"}
    assert "leave-one-dataset-out" in result.output and "ship rule: FAIL" in result.output
    bad = CliRunner().invoke(app, ["benchmark", "qa-relevance", "--leave-one-out"])
    assert bad.exit_code != 0 and "fact-spans" in bad.output
