"""The load check: counts, percentiles and errors, and `autovalidators benchmark serve` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from autovalidators.inference import cli  # noqa: E402
from autovalidators.inference.serving.loadtest import load_case_dicts, run_load  # noqa: E402
from autovalidators.inference.serving.config import ServeConfig  # noqa: E402
from autovalidators.inference.serving.app import create_app, serve_in_thread  # noqa: E402
from autovalidators.inference.validators.heuristic import HEURISTIC_VERSION  # noqa: E402


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):
    config = ServeConfig(models_dir=str(tmp_path_factory.mktemp("load") / "no-models"))
    with serve_in_thread(create_app(config)) as url:
        yield url


def test_run_load_counts_requests_and_orders_percentiles(base_url: str) -> None:
    cases = load_case_dicts()
    report = run_load(base_url, cases, clients=4, seconds=0.8)
    assert report.errors == 0 and report.requests > 0
    assert report.status_counts == {"200": report.requests}
    assert report.cases == report.requests
    lat = report.latency_ms
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert report.requests_per_s == pytest.approx(report.requests / report.seconds, rel=1e-3)
    assert report.models == {name: f"heuristic {HEURISTIC_VERSION}" for name in ("fact_spans", "qa_relevance", "tone")}


def test_run_load_batches(base_url: str) -> None:
    report = run_load(base_url, load_case_dicts(), clients=2, seconds=0.5, batch_size=3)
    assert report.errors == 0 and report.cases == 3 * report.requests


def test_refused_requests_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LOAD_KEY", "k")
    config = ServeConfig(models_dir=str(tmp_path), api_key_env="TEST_LOAD_KEY")
    with serve_in_thread(create_app(config)) as url:
        report = run_load(url, load_case_dicts(), clients=2, seconds=0.3)  # no key sent
    assert report.requests > 0 and report.errors == report.requests
    assert set(report.status_counts) == {"401"} and "unauthorized" in report.error_samples[0]


def test_bad_case_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": "1", "answer": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="question"):
        load_case_dicts(path)
    with pytest.raises(ValueError, match="no such file"):
        load_case_dicts(tmp_path / "missing.jsonl")


def test_benchmark_serve_command_starts_a_server_and_writes_json(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(f"models_dir: {tmp_path / 'no-models'}\n", encoding="utf-8")
    out = tmp_path / "serve.json"
    cli._register_commands()
    result = CliRunner().invoke(cli.app, ["benchmark", "serve", "--clients", "3", "--seconds", "1",
                                          "--config", str(config), "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["clients"] == 3 and report["errors"] == 0 and report["requests"] > 0
    assert report["url"].startswith("http://127.0.0.1:")
