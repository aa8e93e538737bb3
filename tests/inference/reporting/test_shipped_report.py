"""The report on a fresh clone: each shipped model's own benchmark.json fills its section, with
no prepared data and no out/benchmarks; `--run` without prepared data names the prepare command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autovalidators.inference.manifest import write_manifest
from autovalidators.inference.reporting.build import build_report, read_section, run_benchmarks
from autovalidators.inference.reporting.schema import SectionConfig
from autovalidators.inference.validators import DEFAULT_MODELS_DIR

FIELDS = {"name": "qa_relevance", "task": "qa_relevance", "version": "qa-1", "base_model": "tiny",
          "labels": ["irrelevant", "relevant"], "thresholds": {"relevant": 0.4375}, "window": {"max_length": 128}}


def fake_models(tmp_path: Path, benchmark: dict) -> Path:
    folder = tmp_path / "models" / "qa_relevance"
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"onnx")
    (folder / "tokenizer.json").write_text("{}")
    manifest = write_manifest(folder, FIELDS)
    (folder / "benchmark.json").write_text(json.dumps({**benchmark, "model_sha256": manifest.model_sha256}))
    return folder.parent


def test_a_model_without_a_local_benchmark_shows_the_one_it_ships_with(report_config, qa_relevance_benchmark,
                                                                       tmp_path):
    models = fake_models(tmp_path, qa_relevance_benchmark)
    config = report_config.model_copy(update={"models_dir": str(models)})
    section = read_section("qa_relevance", config, tmp_path / "empty")
    assert section.status == "benchmarked"
    assert section.provenance.benchmark_file == str(models / "qa_relevance" / "benchmark.json")
    assert any(n.startswith("numbers shipped with the model") for n in section.notes)
    assert {r.group for r in section.metrics} >= {"int8 / test"} and section.scored and section.latency
    # A benchmark measured on another model is shown, but said to be stale.
    (models / "qa_relevance" / "model.onnx").write_bytes(b"a retrained model")
    write_manifest(models / "qa_relevance", FIELDS)
    stale = read_section("qa_relevance", config, tmp_path / "empty")
    assert any("these numbers are not this model's" in n for n in stale.notes)


def test_run_without_prepared_data_says_which_prepare_to_run(report_config, qa_relevance_benchmark, tmp_path):
    models = fake_models(tmp_path, qa_relevance_benchmark)
    config = report_config.model_copy(update={"models_dir": str(models), "sections": {
        "qa_relevance": SectionConfig(file="qa_relevance.json", needs_model="qa_relevance",
                                      command="autovalidators benchmark no-such-benchmark",
                                      needs_data=[str(tmp_path / "prepared" / "qa_relevance")],
                                      prepare="autovalidators prepare qa-relevance")}})
    outcomes = run_benchmarks(config, tmp_path / "benchmarks", tmp_path / "logs")
    assert outcomes["qa_relevance"] == (
        f"skipped: no prepared data at {tmp_path / 'prepared' / 'qa_relevance'}; run `autovalidators prepare "
        "qa-relevance` first, then report --run again (the report shows the numbers shipped with the model)")
    assert not (tmp_path / "logs" / "qa_relevance.log").exists()  # nothing was run
    report = build_report(config, tmp_path / "benchmarks", "run", "test", outcomes)
    assert report.sections[0].status == "benchmarked"


@pytest.mark.parametrize("name", [n for n in ("fact_spans", "qa_relevance", "tone")
                                  if (DEFAULT_MODELS_DIR / n / "manifest.json").is_file()])
def test_every_shipped_model_ships_its_numbers(report_config, tmp_path, name):
    """A fresh clone: no out/benchmarks, no prepared data; the report still has P/R/F1, curves and latency."""
    config = report_config.model_copy(update={"models_dir": str(DEFAULT_MODELS_DIR)})
    section = read_section(name, config, tmp_path / "no-benchmarks")
    assert section.status == "benchmarked", section.message
    assert not any("not this model's" in n for n in section.notes), section.notes
    assert any(r.f1 is not None for r in section.metrics)
    assert section.scored and max(len(s.scores) for s in section.scored) >= 100  # curves, not a handful
    assert section.latency and section.provenance.command_recorded
    assert (DEFAULT_MODELS_DIR / name / "benchmark.json").stat().st_size < 2_000_000
