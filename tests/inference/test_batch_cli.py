"""`autovalidators batch`: the same results as `validate`, locally and on a real Ray runtime.

The shipped models score every run (one Gate per worker); the Ray tests start one local Ray
runtime with 2 CPUs for the module, as a user's laptop run would.
"""

from __future__ import annotations

import codecs
import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import _register_commands, app

_register_commands()
runner = CliRunner()
BAD_LINES = [b'{"id": "no-question", "context": "", "answer": "An answer."}', b"{not json",
             b'{"id": "typed", "question": 3, "answer": "x"}']


def example_cases(copies: int = 4) -> list[dict]:
    path = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")
    # The first 12 bundled cases: the counts below are written for 12 x 4 (the file has grown since).
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:12]
    return [dict(row, id=f"{row['id']}-{k}") for k in range(copies) for row in rows]


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    """48 example cases with three bad lines among them (lines 6, 20 and 51), saved as a Windows
    export would: a byte-order mark first, which is not a bad record."""
    lines = [json.dumps(c, ensure_ascii=False).encode() for c in example_cases()]
    for position, bad in zip((5, 19, 50), BAD_LINES):
        lines.insert(position, bad)
    path = tmp_path_factory.mktemp("batch") / "log.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + b"\n".join(lines) + b"\n")
    return path


