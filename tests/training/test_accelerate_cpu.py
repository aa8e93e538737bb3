"""The training command under `accelerate launch` with accelerate's CPU backend (the GPU path's launcher)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml


@pytest.mark.slow
def test_train_command_under_accelerate_launch_cpu(tiny_encoder, tiny_data, tmp_path, make_config):
    # bf16 autocast works on CPUs too, so the launch goes through the mixed-precision path a GPU run takes.
    config = make_config(tiny_encoder, tiny_data, tmp_path / "run", mixed_precision="bf16")
    path = tmp_path / "qa.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    command = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1",
               "--num_machines", "1", "--num_cpu_threads_per_process", "1", "--mixed_precision", "bf16",
               "--dynamo_backend", "no", "-m", "autovalidators.inference.cli", "train", "qa-relevance",
               "--config", str(path)]
    result = subprocess.run(command, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "run"
    assert (run / "best" / "model.safetensors").is_file() and (run / "best" / "tokenizer.json").is_file()
    info = json.loads((run / "best" / "run.json").read_text())
    assert info["config"]["mixed_precision"] == "bf16" and "f1" in info["dev_metrics"]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    # The resumable checkpoint: accelerate's state plus the trainer's step counter.
    state = json.loads((run / "last" / "trainer_state.json").read_text())
    assert state["step"] == 2 and any(p.name.startswith("optimizer") for p in (run / "last").iterdir())
    assert '"steps": 2' in result.stderr  # the command's JSON result (the CLI's console is stderr)
