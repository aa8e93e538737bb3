"""`autovalidators validate` end to end on the heuristic path, including bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import _register_commands, app

runner = CliRunner()
_register_commands()  # `benchmark gate` and the other command modules, as `main` does
GOOD = {"id": "ok", "question": "When did the tower open?", "context": "The tower opened in 1889.",
        "answer": "The tower opened in 1889."}


def write_lines(path, lines: list[bytes]) -> None:
    path.write_bytes(b"\n".join(lines) + b"\n")


def read_output(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_validate_writes_one_line_per_case_in_input_order(tmp_path):
    cases = [dict(GOOD, id=f"c{i}") for i in range(40)]  # more than one batch
    source = tmp_path / "cases.jsonl"
    write_lines(source, [json.dumps(c).encode() for c in cases])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["validate", str(source), "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = read_output(out)
    assert [r["id"] for r in rows] == [c["id"] for c in cases]
    first = rows[0]
    for key in ("decision", "failure_type", "next_action", "reason", "confidence", "checks", "scores",
                "validators", "low_confidence_spans", "meta"):
        assert key in first
    assert set(first["validators"]) == {"fact_spans", "qa_relevance", "tone"}
    assert first["meta"]["latency_ms"] > 0
    assert set(first["meta"]["models"]) == {"fact_spans", "qa_relevance", "tone", "abstention"}
    assert first["checks"][0].keys() >= {"name", "applies", "score", "minimum", "passed"}
    span = first["validators"]["fact_spans"]["spans"][0]
    assert GOOD["answer"][span["start"]:span["end"]] == span["text"]


def test_bad_records_get_error_lines_and_the_rest_is_processed(tmp_path):
    huge = dict(GOOD, id="huge", answer="x" * 5_000_001)
    lines = [
        json.dumps(dict(GOOD, id="first")).encode(),
        b'{"id": "broken", "question": ',                       # malformed JSON
        json.dumps({"id": "no-answer", "question": "q", "context": ""}).encode(),
        json.dumps(dict(GOOD, id="wrong-type", answer=42)).encode(),
        b'{"id": "latin1", "question": "caf\xe9", "context": "", "answer": "a"}',  # invalid UTF-8
        json.dumps(huge).encode(),
        json.dumps(dict(GOOD, id="last")).encode(),
    ]
    source = tmp_path / "cases.jsonl"
    write_lines(source, lines)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["validate", str(source), "--output", str(out)])
    assert result.exit_code == 1
    rows = read_output(out)
    assert len(rows) == 7
    assert rows[0]["id"] == "first" and "decision" in rows[0]
    assert rows[-1]["id"] == "last" and "decision" in rows[-1]
    errors = {row["error"]["line"]: row["error"] for row in rows if "error" in row}
    assert set(errors) == {2, 3, 4, 5, 6}
    assert "malformed JSON" in errors[2]["message"]
    assert errors[3]["field"] == "answer" and "required" in errors[3]["message"]
    assert errors[4]["field"] == "answer"
    assert "UTF-8" in errors[5]["message"]
    assert errors[6]["field"] == "answer" and "limit" in errors[6]["message"]
    assert "bad records: 5" in result.output


def test_a_byte_order_mark_opening_the_file_is_not_an_error(tmp_path):
    # Windows editors and spreadsheet exports start UTF-8 files with one; only line 1 may carry it.
    source = tmp_path / "cases.jsonl"
    write_lines(source, [b"\xef\xbb\xbf" + json.dumps(dict(GOOD, id="first")).encode(),
                         b"\xef\xbb\xbf" + json.dumps(dict(GOOD, id="second")).encode()])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["validate", str(source), "--output", str(out)])
    rows = read_output(out)
    assert rows[0]["id"] == "first" and "decision" in rows[0]
    assert rows[1]["error"]["line"] == 2 and "malformed JSON" in rows[1]["error"]["message"]
    assert result.exit_code == 1


def test_a_folder_or_an_empty_file_is_named_as_such(tmp_path):
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 2 and "a folder, not a file" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    result = runner.invoke(app, ["validate", str(empty), "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0 and "holds no cases" in result.output


def test_unknown_validator_is_a_usage_error(tmp_path):
    source = tmp_path / "cases.jsonl"
    write_lines(source, [json.dumps(GOOD).encode()])
    result = runner.invoke(app, ["validate", str(source), "--validators", "fact_spans,nope"])
    assert result.exit_code == 2
    assert "nope" in result.output


def test_selected_validators_only(tmp_path):
    source = tmp_path / "cases.jsonl"
    write_lines(source, [json.dumps(GOOD).encode()])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["validate", str(source), "-o", str(out), "--validators", "tone"])
    assert result.exit_code == 0, result.output
    assert set(read_output(out)[0]["validators"]) == {"tone"}


def test_bad_config_names_the_key(tmp_path):
    source = tmp_path / "cases.jsonl"
    write_lines(source, [json.dumps(GOOD).encode()])
    config = tmp_path / "gate.yaml"
    config.write_text("checks:\n  grounding: {minimum: 1.5}\n  groundnig: {minimum: 0.2}\n")
    result = runner.invoke(app, ["validate", str(source), "--config", str(config)])
    assert result.exit_code == 2
    assert "checks.grounding.minimum" in result.output
    assert "checks.groundnig" in result.output and "unknown key" in result.output


def test_quickstart_decides_the_bundled_examples(tmp_path):
    out = tmp_path / "results.jsonl"
    result = runner.invoke(app, ["quickstart", "--output", str(out)])
    assert result.exit_code == 0, result.output
    decisions = {row["id"]: row["decision"] for row in read_output(out)}
    assert decisions["grounded-en"] == "ACCEPT"
    assert decisions["no-context-asserts-en"] == "REJECT"
    assert decisions["confident-hallucination-en"] == "REJECT"
    assert decisions["toxic-en"] == "REJECT"


def test_runtime_import_does_not_pull_in_torch():
    code = ("import autovalidators.inference, autovalidators.inference.cli as cli, sys; cli._register_commands(); "
            "sys.exit('torch' in sys.modules or 'transformers' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_benchmark_gate_prints_and_writes_latency(tmp_path):
    from autovalidators.inference.latency import peak_rss_mb

    before = peak_rss_mb()
    out = tmp_path / "gate.json"
    result = runner.invoke(app, ["benchmark", "gate", "--repeat", "2", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    bundled = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl").read_text().splitlines()
    assert report["cases"] == len([line for line in bundled if line.strip()]) and report["repeat"] == 2
    assert 0 < report["single_case"]["p50_ms"] <= report["single_case"]["p95_ms"]
    assert "p50" in result.output
    # A peak, not a reading: never below what this process had already reached before the run.
    assert report["peak_rss_mb"] >= round(before, 1) and "peak memory" in result.output
    assert "quality" not in report  # the bundled examples carry no good/bad labels: latency only


def test_validation_lets_each_result_go_once_written(tmp_path):
    """A log of any length is validated in the memory of one batch: what is kept per case for the
    summary is its decision and reason, not its spans and validator outputs."""
    import io
    import weakref

    from autovalidators.inference.case import Case
    from autovalidators.inference.gate import Gate
    from autovalidators.inference.run import Decided, run_validation

    gate = Gate(validators=["fact_spans"])
    produced = []
    original = gate.validate_batch

    def watched(cases):
        results = original(cases)
        produced.extend(weakref.ref(r) for r in results)
        return results

    gate.validate_batch = watched
    sink = io.StringIO()
    kept, errors = run_validation(gate, [Case(id=f"c{i}", question=GOOD["question"], context=GOOD["context"],
                                              answer=GOOD["answer"]) for i in range(40)], sink)
    assert not errors and len(sink.getvalue().splitlines()) == 40
    assert [k.id for k in kept] == [f"c{i}" for i in range(40)] and all(isinstance(k, Decided) for k in kept)
    assert kept[0].decision.value == json.loads(sink.getvalue().splitlines()[0])["decision"]
    assert produced and all(ref() is None for ref in produced)  # no Result outlives its line
