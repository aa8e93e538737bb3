"""`prepare fact-spans` runs the task's prepare step when handed the model's task config."""

from __future__ import annotations

from dataclasses import dataclass

from autovalidators.inference.config import StrictModel
from typer.testing import CliRunner

import autovalidators.data_prep.fact_spans.cli  # noqa: F401  (registers the command)
import autovalidators.training.tasks as tasks
from autovalidators.inference.cli import app


class TinyPrepare(StrictModel):
    out_dir: str


@dataclass
class RecordingSpec:
    name: str = "fact_spans"
    prepare_schema: type = TinyPrepare
    calls: list = None

    def prepare_fn(self, config):
        self.calls.append(config.out_dir)
        return {"splits": {"train": {"rows": 3}}}


def test_a_task_config_is_dispatched_to_the_task_prepare(tmp_path, monkeypatch):
    spec = RecordingSpec(calls=[])
    monkeypatch.setattr(tasks, "get_task", lambda name: spec)
    config = tmp_path / "fact_spans_model.yaml"
    config.write_text(f"prepare:\n  out_dir: {tmp_path / 'data'}\n")
    result = CliRunner().invoke(app, ["prepare", "fact-spans", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert spec.calls == [str(tmp_path / "data")]
    assert "train: 3 rows" in result.output


def test_a_bad_task_config_names_the_key(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks, "get_task", lambda name: RecordingSpec(calls=[]))
    config = tmp_path / "fact_spans_model.yaml"
    config.write_text("prepare:\n  out_dri: x\n")
    result = CliRunner().invoke(app, ["prepare", "fact-spans", "--config", str(config)])
    assert result.exit_code == 2
    assert "out_dri" in result.output
