"""`autovalidators benchmark batch` and the runtime's memory settings."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import _register_commands, app
from autovalidators.inference.onnx_session import OnnxSession
from autovalidators.inference.validators import DEFAULT_MODELS_DIR

_register_commands()
runner = CliRunner()
ROWS = [
    {"id": "1", "task_type": "QA", "question": "How long is the X200 warranty?", "reference": "The X200 router "
     "comes with a two-year limited warranty.", "response": "The X200 has a two-year limited warranty."},
    {"id": "2", "task_type": "Data2txt", "reference": {"name": "Cafe", "city": "Santa Barbara"},
     "response": "Cafe is a restaurant in Santa Barbara that opened in 1950."},
    {"id": "3", "task_type": "Summary", "reference": "The bridge opened in 1901 and cost two million dollars.",
     "response": "The bridge opened in 1901."},
]


@pytest.mark.slow
def test_benchmark_batch_measures_each_run_and_checks_decisions(tmp_path):
    source = tmp_path / "ragtruth.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "batch.json"
    result = runner.invoke(app, ["benchmark", "batch", "--ragtruth", str(source), "--cases", "8", "--memory-cases",
                                 "4", "--engines", "validate,local", "--no-arena-baseline", "--work",
                                 str(tmp_path / "work"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    runs = {r["run"]: r for r in report["runs"]}
    assert set(runs) == {"validate 4", "validate 8", "batch local x1"}
    for row in runs.values():
        assert row["exit"] == 0 and row["cases_per_s"] > 0 and 50 < row["peak_rss_mb"] < 4000
        assert row["core_hours_per_10m"] > 0
    assert runs["batch local x1"]["decisions_equal_validate"] == 8  # the same decisions as validate
    cases = [json.loads(line) for line in (tmp_path / "work" / "ragtruth_8.jsonl").read_text().splitlines()]
    assert [c["id"] for c in cases] == [f"rt{i:07d}" for i in range(8)]
    assert cases[1]["context"] == json.dumps(ROWS[1]["reference"]) and cases[3]["answer"] == ROWS[0]["response"]


def test_onnx_sessions_keep_no_arena_unless_asked(monkeypatch):
    model = DEFAULT_MODELS_DIR / "tone" / "model.onnx"
    if not model.is_file():
        pytest.skip("no shipped tone model")
    options = OnnxSession(model, threads=1).session.get_session_options()
    assert not options.enable_cpu_mem_arena and not options.enable_mem_pattern
    monkeypatch.setenv("AUTOVALIDATORS_ORT_ARENA", "1")
    assert OnnxSession(model, threads=1).session.get_session_options().enable_cpu_mem_arena


def test_the_validate_path_imports_no_dataframe_plotting_or_engine_library():
    code = ("import sys; from autovalidators.inference.cli import _register_commands; _register_commands(); "
            "from autovalidators.inference import Gate; Gate(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'pandas', 'matplotlib', 'pyarrow', 'ray', 'torch', 'transformers', 'sklearn', 'scipy'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
