"""`autovalidators benchmark fact-spans`: baseline rows scored on the same records as the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autovalidators.data_prep.io import write_jsonl
from autovalidators.training.benchmarks import fact_spans as bench

CONTEXT = "paris is the capital of france. the nile flows through egypt."


def span_record(index: int, answer: str, hallucinated: str | None = None, task_type: str = "Summary",
                ignored: tuple[int, int] | None = None, usable: bool = True) -> dict:
    """A held-out record: `hallucinated` (a substring of `answer`) is gold HALLUCINATION, the rest FACT."""
    spans = [{"start": 0, "end": len(answer), "label": "FACT"}]
    if hallucinated:
        start = answer.index(hallucinated)
        spans = [{"start": 0, "end": start, "label": "FACT"},
                 {"start": start, "end": start + len(hallucinated), "label": "HALLUCINATION"}]
    return {"id": f"r{index}", "question": "summarise", "context": CONTEXT, "answer": answer, "spans": spans,
            "ignored": [{"start": ignored[0], "end": ignored[1]}] if ignored else [], "task_type": task_type,
            "grounding_usable": usable}


def groups() -> dict[str, list[dict]]:
    clean = "paris is the capital of france."
    made_up = "the moon is made of green cheese."
    return {"ragtruth/Summary": [span_record(0, clean), span_record(1, f"{clean} {made_up}", made_up),
                                 span_record(2, "the nile flows through egypt.", ignored=(0, 3))],
            "ragtruth/Data2txt": [span_record(5, made_up, made_up, task_type="Data2txt")],
            "faithbench": [span_record(3, f"{clean} {made_up}", made_up), span_record(4, clean)]}


def test_baselines_are_scored_on_every_group_like_the_model():
    data = groups()
    scores = bench.score_baselines(data)
    assert set(scores) == set(bench.BASELINES) == {"always_hallucinated", "heuristic"}
    for by_group in scores.values():
        # Every group, plus the RAGTruth tasks pooled (the target is over all of RAGTruth).
        assert {g: r["examples"] for g, r in by_group.items()} == {**{g: len(rs) for g, rs in data.items()},
                                                                    "ragtruth/all": 4}
    pooled = scores["always_hallucinated"]["ragtruth/all"]
    assert pooled["hallucinated"] == 2 and pooled["example"]["precision"] == pytest.approx(2 / 4)
    always = scores["always_hallucinated"]["ragtruth/Summary"]
    # Every answer flagged: recall 1, precision = the share of hallucinated answers (1 of 3).
    assert always["example"]["recall"] == 1.0 and always["example"]["precision"] == pytest.approx(1 / 3)
    # Every non-ignored answer character flagged: char precision = gold characters / scorable characters.
    answers = [r["answer"] for r in data["ragtruth/Summary"]]
    gold = len("the moon is made of green cheese.")
    scorable = sum(len(a) for a in answers) - 3
    assert always["char"]["recall"] == 1.0 and always["char"]["precision"] == pytest.approx(gold / scorable)
    # The lexical fallback catches a sentence with nothing in the context and passes copied ones.
    heuristic = scores["heuristic"]["faithbench"]
    assert [p["predicted"] for p in heuristic["predictions"]] == [True, False]
    assert heuristic["example"]["f1"] == 1.0 and heuristic["char"]["recall"] > 0


@pytest.mark.slow
def test_benchmark_reports_baselines_in_table_json_and_manifest(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "inference"))
    from fact_spans_helpers import build_tiny_fact_model

    from autovalidators.inference.manifest import load_manifest
    from autovalidators.training.config import TaskConfig
    from autovalidators.training.tasks import get_task
    from autovalidators.training.tasks.fact_spans import FactSpansPrepareSection

    models, run = build_tiny_fact_model(tmp_path)
    prepared = tmp_path / "prepared"
    data = groups()
    no_reference = {**span_record(9, "paris is the capital of france.", task_type="QA"), "context": ""}
    write_jsonl(prepared / "heldout" / "ragtruth.jsonl",
                [*data["ragtruth/Summary"], *data["ragtruth/Data2txt"], no_reference])
    write_jsonl(prepared / "heldout" / "faithbench.jsonl", data["faithbench"])
    config = TaskConfig[FactSpansPrepareSection](prepare=FactSpansPrepareSection(out_dir=str(prepared)))
    # The tiny encoder has 128 positions: time one short window only.
    monkeypatch.setattr(bench, "LATENCY_TOKENS", (128,))
    monkeypatch.setattr(bench, "RUNS", {128: 2})

    report = bench.benchmark(get_task("fact_spans"), config, models / "fact_spans", run_dir=run, threads=1,
                             torch_latency=False, update_manifest=True)

    shipped = report["quality"]["int8"]
    for name in bench.BASELINES:
        baseline = report["baselines"][name]
        assert {g: r["examples"] for g, r in baseline.items()} == {g: r["examples"] for g, r in shipped.items()}
        assert [p["id"] for p in baseline["faithbench"]["predictions"]] == \
            [p["id"] for p in shipped["faithbench"]["predictions"]]
    assert report["baselines"]["always_hallucinated"]["faithbench"]["example"]["recall"] == 1.0
    assert shipped["ragtruth/all"]["examples"] == 4 == shipped["ragtruth/Summary"]["examples"] + 1
    json.dumps(report)  # the CLI writes it as JSON
    metrics = load_manifest(models / "fact_spans").metrics["benchmark"]
    assert metrics["baselines"]["heuristic"]["ragtruth/Summary"] == {
        k: report["baselines"]["heuristic"]["ragtruth/Summary"][k] for k in ("examples", "example", "char")}
    table = capsys.readouterr().err
    assert "baseline: always_hallucinated" in table and "baseline: heuristic" in table


def _predictions(flags: list[tuple[bool, bool]], char: tuple[int, int, int] = (5, 1, 1)) -> list[dict]:
    tp, fp, fn = char
    return [{"id": str(i), "gold": gold, "predicted": predicted, "char_tp": tp, "char_fp": fp, "char_fn": fn}
            for i, (gold, predicted) in enumerate(flags)]


def test_paired_bootstrap_of_equal_predictions_is_no_difference():
    rows = _predictions([(True, True), (False, True), (True, False)] * 10)
    result = bench.paired_bootstrap(rows, rows, resamples=200)
    assert result["example_f1"]["difference"] == 0.0 and result["example_f1"]["p_not_better"] == 1.0
    assert result["char_f1"]["low"] == result["char_f1"]["high"] == 0.0


def test_paired_bootstrap_sees_a_clearly_better_model_and_its_interval_holds_the_difference():
    gold = [True, False] * 30
    model = _predictions([(g, g) for g in gold])
    baseline = _predictions([(g, True) for g in gold], char=(5, 5, 1))
    result = bench.paired_bootstrap(model, baseline, resamples=500)
    example = result["example_f1"]
    assert example["difference"] == pytest.approx(1.0 - 2 * 30 / (2 * 30 + 30))
    assert example["low"] <= example["difference"] <= example["high"] and example["p_not_better"] < 0.01
    assert result["char_f1"]["difference"] > 0


def test_paired_bootstrap_refuses_rows_that_do_not_match():
    with pytest.raises(ValueError, match="same rows"):
        bench.paired_bootstrap(_predictions([(True, True)]), _predictions([(True, True), (False, False)]))


def test_paired_bootstrap_gives_no_character_f1_for_response_labels():
    rows = [dict(p, granularity="response") for p in _predictions([(True, True), (False, True)] * 5)]
    assert set(bench.paired_bootstrap(rows, rows, resamples=50)) == {"example_f1"}


def test_sentence_level_scores_count_the_sentence_a_span_touches_not_its_characters():
    # Three sentences; the writer marked "1905" in the second. A validator that flags a few characters of
    # the second and the whole third gets the second sentence right and the third wrong, whatever the
    # characters say; one that flags nothing misses the second.
    from autovalidators.inference.results import FactSpansOutput, Span, SpanLabel
    from autovalidators.training.benchmarks.span_scoring import paired_bootstrap, score_group

    answer = "The line links Moscow and Vladivostok. It was completed in 1905. It is electrified."
    second, third = answer.index("It was"), answer.index("It is")
    record = {"id": "r", "question": "q?", "context": "c.", "answer": answer,
              "spans": [{"start": answer.index("1905"), "end": answer.index("1905") + 4, "label": "HALLUCINATION"}]}

    class Fixed:
        def __init__(self, ranges):
            self.ranges = ranges

        def predict(self, cases):
            spans = tuple(Span(a, b, SpanLabel.HALLUCINATION, 0.9, answer[a:b]) for a, b in self.ranges)
            return [FactSpansOutput(applies=True, hallucinated=bool(spans), hallucination_score=0.9 if spans else 0.0,
                                    precision=0.5, spans=spans) for _ in cases]

    some = score_group(Fixed([(second, second + 6), (third, len(answer))]), [record])
    assert some["sentence"] == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3)}
    assert some["char"]["recall"] == 0.0  # no character of "1905" was marked
    none = score_group(Fixed([]), [record])
    assert none["sentence"]["recall"] == 0.0
    paired = paired_bootstrap(some["predictions"], none["predictions"], resamples=50)
    assert paired["sentence_f1"]["difference"] == pytest.approx(2 / 3)
    assert list(paired) == ["example_f1", "char_f1", "sentence_f1"]
