"""training/gpu_smoke.sh and its helper: configs from the project's, the summary, the CPU dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autovalidators.training import gpu_smoke
from autovalidators.training.config import load_task_config
from autovalidators.training.tasks import get_task

SCRIPT = Path(gpu_smoke.__file__).resolve().parent / "gpu_smoke.sh"


def _project(task: str) -> dict:
    return yaml.safe_load((gpu_smoke.CONFIG_DIR / gpu_smoke.TASK_CONFIGS[task]).read_text())


@pytest.mark.parametrize("task", sorted(gpu_smoke.TASK_CONFIGS))
def test_gpu_config_is_the_project_config_with_smoke_overrides(task, tmp_path):
    raw = gpu_smoke.smoke_config(task, "gpu", tmp_path, 300, data_root="/data/sets")
    path = tmp_path / f"{task}.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_task_config(path, get_task(task).prepare_schema, task)  # what the commands will load
    project = _project(task)
    assert config.train.mixed_precision == "bf16" and config.train.max_steps == 300
    assert config.train.eval_every == 300  # one evaluation, at the end
    assert config.train.batch_size == project["train"]["batch_size"]
    assert config.train.max_train_examples == 300 * project["train"]["batch_size"]
    assert config.train.max_dev_examples <= gpu_smoke.MAX_SMOKE_DEV
    assert config.export.parity_atol == project["export"]["parity_atol"]
    # Data and runs are relocated: nothing points at the project's shared data or its prepared/, runs/.
    prepared = tmp_path / "prepared" / task
    assert Path(config.train.train_file) == prepared / Path(project["train"]["train_file"]).name
    assert Path(config.train.dev_file) == prepared / Path(project["train"]["dev_file"]).name
    assert config.train.output_dir == str(tmp_path / "runs" / task)
    assert "../shared/datasets" not in path.read_text() and "/data/sets" in path.read_text()


def test_logged_rates_and_failed_steps_in_the_summary(tmp_path):
    line = "[11/29/26 22:39:24] INFO     step 20/300 loss 0.6931 lr 4.50e-05 1234.5 examples/s   \n"
    assert gpu_smoke.logged_rates(line * 2 + "step 40/300 loss 0.5 lr 1.00e-05 99.0 examples/s") == [1234.5, 1234.5,
                                                                                                    99.0]
    log = tmp_path / "qa_train.log"
    log.write_text(line + line.replace("1234.5", "1000.0") + line.replace("1234.5", "10.0"))
    plan = [{"task": "qa_relevance", "cli": "qa-relevance", "config": "c.yaml", "prepare": False,
             "mixed_precision": "bf16", "run": str(tmp_path / "run"), "models": str(tmp_path / "models")}]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    gpu_smoke.record_step(tmp_path, "qa_relevance", "train", 1, 12.5, str(log))
    out = tmp_path / "out"
    assert gpu_smoke.main(["summarize", "--work", str(tmp_path), "--out", str(out), "--processes", "2"]) == 1
    summary = json.loads((out / "gpu_smoke.json").read_text())
    task = summary["tasks"]["qa_relevance"]
    assert summary["ok"] is False and task["ok"] is False
    assert task["stages"]["train"] == {"rc": 1, "seconds": 12.5, "log": str(log)}
    assert task["examples_per_s"] == 2000.0  # median rate x 2 processes
    assert gpu_smoke.main(["configs", "--mode", "gpu", "--work", str(tmp_path), "--tasks", "bogus"]) == 2


def _run_script(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "SMOKE_WORK": str(tmp_path / "work"),
           "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=300)


def test_without_a_gpu_the_script_stops_and_says_so(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    result = _run_script([], tmp_path)
    assert result.returncode == gpu_smoke.NO_GPU_EXIT, result.stderr
    assert "no CUDA GPU visible" in result.stderr and "--cpu-dry-run" in result.stderr
    assert not (tmp_path / "work" / "runs").exists()  # nothing trained


def test_unknown_option_is_a_usage_error(tmp_path):
    result = _run_script(["--fast"], tmp_path)
    assert result.returncode == 2 and "unknown option --fast" in result.stderr and "Usage" in result.stderr


@pytest.mark.slow
def test_cpu_dry_run_trains_exports_and_reports(tmp_path):
    pytest.importorskip("torch")
    # One task keeps the test well under a minute on 2 cores; the script runs every task the same way.
    result = _run_script(["--cpu-dry-run", "--tasks", "fact_spans"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "gpu_smoke.json").read_text())
    assert summary["ok"] and list(summary["tasks"]) == ["fact_spans"]
    task = summary["tasks"]["fact_spans"]
    assert task["mixed_precision"] == "bf16" and task["total_steps"] == gpu_smoke.CPU_STEPS
    assert task["examples_per_s"] > 0 and len(task["logged_rates"]) == gpu_smoke.CPU_STEPS
    assert task["parity_fp32"]["passed"] and task["parity_fp32"]["max_abs_diff"] <= 1e-4
    assert "example_f1" == task["main_metric"] and task["dev_main_metric"] is not None
    assert (tmp_path / "work" / "models" / "fact_spans" / "manifest.json").is_file()
    assert "accelerate" not in result.stdout  # the plan rows stay internal
    log = (tmp_path / "out" / "gpu_smoke.log").read_text()
    assert "===== fact_spans_train.log" in log and "===== fact_spans_export.log" in log
    assert "parity fp32" in result.stderr  # the printed table
