"""Tiny synthetic benchmark JSONs in the shapes the benchmark commands write (see reporting/adapters.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from autovalidators.inference.reporting.schema import ReportConfig

# Text that must come out escaped: a tag, an attribute breaker and an ampersand.
NASTY = '<script>alert("x")</script> & <b onclick="y">bold</b>'


def _binary_predictions(rng: random.Random, n: int, language: str) -> list[dict]:
    out = []
    for i in range(n):
        label = int(rng.random() < 0.4)
        score = min(1.0, max(0.0, rng.gauss(0.7 if label else 0.3, 0.2)))
        out.append({"id": f"{language}-{i}", "label": label, "score": round(score, 4), "language": language,
                    "question": f"question {i}?", "answer": f"answer {i} {NASTY if i == 0 else ''}"})
    return out


def qa_relevance_json(rng: random.Random) -> dict:
    test = {"accuracy": 0.8125, "precision": 0.75, "recall": 0.6923076923076923, "f1": 0.72,
            "roc_auc": 0.8811, "threshold": 0.4375, "pairs": 160,
            "by_language": {"en": {"precision": 0.8, "recall": 0.7, "f1": 0.7466666666666667, "pairs": 90},
                            "ru": {"precision": 0.7, "recall": 0.68, "f1": 0.6898550724637681, "pairs": 70}}}
    fp32 = {**test, "precision": 0.7517, "f1": 0.7207}
    return {
        "task": "qa_relevance", "model_dir": "models/qa_relevance", "model_version": "qa-1",
        "model_sha256": "ab" * 32, "threshold": 0.4375,
        "command": ["autovalidators", "benchmark", "qa-relevance", "--output", "x.json"],
        "data": {"test": "prepared/qa_relevance/definitely_missing.jsonl"},
        "quality": {"int8": {"test": test, "wikiqa_dev": {"map": 0.71, "mrr": 0.72, "roc_auc": 0.8}},
                    "fp32": {"test": fp32}},
        "latency": {"int8": {"single_128": {"p50_ms": 4.25, "p95_ms": 5.5, "runs": 100},
                             "batch_32x128": {"p50_ms": 60.0, "p95_ms": 71.0, "runs": 20}},
                    "fp32": {"single_128": {"p50_ms": 7.5, "p95_ms": 9.0},
                             "batch_32x128": {"p50_ms": 110.0, "p95_ms": 130.0}},
                    "torch_eager": {"single_128": {"p50_ms": 12.0, "p95_ms": 15.0},
                                    "batch_32x128": {"p50_ms": 180.0, "p95_ms": 200.0}}},
        "predictions": _binary_predictions(rng, 60, "en") + _binary_predictions(rng, 40, "ru"),
    }


def _label_report(labels, base: float) -> dict:
    per_label = {label: {"precision": base + i / 10, "recall": base - 0.05 + i / 20, "f1": base + 0.01 + i / 15,
                         "roc_auc": 0.9, "positives": 20, "known": 100, "threshold": 0.3 + i / 10}
                 for i, label in enumerate(labels)}
    return {"labels": per_label, "macro_f1": base + 0.05, "macro_roc_auc": 0.9, "macro_labels": list(labels)}


def tone_json(rng: random.Random, data_dir: Path) -> dict:
    """The shape `training/benchmarks/tone.py` writes."""
    labels = ("toxicity", "insult", "threat")
    quality = {"test_all": _label_report(labels, 0.61),
               "test_by_source": {"olid": _label_report(labels, 0.55), "ru_toxic": _label_report(labels[:1], 0.7)},
               "olid_level_a": {"examples": 50, "off": 17, "rule": "OFF if any ...",
                                "any_abusive": {"macro_f1": 0.7311, "f1_not": 0.8, "f1_off": 0.66, "accuracy": 0.75},
                                "toxicity_only": {"macro_f1": 0.7011, "f1_not": 0.79, "f1_off": 0.61, "accuracy": 0.74},
                                "macro_f1": 0.7311},
               "ru_toxic_val": {"precision": 0.4, "recall": 0.35, "f1": 0.3733, "roc_auc": 0.7, "positives": 30,
                                "known": 120, "threshold": 0.3}}
    predictions = []
    for i in range(80):
        gold = {label: int(rng.random() < 0.3) for label in labels}
        gold["threat"] = None if i % 3 == 0 else gold["threat"]  # a source that never labels threats
        scores = {label: round(min(1, max(0, rng.gauss(0.65 if gold[label] else 0.25, 0.2))), 4) for label in labels}
        predictions.append({"set": "test" if i < 60 else "olid", "id": f"t{i}", "source": "olid",
                            "text": f"text {i} {NASTY}", "gold": gold, "scores": scores})
    for name in ("test.jsonl", "benchmark_olid.jsonl"):
        (data_dir / name).write_text(json.dumps({"id": "x", "text": "y"}) + "\n", encoding="utf-8")
    return {"task": "tone", "model_dir": "models/tone", "model_version": "tone-1", "model_sha256": "cd" * 32,
            "thresholds": {label: 0.3 + i / 10 for i, label in enumerate(labels)}, "threads": 2,
            "data": {"test": 60, "olid": 20}, "data_dir": str(data_dir),
            "quality": {"int8": quality, "fp32": {"ru_toxic_val": {**quality["ru_toxic_val"], "f1": 0.3701}}},
            "latency": {"int8": {"single_short": {"p50_ms": 3.0, "p95_ms": 4.0, "mean_ms": 3.1, "runs": 100},
                                 "batch_32_short": {"p50_ms": 30.0, "p95_ms": 34.0, "mean_ms": 31.0, "runs": 20}}},
            "predictions": predictions}


def fact_spans_json(rng: random.Random, data_dir: Path) -> dict:
    """The shape `training/benchmarks/fact_spans.py` writes; texts live in `<data_dir>/heldout/*.jsonl`."""
    heldout = data_dir / "heldout"
    heldout.mkdir(parents=True, exist_ok=True)
    records, predictions = [], []
    for i in range(30):
        answer = f"The bridge opened in {1900 + i} and cost {i} million & more <i>."
        gold = [[21, 25]] if i % 2 else []
        predicted = [[21, 25]] if i % 3 == 0 else []
        records.append({"id": f"f{i}", "answer": answer, "context": "The bridge opened in 1901.",
                        "question": "When?", "language": "en"})
        predictions.append({"id": f"f{i}", "gold": bool(gold), "score": 0.9 if predicted else 0.1 + i / 100,
                            "predicted": bool(predicted), "precision": 0.8, "recall": 0.5,
                            "gold_spans": gold, "predicted_spans": predicted})
    (heldout / "ragtruth.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    group = {"examples": 30, "hallucinated": 15, "example": {"precision": 0.5, "recall": 0.3333, "f1": 0.4},
             "char": {"precision": 0.5, "recall": 0.3333333333333333, "f1": 0.4}, "predictions": predictions}
    fp32 = {**group, "example": {"precision": 0.52, "recall": 0.3333, "f1": 0.4062}}
    latency = {str(n): {"p50_ms": n / 10, "p95_ms": n / 8, "mean_ms": n / 9, "runs": 20} for n in (128, 256, 512)}
    return {"task": "fact_spans", "model_dir": "models/fact_spans", "model_version": "fs-1",
            "model_sha256": "ef" * 32, "threshold": 0.5, "data": str(heldout),
            "excluded": {"ragtruth/QA": "150 rows without a reference"},
            "quality": {"int8": {"ragtruth/Summary": group}, "fp32": {"ragtruth/Summary": fp32}},
            "latency": {"onnx_int8": latency, "onnx_fp32": latency,
                        "torch_eager": {k: {**v, "p50_ms": v["p50_ms"] * 3} for k, v in latency.items()}}}


def write_benchmarks(folder: Path) -> Path:
    """qa_relevance, tone and fact_spans JSONs in `folder` (obedience and gate absent)."""
    rng = random.Random(7)
    folder.mkdir(parents=True, exist_ok=True)
    data_dir = folder.parent / "data"
    data_dir.mkdir(exist_ok=True)
    for name, data in (("qa_relevance", qa_relevance_json(rng)), ("tone", tone_json(rng, data_dir)),
                       ("fact_spans", fact_spans_json(rng, data_dir))):
        (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


@pytest.fixture
def benchmarks(tmp_path: Path) -> Path:
    return write_benchmarks(tmp_path / "benchmarks")


@pytest.fixture(scope="session")
def shared_benchmarks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Read-only: the same JSONs, written once for the tests that only read them."""
    return write_benchmarks(tmp_path_factory.mktemp("shared") / "benchmarks")


@pytest.fixture
def nasty() -> str:
    return NASTY


@pytest.fixture(scope="session")
def report_config() -> ReportConfig:
    from autovalidators.inference.config import CONFIG_DIR, load_config

    return load_config(CONFIG_DIR / "report.yaml", ReportConfig)


@pytest.fixture
def qa_relevance_benchmark() -> dict:
    """One qa_relevance benchmark JSON (a model folder's shipped benchmark.json in some tests)."""
    return qa_relevance_json(random.Random(1))
