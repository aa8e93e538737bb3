"""configs/serve.yaml: loads into its schema; a bad key is named, and `serve` stops with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autovalidators.inference import cli
from autovalidators.inference.config import ConfigError
from autovalidators.inference.serving.config import DEFAULT_SERVE_CONFIG, ServeConfig, load_serve_config


def test_shipped_config_loads_with_its_defaults() -> None:
    config = load_serve_config()
    assert DEFAULT_SERVE_CONFIG.is_file()
    assert config == ServeConfig()  # the YAML states every default, and states it the same


def test_bad_keys_are_all_named(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text("prot: 80\nlimits:\n  max_batch_size: 0\n  max_body: 5\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_serve_config(path)
    message = str(raised.value)
    assert "prot: unknown key" in message and "limits.max_body: unknown key" in message
    assert "limits.max_batch_size" in message


def test_serve_command_reports_a_bad_config(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    path = tmp_path / "serve.yaml"
    path.write_text("workers: many\n", encoding="utf-8")
    cli._register_commands()
    result = CliRunner().invoke(cli.app, ["serve", "--config", str(path)])
    assert result.exit_code == 2
    assert "workers" in result.output
