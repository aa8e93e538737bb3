"""`autovalidators <verb>`: one entry point per job, on top of the Python API.

Exit codes: 0 all records processed, 1 some records were bad (each has an error record in the
output), 2 the command itself could not run (bad config, missing file, bad option).
"""

from __future__ import annotations

import importlib
import logging
import sys
from importlib import resources
from pathlib import Path
from typing import Optional

import typer
from rich.logging import RichHandler

from .case import read_cases
from .config import ConfigError, load_gate_config
from .gate import Gate
from .manifest import ManifestError
# Command modules print through this console: `from ..cli import app, console`.
from .run import console, print_summary, run_validation

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train and run validators for LLM/RAG answers.")
# One sub-command group per pipeline stage; task modules add `autovalidators <stage> <task>`.
prepare_app = typer.Typer(no_args_is_help=True, help="Build training data for a validator.")
train_app = typer.Typer(no_args_is_help=True, help="Fine-tune a validator (needs the `train` extra).")
export_app = typer.Typer(no_args_is_help=True, help="Export a trained validator to ONNX fp32 + int8.")
benchmark_app = typer.Typer(no_args_is_help=True, help="Measure a validator: quality and latency.")
label_app = typer.Typer(no_args_is_help=True, help="Synthetic labelling and the assessor check.")
average_app = typer.Typer(no_args_is_help=True, help="Average the weights of trained runs (a model soup).")
for _name, _sub in (("prepare", prepare_app), ("train", train_app), ("average", average_app),
                    ("export", export_app), ("benchmark", benchmark_app), ("label", label_app)):
    app.add_typer(_sub, name=_name)
# Modules that register commands on the apps above. They must import nothing heavy at import
# time (torch, transformers): the command bodies import what they need.
COMMAND_MODULES: list[str] = ["autovalidators.inference.gate_cli", "autovalidators.inference.serving.cli", "autovalidators.training.cli",
                              "autovalidators.training.grounding.cli",
                              "autovalidators.training.abstention.cli",
                              "autovalidators.inference.regression_cli",
                              "autovalidators.inference.evaluation.atomic_qa_cli",
                              "autovalidators.data_prep.fact_spans.cli",
                              "autovalidators.inference.evaluation.cli",
                              "autovalidators.data_prep.tone.cli",
                              "autovalidators.inference.reporting.cli",
                              "autovalidators.inference.batch_cli",
                              "autovalidators.training.base_models.cli"]


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _unreadable(path: Path) -> str:
    """Why an input `path` that is not a file cannot be read."""
    return f"{path}: a folder, not a file" if path.is_dir() else f"{path}: no such file"


def _build_gate(config: Optional[Path], validators: Optional[str], models_dir: Optional[Path],
                judge: Optional[bool] = None) -> Gate:
    try:
        gate_config = load_gate_config(config)
        if judge is not None:  # --judge/--no-judge wins over the config file
            gate_config = gate_config.model_copy(update={"judge": gate_config.judge.model_copy(update={"enabled": judge})})
        names = [n.strip() for n in validators.split(",") if n.strip()] if validators else None
        llm_judge = None
        if gate_config.judge.enabled:
            from .judge import LLMJudge

            llm_judge = LLMJudge(gate_config.judge)
        return Gate(gate_config, validators=names, models_dir=models_dir, judge=llm_judge)
    except (ConfigError, ManifestError, ValueError) as exc:
        raise _fail(str(exc)) from None


@app.command()
def validate(
    input: Path = typer.Argument(..., help="JSONL of cases: id, question, context, answer, meta"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL results (default: stdout)"),
    validators: Optional[str] = typer.Option(None, help="comma-separated: fact_spans,qa_relevance,tone"),
    config: Optional[Path] = typer.Option(None, help="gate policy YAML (default: configs/gate.yaml)"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators (default: models/)"),
    quiet: bool = typer.Option(False, help="no summary table"),
    judge: Optional[bool] = typer.Option(None, "--judge/--no-judge",
                                         help="consult the LLM judge on uncertain cases (default: the config's judge.enabled)"),
) -> None:
    """Validate answers and write one decision per case, in input order."""
    if not input.is_file():
        raise _fail(_unreadable(input))
    gate = _build_gate(config, validators, models_dir, judge)
    records = read_cases(input, max_text_chars=gate.config.input.max_text_chars)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        with open(output, "w", encoding="utf-8") as sink:
            results, errors = run_validation(gate, records, sink)
    else:
        results, errors = run_validation(gate, records, sys.stdout)
    if not quiet:
        print_summary(results, errors, gate)
        if not results and not errors:
            console.print(f"[yellow]note:[/yellow] {input} holds no cases (every line is blank)")
        if output:
            console.print(f"wrote {len(results) + len(errors)} lines to {output}")
    if errors:
        raise typer.Exit(code=1)


@app.command()
def quickstart(
    output: Path = typer.Option(Path("out/quickstart/results.jsonl"), help="where to write the results"),
    train: bool = typer.Option(False, "--train", help="retrain small validators on the bundled samples first "
                               "(needs the train extra; <= 15 min on a CPU); see configs/quickstart_train.yaml"),
    out: Optional[Path] = typer.Option(None, "--out", help="with --train: the output folder "
                                       "(default: out/quickstart-train/<timestamp>)"),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="with --train: encoder name or folder"),
    steps: Optional[int] = typer.Option(None, "--steps", help="with --train: max_steps for every validator"),
    config: Optional[Path] = typer.Option(None, "--config", help="with --train: quickstart config YAML"),
) -> None:
    """Validate the bundled example cases with the shipped validators and print the decisions.

    With --train: first train, export, benchmark and report three small validators on bundled data."""
    if train:
        # Imported only here: the training stack (torch) never loads for the plain quickstart.
        from autovalidators.training.quickstart.command import run_train_quickstart

        run_train_quickstart(out, base_model, steps, config)
        return
    if any(v is not None for v in (out, base_model, steps, config)):
        raise _fail("--out, --base-model, --steps and --config need --train")
    examples = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")
    with resources.as_file(examples) as path:
        validate(input=path, output=output, validators=None, config=None, models_dir=None, quiet=False, judge=None)


def _register_commands() -> None:
    for module in COMMAND_MODULES:
        importlib.import_module(module)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, handlers=[RichHandler(console=console, show_path=False)],
                        format="%(message)s")
    _register_commands()
    app()


if __name__ == "__main__":
    # `python -m` runs this file as `__main__`, a second copy of the module: command modules
    # register on the importable `autovalidators.inference.cli`, so dispatch through that one.
    from autovalidators.inference.cli import main as _main

    _main()
