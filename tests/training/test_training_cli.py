"""`autovalidators train|export|benchmark qa-relevance` end to end on a tiny random encoder."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import autovalidators.training.cli  # noqa: F401  (registers the task commands)
from autovalidators.inference.cli import app
from autovalidators.inference.manifest import load_manifest


@pytest.mark.slow
def test_train_export_benchmark_commands(tiny_encoder, tiny_data, tmp_path, make_config):
    config = make_config(tiny_encoder, tiny_data, tmp_path / "run")
    path = tmp_path / "qa.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    runner = CliRunner()

    trained = runner.invoke(app, ["train", "qa-relevance", "--config", str(path)])
    assert trained.exit_code == 0, trained.output
    again = runner.invoke(app, ["train", "qa-relevance", "--config", str(path)])
    assert again.exit_code == 2 and "--resume" in again.output

    models = tmp_path / "models" / "qa_relevance"
    exported = runner.invoke(app, ["export", "qa-relevance", "--run", str(tmp_path / "run"), "--to", str(models),
                                   "--config", str(path)])
    assert exported.exit_code == 0, exported.output

    report_path = tmp_path / "bench.json"
    benchmarked = runner.invoke(app, ["benchmark", "qa-relevance", "--model", str(models), "--config", str(path),
                                      "--output", str(report_path), "--threads", "1", "--update-manifest"])
    assert benchmarked.exit_code == 0, benchmarked.output
    report = json.loads(report_path.read_text())
    assert set(report["quality"]) == {"int8", "fp32"}
    assert 0.0 <= report["quality"]["int8"]["wikiqa_dev"]["map"] <= 1.0
    assert report["latency"]["int8"]["single_128"]["p50_ms"] > 0 and report["threads"] == 1
    assert "torch_eager" in report["latency"]
    # The numbers the benchmark measured are now in the (still verifiable) manifest.
    assert load_manifest(models).metrics["benchmark"]["quality"] == report["quality"]["int8"]
    # Report and manifest name the command that reproduces them, with this run's config and folders.
    command = f"autovalidators benchmark qa-relevance --config {path} --model {models} --output {report_path}"
    assert report["command"] == command == load_manifest(models).metrics["benchmark"]["command"]


def test_bad_config_is_a_clear_error(tmp_path):
    path = tmp_path / "qa.yaml"
    path.write_text("prepare: {}\ntrain: {epochs: -1}\nbogus: 1\n")
    result = CliRunner().invoke(app, ["train", "qa-relevance", "--config", str(path)])
    assert result.exit_code == 2
    assert "train.epochs" in result.output and "bogus: unknown key" in result.output
