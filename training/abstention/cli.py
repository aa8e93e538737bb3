"""`autovalidators prepare|train|export|benchmark abstention` (configs/abstention.yaml).

The abstention model is no encoder fine-tune, so it has its own four commands instead of a
TaskSpec; they take the same options where they mean the same thing. scikit-learn/scipy/onnx load
inside the command bodies (the `train` extra).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from autovalidators.data_prep.user_data_cli import (COLUMNS_HELP, DATA_HELP, OUT_HELP, SPLIT_HELP, prepare_from_data,
                                                    refuse_data_options)
from autovalidators.inference.cli import benchmark_app, console, export_app, prepare_app, train_app
from autovalidators.inference.config import ConfigError

CONFIG_HELP = "abstention config YAML (default: configs/abstention.yaml)"


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _config(path: Optional[Path]):
    import logging

    from autovalidators.training.abstention.train import load_abstention_config

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    try:
        return load_abstention_config(path)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


@prepare_app.command("abstention", help="Build the abstention data (en/ru paraphrase families + real responses), "
                                         "or from your own file: --data.")
def prepare_command(
    config: Optional[Path] = typer.Option(None, help=CONFIG_HELP + "; with --data: its features/train/export recipe"),
    data: Optional[str] = typer.Option(None, help=DATA_HELP),
    split: Optional[str] = typer.Option(None, help=SPLIT_HELP),
    columns: Optional[str] = typer.Option(None, help=COLUMNS_HELP),
    out: Optional[Path] = typer.Option(None, help=OUT_HELP),
) -> None:
    from autovalidators.data_prep.abstention import prepare_abstention
    from autovalidators.data_prep.io import DataError

    if data is not None:
        prepare_from_data("abstention", data, split=split, columns=columns, out=out, config=config)
        return
    refuse_data_options(split=split, columns=columns, out=out)
    settings = _config(config)
    try:
        card = prepare_abstention(settings.prepare)
    except (DataError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
    for name, stats in card["splits"].items():
        console.print(f"{name}: {stats['rows']} rows, labels {stats.get('label', {})}")


@train_app.command("abstention", help="Fit the abstention model (scikit-learn, CPU, a few minutes).")
def train_command(config: Optional[Path] = typer.Option(None, help=CONFIG_HELP),
                  output_dir: Optional[str] = typer.Option(None, help="override train.output_dir")) -> None:
    from autovalidators.training.abstention.train import train

    settings = _config(config)
    if output_dir:
        settings = settings.model_copy(update={"train": settings.train.model_copy(update={"output_dir": output_dir})})
    try:
        summary = train(settings, config_source=str(config or "configs/abstention.yaml"))
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    console.print_json(json.dumps({k: summary[k] for k in ("model", "threshold", "dev", "seconds")}))


@export_app.command("abstention", help="Export the abstention model to ONNX with featurizer.json and a manifest.")
def export_command(run: Path = typer.Option(Path("runs/abstention"), help="the training output_dir"),
                   to: Path = typer.Option(Path("models/abstention"), help="the shipped model folder to write"),
                   config: Optional[Path] = typer.Option(None, help=CONFIG_HELP)) -> None:
    from autovalidators.training.abstention.train import ExportError, export

    try:
        manifest = export(_config(config), run, to)
    except (ExportError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {to}: " + ", ".join(f"{k} ({v[:12]}…)" for k, v in manifest.files.items()))


@benchmark_app.command("abstention", help="Held-out P/R/F1 per language and on real refusals, beside the phrase list.")
def benchmark_command(
    model: Path = typer.Option(Path("models/abstention"), help="model folder"),
    config: Optional[Path] = typer.Option(None, help=CONFIG_HELP),
    split: str = typer.Option("test", help="prepared split to score (test: families never trained on)"),
    output: Path = typer.Option(Path("out/benchmarks/abstention.json"), help="JSON report"),
    threads: int = typer.Option(2, help="onnxruntime threads for the latency runs"),
    update_manifest: bool = typer.Option(False, help="write the measured metrics into the manifest"),
) -> None:
    from autovalidators.training.benchmarks.abstention import benchmark_abstention

    command = " ".join(["autovalidators benchmark abstention"] + ([f"--config {config}"] if config else [])
                       + ([f"--model {model}"] if model != Path("models/abstention") else [])
                       + ([f"--split {split}"] if split != "test" else []) + [f"--output {output}"])
    try:
        report = benchmark_abstention(_config(config), model, split=split, threads=threads,
                                      update_manifest_metrics=update_manifest, command=command)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {output}")