@pytest.fixture(scope="module")
def validated(log, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("validate") / "validate.jsonl"
    result = runner.invoke(app, ["validate", str(log), "--output", str(out), "--quiet"])
    assert result.exit_code == 1, result.output  # the bad lines
    return read_jsonl(out)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def outcome(rows: list[dict]) -> dict[str, tuple]:
    """What must agree between runs: per record, decision and failure type, or the error."""
    return {str(r.get("id") or r["error"]["line"]): (r.get("decision"), r.get("failure_type"), json.dumps(r.get("error")))
            for r in rows}


def columnar(cases: list[dict]) -> list[dict]:
    """Rows whose fields have one type each, as a table column needs: passages as a list, no meta."""
    rows = []
    for case in cases:
        context = case.get("context") or []
        rows.append({"id": case["id"], "question": case["question"], "answer": case["answer"],
                     "context": [context] if isinstance(context, str) else context})
    return rows


def run_batch(log: Path, out: Path, *args: str) -> dict:
    summary = out.parent / f"{out.name}.summary.json"
    result = runner.invoke(app, ["batch", str(log), "--output", str(out), "--summary-json", str(summary), "--quiet", *args])
    assert result.exit_code == 1, result.output  # bad records, as validate
    assert "bad record" in result.output
    return json.loads(summary.read_text())


def test_local_batch_equals_validate_and_reports_bad_lines(log, validated, tmp_path):
    out = tmp_path / "out.jsonl"
    summary = run_batch(log, out)
    rows = read_jsonl(out)
    assert [r.get("id") for r in rows] == [r.get("id") for r in validated]  # input order
    assert outcome(rows) == outcome(validated)
    assert summary["written"] == summary["records"] == 51 and summary["bad_records"] == 3
    assert sum(summary["decisions"].values()) == 48
    assert any(f"{log}:20: malformed JSON" in e for e in summary["errors"])
    assert len(summary["workers_peak_rss_mb"]) == 1


def test_rerun_skips_what_is_done_and_repairs_a_torn_last_line(log, validated, tmp_path):
    out = tmp_path / "out.jsonl"
    done = "".join(json.dumps(r) + "\n" for r in validated[:30])
    out.write_text(done + json.dumps(validated[30])[:25], encoding="utf-8")  # killed mid-write
    summary = run_batch(log, out, "--shard-lines", "16")
    rows = read_jsonl(out)
    assert summary["skipped_already_done"] == 30 and summary["written"] == 21
    assert len(rows) == 51 and outcome(rows) == outcome(validated)
    again = runner.invoke(app, ["batch", str(log), "--output", str(out), "--quiet"])
    assert again.exit_code == 0 and len(read_jsonl(out)) == 51  # nothing left to do


@pytest.mark.slow
def test_a_local_pool_of_two_workers_keeps_order_and_results(log, validated, tmp_path):
    out = tmp_path / "pool.jsonl"
    summary = run_batch(log, out, "--workers", "2", "--shard-lines", "16")
    rows = read_jsonl(out)
    assert [r.get("id") for r in rows] == [r.get("id") for r in validated]
    assert outcome(rows) == outcome(validated)
    assert len(summary["workers_peak_rss_mb"]) == 2 and summary["threads_per_worker"] >= 1


def test_parquet_in_and_out(validated, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cases = example_cases(2)
    cases[3] = {**cases[3], "answer": None}  # a bad row: named by row and field
    table = pa.Table.from_pylist(columnar(cases))
    source = tmp_path / "log.parquet"
    pq.write_table(table, source, row_group_size=10)  # three row groups, three shards
    out = tmp_path / "out.parquet"
    result = runner.invoke(app, ["batch", str(source), "--output", str(out), "--quiet"])
    assert result.exit_code == 1, result.output
    scored = pq.read_table(out).to_pylist()
    assert [r["id"] for r in scored] == [c["id"] for c in cases]
    bad = scored[3]
    assert bad["decision"] is None and f"{source} row:4 field 'answer'" in bad["error"]
    expected = {r["id"]: r["decision"] for r in validated if r.get("decision")}
    for row in scored[:3] + scored[4:]:
        assert row["decision"] == expected[row["id"]]
        assert json.loads(row["result"])["decision"] == row["decision"]
    rerun = runner.invoke(app, ["batch", str(source), "--output", str(out), "--quiet"])
    assert rerun.exit_code == 0 and pq.read_table(out).num_rows == len(cases)


def test_unknown_format_and_missing_input_are_usage_errors(log, tmp_path):
    result = runner.invoke(app, ["batch", str(log), "--output", str(tmp_path / "out.csv")])
    assert result.exit_code == 2 and "cannot tell the format" in result.output
    result = runner.invoke(app, ["batch", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2 and "no such file" in result.output


def test_a_tampered_model_or_unknown_validator_stops_before_any_worker_starts(log, tmp_path):
    import shutil

    from autovalidators.inference.validators import DEFAULT_MODELS_DIR

    models = tmp_path / "models"
    shutil.copytree(DEFAULT_MODELS_DIR / "tone", models / "tone")
    (models / "tone" / "tokenizer.json").write_text("{}")
    for args in (["--models-dir", str(models), "--validators", "tone"], ["--validators", "tone,nope"]):
        result = runner.invoke(app, ["batch", str(log), "--output", str(tmp_path / "o.jsonl"), "--engine", "ray",
                                     "--workers", "2", *args])
        assert result.exit_code == 2, result.output
    assert "the file changed after export" in runner.invoke(app, [
        "batch", str(log), "-o", str(tmp_path / "o.jsonl"), "--models-dir", str(models), "--validators", "tone"]).output


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray", reason="the ray extra: pip install -e '.[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_batch_equals_validate(ray_runtime, log, validated, tmp_path):
    out = tmp_path / "ray.jsonl"
    summary = run_batch(log, out, "--engine", "ray", "--workers", "2", "--shard-lines", "4")
    rows = read_jsonl(out)
    assert [r.get("id") for r in rows] == [r.get("id") for r in validated]  # order kept
    assert outcome(rows) == outcome(validated)
    assert summary["engine"] == "ray" and summary["threads_per_worker"] == 1
    # Two actors, each loading the models once, both given some of the 13 shards.
    assert len(summary["workers_peak_rss_mb"]) == 2


@pytest.mark.slow
def test_gate_scorer_in_ray_data_map_batches(ray_runtime, validated):
    """The README's Ray Data snippet, for real: one GateScorer per actor."""
    import ray.data

    from autovalidators.inference.batch import GateScorer

    cases = example_cases(2)
    scored = ray.data.from_items(columnar(cases)).map_batches(
        GateScorer, batch_size=8, compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1)
    rows = {r["id"]: r["decision"] for r in scored.take_all()}
    expected = {r["id"]: r["decision"] for r in validated if r.get("decision")}
    assert rows == {c["id"]: expected[c["id"]] for c in cases}
