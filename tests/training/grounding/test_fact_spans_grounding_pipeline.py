"""The fact-span model's whole recipe on tiny offline data: cross-encoder train (2 steps) -> export
-> combiner -> models/fact_spans folder -> loaded by the registry -> validated cases -> benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from autovalidators.data_prep.fact_spans.grounding import GroundingPrepareConfig  # noqa: E402
from autovalidators.data_prep.io import write_jsonl  # noqa: E402
from autovalidators.inference.case import Case  # noqa: E402
from autovalidators.inference.manifest import load_manifest  # noqa: E402
from autovalidators.inference.results import SpanLabel  # noqa: E402
from autovalidators.inference.validators import load_validator  # noqa: E402
from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig  # noqa: E402
from autovalidators.training.tiny import QA_FACTS, tiny_words  # noqa: E402

FACTS = [answer for _, answer in QA_FACTS]
NUMBERS = {"1945": "1952", "8849": "9120"}


def _answers(count: int, source: str = "ragtruth") -> list[dict]:
    """Judged answers over 2-fact contexts: supported copies, and copies with a swapped number or
    a borrowed sentence (span-labelled)."""
    rows = []
    for i in range(count):
        first, second = FACTS[i % len(FACTS)], FACTS[(i + 3) % len(FACTS)]
        context = f"{first}. {second}."
        kind = i % 3
        if kind == 0:
            text, unsupported = f"{first.capitalize()}.", []
        elif kind == 1:
            borrowed = FACTS[(i + 5) % len(FACTS)]
            text = f"{first.capitalize()}. {borrowed.capitalize()}."
            start = text.index(borrowed.capitalize())
            unsupported = [[start, start + len(borrowed)]]
        else:
            swapped = first
            for old, new in NUMBERS.items():
                swapped = swapped.replace(old, new)
            if swapped == first:
                swapped = first + " in 1700"
            text = f"{swapped.capitalize()}."
            unsupported = [[0, len(swapped)]]
        rows.append({"id": f"{source}-{i}", "source": source, "group": f"g{i}", "granularity": "span",
                     "context": context, "text": text, "label": 0 if unsupported else 1,
                     "unsupported": unsupported, "language": "en", "question": "what is true"})
    return rows


def _pairs(answers: list[dict]) -> list[dict]:
    return [{"evidence": a["context"], "claim": a["text"], "label": a["label"], "source": a["source"],
             "group": a["group"]} for a in answers]


def _span_record(answer: dict) -> dict:
    spans = [{"start": s, "end": e, "label": "HALLUCINATION"} for s, e in answer["unsupported"]]
    if not spans:
        spans = [{"start": 0, "end": len(answer["text"]), "label": "FACT"}]
    elif answer["unsupported"][0][0] > 0:
        spans.insert(0, {"start": 0, "end": answer["unsupported"][0][0] - 1, "label": "FACT"})
    return {"id": answer["id"], "context": answer["context"], "question": answer["question"], "answer": answer["text"],
            "spans": spans, "ignored": [], "facts": [], "source": "ragtruth", "group": answer["group"],
            "language": "en", "task_type": "Summary", "origin": "human", "grounding_usable": True,
            "provenance": {"dataset": "tiny", "file": "tiny", "row": "1", "licence": "MIT"}, "meta": {}}


@pytest.fixture(scope="module")
def grounding_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("grounding")
    train, dev, test = _answers(48), _answers(24), _answers(12)
    write_jsonl(folder / "answers" / "train.jsonl", train)
    write_jsonl(folder / "answers" / "dev.jsonl", dev)
    write_jsonl(folder / "answers" / "test.jsonl", [dict(a, source="xsumfaith") for a in test])
    write_jsonl(folder / "pairs" / "train.jsonl", _pairs(train))
    write_jsonl(folder / "pairs" / "dev.jsonl", _pairs(dev))
    write_jsonl(folder / "heldout" / "ragtruth.jsonl", [_span_record(a) for a in _answers(9)])
    return folder


@pytest.fixture(scope="module")
def shipped_folder(tiny_encoder, grounding_data, tmp_path_factory) -> Path:
    from autovalidators.training.grounding.combiner import CombinerConfig, train_combiner
    from autovalidators.training.grounding.export import export_combiner
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task
    from autovalidators.training.trainer import train

    root = tmp_path_factory.mktemp("runs")
    spec = get_task("grounding")
    config = TaskConfig[GroundingPrepareConfig](
        prepare=GroundingPrepareConfig(out_dir=str(grounding_data)),
        train=TrainConfig(base_model=str(tiny_encoder), max_length=48, batch_size=8, eval_batch_size=16, max_steps=2,
                          eval_every=1, train_file=str(grounding_data / "pairs" / "train.jsonl"),
                          dev_file=str(grounding_data / "pairs" / "dev.jsonl"), output_dir=str(root / "grounding"),
                          cpu_threads=1, log_every=1, learning_rate=1e-3,
                          early_stopping={"patience": 0, "metric": "roc_auc", "mode": "max"}),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=False))
    train(spec, config.train)
    export(spec, root / "grounding", root / "grounding_export", config)
    summary = train_combiner(CombinerConfig(
        data_dir=str(grounding_data), cross_encoder=str(root / "grounding_export"),
        trees={"n_estimators": 20, "learning_rate": 0.3, "max_depth": 2, "subsample": 1.0, "min_samples_leaf": 2},
        threshold_sources=["ragtruth"], min_task_answers=5, output_dir=str(root / "combiner")))
    assert summary["onnx_parity_max_abs"] <= 1e-4
    models = root / "models"
    export_combiner(root / "combiner", models / "fact_spans")
    return models


def test_exported_folder_is_verified_and_describes_itself(shipped_folder):
    manifest = load_manifest(shipped_folder / "fact_spans")
    assert manifest.task == "fact_spans_grounding"
    assert {"model.onnx", "tokenizer.json", "combiner.onnx"} <= set(manifest.files)
    assert "hallucination" in manifest.thresholds
    assert manifest.training["span_mode"] in ("words", "phrases", "sentence")
    if manifest.training["span_mode"] == "words":  # dev chose the token narrower: it ships beside the combiner
        assert manifest.training["narrower"]["file"] in manifest.files
        assert 0 < manifest.training["narrower"]["cut"] < 1
    assert set(manifest.training["answer_calibration"]) == {"max_logit", "log_claims", "intercept"}
    assert manifest.fallback_languages == ["ru"]


def test_the_registry_serves_it_and_outputs_are_consistent(shipped_folder):
    validator = load_validator("fact_spans", shipped_folder)
    assert validator.info.kind == "onnx"
    cases = [
        Case(id="a", question="q", context=["paris is the capital of france. bees make honey from nectar."],
             answer="Thank you for asking! Paris is the capital of France. The war ended in 1952."),
        Case(id="b", question="q", context=[""], answer="Paris is the capital."),
        Case(id="c", question="q", context=["paris is the capital of france."], answer=""),
        Case(id="d", question="вопрос", context=["Париж - столица Франции."], answer="Париж - столица Германии."),
        Case(id="e", question="q", context=["x " * 60_000], answer="Thank you! Have a great day!"),
    ]
    outputs = validator.predict(cases)
    assert len(outputs) == len(cases)
    first = outputs[0]
    assert first.applies and first.source == "onnx"
    assert first.spans[0].label is SpanLabel.NOISE
    assert all(0 <= s.start < s.end <= len(cases[0].answer) for s in first.spans)
    assert first.hallucinated == (first.hallucination_score >= 0.5)
    assert not outputs[1].applies and not outputs[2].applies
    assert outputs[3].source == "heuristic"  # Russian goes to the lexical fallback
    assert outputs[4].applies and not outputs[4].hallucinated and outputs[4].precision == 1.0  # filler only


def test_benchmark_prints_model_and_baselines_on_the_same_rows(shipped_folder, tiny_encoder):
    from autovalidators.training.benchmarks.grounding import benchmark_grounding

    folder = shipped_folder / "fact_spans"
    report = benchmark_grounding(folder, load_manifest(folder), torch_latency=False, threads=1, latency_tokens=(32,))
    model = report["quality"]["int8"]
    assert model["ragtruth/Summary"]["examples"] == 9
    for baseline in ("always_hallucinated", "heuristic"):
        assert report["baselines"][baseline]["ragtruth/Summary"]["examples"] == 9
    assert report["baselines"]["always_hallucinated"]["ragtruth/all"]["example"]["recall"] == 1.0
    assert "xsumfaith test" in model and "char" in model["xsumfaith test"]
    assert report["latency"]["per_case_validate"]["cases"] == 9
    versus = report["versus_heuristic"]["ragtruth/Summary"]
    assert set(versus) == {"example_f1", "char_f1", "sentence_f1"}
    heuristic = report["baselines"]["heuristic"]["ragtruth/Summary"]
    assert versus["example_f1"]["difference"] == pytest.approx(
        model["ragtruth/Summary"]["example"]["f1"] - heuristic["example"]["f1"])
    assert versus["example_f1"]["low"] <= versus["example_f1"]["high"]
    json.dumps(report)  # the report is plain JSON
