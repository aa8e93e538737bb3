"""`autovalidators quickstart --train`: the whole loop on the bundled samples with a tiny encoder,
and clear errors (exit 2, no traceback) for bad options and configs."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml
from typer.testing import CliRunner

from autovalidators.inference.cli import app
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.results import Decision
from autovalidators.training.quickstart.config import load_quickstart_config

runner = CliRunner()
TASKS = ("qa_relevance", "fact_spans", "tone")


def tiny_config(path, **top) -> str:
    """A quickstart config sized for a tiny encoder: short windows, tiny batches, light benchmark."""
    task = {"train": {"max_length": 64, "batch_size": 4, "eval_batch_size": 32, "max_steps": 2, "eval_every": 0,
                      "cpu_threads": 1, "learning_rate": 1e-3},
            # A random 2-step model: the int8 rule still runs, with a limit it cannot miss.
            "export": {"int8_max_drop": 1.0, "optimize": False}}
    settings = {name: json.loads(json.dumps(task)) for name in TASKS}
    settings["qa_relevance"]["train"]["early_stopping"] = {"patience": 0, "metric": "roc_auc"}
    settings["fact_spans"]["train"].update(max_length=128, early_stopping={"patience": 0, "metric": "example_auc"})
    settings["tone"]["train"]["early_stopping"] = {"patience": 0, "metric": "macro_roc_auc"}
    settings["benchmark"] = {"threads": 1, "latency_runs": 2, "fp32": False, "gate_repeat": 1}
    settings.update(top)
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def example_case_ids() -> list[str]:
    cases = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl").read_text(encoding="utf-8")
    return [json.loads(line)["id"] for line in cases.splitlines() if line.strip()]


@pytest.mark.slow
def test_quickstart_train_runs_the_whole_loop_into_one_folder(tiny_encoder, tmp_path):
    out = tmp_path / "qs"
    result = runner.invoke(app, ["quickstart", "--train", "--out", str(out), "--base-model", str(tiny_encoder),
                                 "--config", tiny_config(tmp_path / "qs.yaml"), "--steps", "2"])
    assert result.exit_code == 0, result.output
    assert f"output folder: {out}" in result.output.replace("\n", "")
    for task in TASKS:
        manifest = load_manifest(out / "models" / task)  # verifies every file's sha256
        assert manifest.task == task and manifest.metrics["precision"] == "int8"
        assert manifest.base_model == str(tiny_encoder)
        assert manifest.training["config"]["max_steps"] == 2  # --steps reached every task's TrainConfig
        assert sorted(p.name for p in (out / "models" / task).iterdir()) == ["manifest.json", "model.onnx",
                                                                             "tokenizer.json"]
        benchmark = json.loads((out / "benchmarks" / f"{task}.json").read_text())
        assert benchmark["model_sha256"] == manifest.model_sha256 and benchmark["quality"]["int8"]
        assert (out / "configs" / f"{task}.yaml").is_file()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == example_case_ids()
    assert all(r["decision"] in {d.value for d in Decision} for r in rows)
    # The decisions came from the fresh models, not from the shipped ones or the heuristics.
    fresh = {task: load_manifest(out / "models" / task).model_sha256 for task in TASKS}
    assert all({k: v for k, v in r["meta"]["models"].items() if k in TASKS} == fresh for r in rows)
    assert not any(r["meta"]["fallback"] for r in rows)
    html = (out / "report" / "report.html").read_text(encoding="utf-8")
    for task in TASKS:
        assert task in html
    report = json.loads((out / "report" / "report.json").read_text())
    assert {s["name"]: s["status"] for s in report["sections"]} == {
        "qa_relevance": "benchmarked", "fact_spans": "benchmarked", "tone": "benchmarked", "gate": "benchmarked"}
    timings = json.loads((out / "timings.json").read_text())
    assert {"prepare data", "train tone", "export fact_spans", "report", "total"} <= set(timings)
    # The data came from the bundled samples: each task has all three splits.
    summary = json.loads((out / "summary.json").read_text())
    assert all(set(summary["data"][task]) >= {"train", "dev", "test"} for task in TASKS)


def _fails_cleanly(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, ["quickstart", *args])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # a message, not a traceback
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output
    return result.output


def test_unknown_and_reserved_config_keys_are_named(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"qa_relevance": {"train": {"max_stepz": 3, "output_dir": "x"}}, "bogus": 1}))
    _fails_cleanly(["--train", "--out", str(tmp_path / "o"), "--config", str(path)],
                   "qa_relevance.train.max_stepz", "bogus")
    reserved = tmp_path / "reserved.yaml"
    reserved.write_text(yaml.safe_dump({"tone": {"train": {"train_file": "mine.jsonl"}}}))
    _fails_cleanly(["--train", "--out", str(tmp_path / "o"), "--config", str(reserved)], "train.train_file")
    assert not (tmp_path / "o").exists()  # nothing is created before the config is sound


def test_bad_options_are_clear_errors(tmp_path):
    _fails_cleanly(["--train", "--out", str(tmp_path / "o"), "--steps", "0"], "--steps")
    _fails_cleanly(["--steps", "3"], "need --train")
    _fails_cleanly(["--train", "--out", str(tmp_path / "o"), "--base-model", str(tmp_path / "nowhere")],
                   "--base-model")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    _fails_cleanly(["--train", "--out", str(busy)], "not an empty folder")
    assert (busy / "keep.txt").read_text() == "mine"


def test_shipped_config_builds_the_projects_own_task_configs(tmp_path):
    from autovalidators.training.config import TaskConfig
    from autovalidators.training.quickstart.data import task_configs

    settings = load_quickstart_config().with_overrides(base_model="some/encoder", steps=7)
    configs = task_configs(settings, tmp_path)
    assert set(configs) == set(TASKS)
    for task, config in configs.items():
        assert isinstance(config, TaskConfig)
        assert config.train.base_model == "some/encoder" and config.train.max_steps == 7
        assert config.train.output_dir == str(tmp_path / "runs" / task)
        assert config.train.dev_file.startswith(str(tmp_path / "data" / task))
    # The bundled reading sets exist as SQuAD files, XQuAD en/ru listing the same ids in one order.
    sources = tmp_path / "data" / "sources"
    ids = {p.stem: [a["paragraphs"][0]["qas"][0]["id"] for a in json.loads(p.read_text())["data"]]
           for p in sources.glob("*.json")}
    assert ids["xquad_en_atomic"] == ids["xquad_ru_atomic"] and ids["xquad_en_atomic"]
    assert sum(len(v) for v in ids.values()) >= 400
