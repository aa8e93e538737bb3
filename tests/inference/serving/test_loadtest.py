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


def test_shed_requests_are_counted_apart_from_errors(tmp_path: Path) -> None:
    # A one-case queue and one slow executor: most of 6 clients' requests are shed with 503.
    import time

    from autovalidators.inference import Gate
    from autovalidators.inference.serving.config import ServeLimits
    from autovalidators.inference.validators.heuristic import HeuristicTone

    class SlowTone(HeuristicTone):
        def predict(self, cases):
            time.sleep(0.2)
            return super().predict(cases)

    config = ServeConfig(models_dir=str(tmp_path), executors=1, limits=ServeLimits(max_queue_cases=1))
    gate = Gate(models_dir=tmp_path, instances={"tone": SlowTone()})
    with serve_in_thread(create_app(config, gate=gate)) as url:
        report = run_load(url, load_case_dicts(), clients=6, seconds=1.0, honor_retry_after=False)
    assert report.shed > 0 and report.admitted > 0 and report.errors == 0 and report.timeouts == 0
    assert report.shed + report.admitted == report.requests
    # Refused before the 200 ms of work. The median, not p99: on CI's 2 cores the other test worker
    # can stall this process for a second (a fresh-clone run saw one shed request at 1.3 s, p99 of
    # a handful), which says nothing about admission control.
    assert report.shed_latency_ms["p50"] < 200


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
    result = CliRunner().invoke(cli.app, ["benchmark", "serve", "--clients", "1,3", "--seconds", "1",
                                          "--config", str(config), "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["validate_cases_per_s"] > 0  # the single-process reference, measured first
    assert [level["clients"] for level in report["levels"]] == [1, 3]
    for level in report["levels"]:
        assert level["errors"] == 0 and level["timeouts"] == 0 and level["admitted"] == level["requests"] > 0
        assert level["url"].startswith("http://127.0.0.1:")
        assert level["queue_wait_ms"]["p99"] >= level["queue_wait_ms"]["p50"] >= 0
        assert 0 < level["health_ms"]["p50"] <= level["health_ms"]["max"]  # probed during the run
    assert "one process, `validate` loop" in result.output


def test_client_levels_are_checked() -> None:
    cli._register_commands()
    result = CliRunner().invoke(cli.app, ["benchmark", "serve", "--clients", "4,x"])
    assert result.exit_code == 2 and "whole numbers" in result.output
