"""The fact_spans task: label alignment, window choice, metrics, training smoke test, export, benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from autovalidators.inference.results import FactSpansOutput, Span, SpanLabel
from autovalidators.training.tasks import get_task
from autovalidators.training.tasks.base import IGNORE_INDEX
from autovalidators.training.tasks.fact_spans import LABEL_IDS, token_labels
from autovalidators.training.tiny import build_tokenizer

SPEC = get_task("fact_spans")
FACT, NOISE, HAL = LABEL_IDS["FACT"], LABEL_IDS["NOISE"], LABEL_IDS["HALLUCINATION"]
WORDS = ["paris", "is", "the", "capital", "of", "france", "sure", "nile", "egypt", "flows", "through",
         "париж", "столица", "франции", "конечно"]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def record(answer: str, spans: list[tuple[int, int, str]], ignored=(), context="paris is the capital of france.",
           question="what is the capital") -> dict:
    return {"id": "x", "question": question, "context": context, "answer": answer,
            "spans": [{"start": s, "end": e, "label": label} for s, e, label in spans],
            "ignored": [{"start": s, "end": e} for s, e in ignored]}


def answer_labels(tokenizer, rec: dict, max_length: int = 64) -> tuple[list[str], list[int], dict]:
    features = SPEC.encode(tokenizer, rec, max_length)
    start = features["token_type_ids"].index(1)
    ids = features["input_ids"][start:-1]
    return [tokenizer.id_to_token(i) for i in ids], features["labels"][start:-1], features


def test_labels_only_on_answer_tokens_with_noise_and_hallucination(tokenizer):
    answer = "sure! paris is the capital of egypt."
    rec = record(answer, [(0, 5, "NOISE"), (6, 29, "FACT"), (30, 36, "HALLUCINATION")])
    tokens, labels, features = answer_labels(tokenizer, rec)
    assert tokens == ["sure", "!", "paris", "is", "the", "capital", "of", "egypt", "."]
    assert labels == [NOISE, NOISE, FACT, FACT, FACT, FACT, FACT, HAL, HAL]
    first_answer = features["token_type_ids"].index(1)
    assert set(features["labels"][:first_answer]) == {IGNORE_INDEX}  # question, context, specials
    assert features["labels"][-1] == IGNORE_INDEX  # the final [SEP]
    assert len(features["labels"]) == len(features["input_ids"]) == len(features["attention_mask"])


def test_ignored_ranges_are_left_out(tokenizer):
    answer = "paris is the capital of egypt."
    rec = record(answer, [(0, 23, "FACT"), (24, 30, "HALLUCINATION")], ignored=[(6, 8)])
    tokens, labels, _ = answer_labels(tokenizer, rec)
    assert tokens[1] == "is" and labels[1] == IGNORE_INDEX
    assert labels[0] == FACT and labels[-2:] == [HAL, HAL]


def test_cyrillic_answer_aligns_by_characters(tokenizer):
    answer = "конечно! париж столица франции."
    rec = record(answer, [(0, 8, "NOISE"), (9, 14, "FACT"), (15, 31, "HALLUCINATION")], context="париж столица франции.")
    tokens, labels, _ = answer_labels(tokenizer, rec)
    assert tokens == ["конечно", "!", "париж", "столица", "франции", "."]
    assert labels == [NOISE, NOISE, FACT, HAL, HAL, HAL]
    offsets = token_labels(rec, [(0, 7), (9, 14), (15, 22)])
    assert offsets == [NOISE, FACT, HAL]


def test_training_window_is_the_one_holding_the_answer(tokenizer):
    filler = "the nile flows through egypt. " * 15
    rec = record("paris is the capital of france.", [(0, 31, "FACT")], context=filler + "paris is the capital of france.")
    features = SPEC.encode(tokenizer, rec, 64)
    first_answer = features["token_type_ids"].index(1)
    context_tokens = [tokenizer.id_to_token(i) for i in features["input_ids"][:first_answer]]
    assert "paris" in context_tokens and "capital" in context_tokens
    assert len(features["input_ids"]) <= 64


def _logits_for(labels: list[int], hallucinated_prob: float) -> np.ndarray:
    logits = np.full((len(labels), 3), -4.0)
    for row, label in enumerate(labels):
        logits[row, label if label != IGNORE_INDEX else FACT] = 4.0
    if hallucinated_prob:
        logits[-1] = np.log([1 - hallucinated_prob, 1e-9, hallucinated_prob])
    return logits


def test_metrics_and_threshold(tokenizer):
    good = record("paris is the capital of france.", [(0, 31, "FACT")])
    bad = record("paris is the capital of egypt.", [(0, 23, "FACT"), (24, 30, "HALLUCINATION")])
    records = [good, bad, dict(good), dict(bad)]
    features = [SPEC.encode(tokenizer, r, 64) for r in records]
    perfect = np.empty(len(records), dtype=object)
    perfect[:] = [_logits_for(f["labels"], 0.0) for f in features]
    result = SPEC.metrics(perfect, records)
    assert result["example_f1"] == 1.0 and result["token_f1"] == 1.0 and result["entity_f1"] == 1.0
    # Everything FACT: no hallucination found anywhere.
    blind = np.empty(len(records), dtype=object)
    blind[:] = [np.tile([4.0, -4.0, -4.0], (len(f["labels"]), 1)) for f in features]
    result = SPEC.metrics(blind, records)
    assert result["example_f1"] == 0.0 and result["token_recall"] == 0.0 and result["example_auc"] == 0.5
    threshold = SPEC.thresholds(perfect, records, SimpleNamespace(threshold_rule="best_f1", target_precision=0.9))
    assert 0.0 < threshold["hallucination"] <= 1.0
    with pytest.raises(ValueError, match="encoded"):
        SPEC.metrics(perfect[:1], [record("paris is the capital of france.", [(0, 31, "FACT")])])


@pytest.mark.slow
def test_two_batch_training_and_export_parity(tmp_path):
    pytest.importorskip("torch")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "inference"))
    from fact_spans_helpers import build_tiny_fact_model

    from autovalidators.inference.manifest import load_manifest

    models, run = build_tiny_fact_model(tmp_path)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert {"example_f1", "token_f1", "entity_f1", "example_auc"} <= set(metrics[-1])
    manifest = load_manifest(models / "fact_spans")
    assert manifest.labels == ["FACT", "NOISE", "HALLUCINATION"] and "hallucination" in manifest.thresholds
    assert manifest.metrics["parity_fp32_max_abs_diff"] <= 1e-4
    assert manifest.window.max_length == 64 and manifest.window.stride == SPEC.window_stride
    assert "P(FACT) = max over windows" in manifest.window.aggregation
    report = json.loads((run / "onnx" / "export_report.json").read_text())
    assert report["parity_fp32"]["passed"] and "example_f1" in report["dev_int8"]


def test_benchmark_counts_examples_and_characters():
    from autovalidators.training.benchmarks.fact_spans import score_group

    records = [record("paris is the capital of egypt.", [(0, 23, "FACT"), (24, 30, "HALLUCINATION")]),
               record("paris is the capital of france.", [(0, 31, "FACT")], ignored=[(0, 5)])]
    outputs = [FactSpansOutput(True, True, 0.9, spans=(Span(21, 30, SpanLabel.HALLUCINATION, 0.9),)),
               FactSpansOutput(True, True, 0.8, spans=(Span(0, 8, SpanLabel.HALLUCINATION, 0.8),))]
    fake = SimpleNamespace(predict=lambda cases: outputs[: len(cases)])
    result = score_group(fake, records)
    assert result["example"] == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3)}
    # gold [24, 30) = 6 chars; predicted [21, 30) in the first (3 false) and [5, 8) in the second
    # (chars 0-4 are ignored): tp 6, fp 3 + 3.
    assert result["char"]["recall"] == 1.0 and result["char"]["precision"] == pytest.approx(0.5)
    assert [p["gold"] for p in result["predictions"]] == [True, False]


def test_prepare_mixes_human_rows_and_writes_the_human_dev_file(tmp_path, monkeypatch):
    from autovalidators.data_prep.fact_spans import build
    from autovalidators.data_prep.io import read_jsonl, write_jsonl
    from autovalidators.training.tasks.fact_spans import FactSpansPrepareSection, prepare

    def row(i: int, origin: str, usable: bool = True) -> dict:
        return {**record("paris", []), "id": f"{origin}-{i}", "origin": origin, "grounding_usable": usable}

    def fake_build(config, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / "train.jsonl", [row(0, "human"), row(1, "human", usable=False)]
                    + [row(i, "synthetic") for i in range(2, 12)])
        write_jsonl(out / "dev.jsonl", [row(20, "human"), row(21, "synthetic")])
        write_jsonl(out / "test.jsonl", [row(30, "human"), row(31, "human", usable=False), row(32, "counterfactual")])
        return SimpleNamespace(card={"splits": {}})

    monkeypatch.setattr(build, "prepare", fake_build)
    config = FactSpansPrepareSection.model_validate({
        "out_dir": str(tmp_path), "ragtruth": {"subset_path": None}, "faithbench": {"path": None}, "reading": [],
        "mix": {"synthetic": 4, "human_repeats": 3, "file": "mix.jsonl", "human_dev_file": "human_dev.jsonl"}})
    card = prepare(config)
    mixed = [r["id"] for r in read_jsonl(tmp_path / "mix.jsonl")]
    assert mixed.count("human-0") == 3 and "human-1" not in mixed  # unusable human rows stay out
    assert sum(i.startswith("synthetic") for i in mixed) == 4
    assert [r["id"] for r in read_jsonl(tmp_path / "human_dev.jsonl")] == ["human-20", "human-30"]
    assert any("human_dev.jsonl: 2" in note for note in card["notes"])
