"""`benchmark <task> --update-manifest` also writes models/<name>/benchmark.json: compact, outside
the manifest's sha256 set, so the model folder still verifies and a later benchmark can replace it."""

from __future__ import annotations

import json
from pathlib import Path

from autovalidators.inference.manifest import BENCHMARK_NAME, load_manifest, update_manifest, write_manifest
from autovalidators.training.benchmarks.common import compact_report, write_shipped_benchmark

FIELDS = {"name": "qa_relevance", "task": "qa_relevance", "version": "t1", "base_model": "tiny",
          "labels": ["irrelevant", "relevant"], "thresholds": {"relevant": 0.5}, "window": {"max_length": 128}}


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "qa_relevance"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not really onnx")
    (folder / "tokenizer.json").write_text("{}")
    write_manifest(folder, FIELDS)
    return folder


def report(n: int, data_file: Path) -> dict:
    predictions = [{"id": str(i), "set": "test", "label": i % 2, "score": i / n, "question": "q?",
                    "answer": "a" * 1000} for i in range(n)]
    return {"task": "qa_relevance", "command": "autovalidators benchmark qa-relevance --output x.json",
            "data": {"test": str(data_file)},
            "quality": {"int8": {"test": {"precision": 0.5, "recall": 0.25, "f1": 0.3333, "pairs": n}}},
            "latency": {"int8": {"single_128": {"p50_ms": 9.5, "p95_ms": 12.0}}},
            "predictions": predictions}


def test_compact_report_keeps_every_number_and_thins_predictions(tmp_path):
    full = report(5000, tmp_path / "test.jsonl")
    compact = compact_report(full, limit=1000, text_chars=50)
    assert compact["quality"] == full["quality"] and compact["latency"] == full["latency"]
    rows = compact["predictions"]
    assert len(rows) == 1000 and rows[0]["id"] == "0" and rows[1]["id"] == "5"  # evenly spaced
    assert len(rows[0]["answer"]) <= 52 and rows[0]["answer"].endswith("…")
    assert compact["compact"]["predictions"] == {"predictions": {"kept": 1000, "of": 5000}}
    assert len(full["predictions"]) == 5000  # the report the benchmark writes is untouched


def test_shipped_benchmark_stays_out_of_the_sha256_set(tmp_path):
    folder = model_folder(tmp_path)
    data = tmp_path / "test.jsonl"
    data.write_text('{"id": "0"}\n')
    path = write_shipped_benchmark(folder, report(3000, data), "qa_relevance")
    assert path == folder / BENCHMARK_NAME
    shipped = json.loads(path.read_text())
    assert len(shipped["predictions"]) <= 2000 and shipped["data_sha256"]["test"]
    assert shipped["model_sha256"] == load_manifest(folder).model_sha256
    assert path.stat().st_size < 1_500_000
    # The folder verifies with it, and a manifest rewrite (benchmark metrics) does not hash it.
    manifest = update_manifest(folder, metrics={"benchmark": {"command": shipped["command"]}})
    assert BENCHMARK_NAME not in manifest.files
    path.write_text(path.read_text().replace("0.3333", "0.9999"))  # re-benchmarked later
    load_manifest(folder)  # still verifies


def test_a_new_export_replaces_the_old_models_benchmark(tmp_path):
    from autovalidators.training.export import _clean_target

    folder = model_folder(tmp_path)
    (folder / BENCHMARK_NAME).write_text("{}")
    _clean_target(folder)  # what export does before writing: the old model's numbers go with it
    assert not any(folder.iterdir())
