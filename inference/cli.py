"""`autovalidators <verb>`: one entry point per job, on top of the Python API.

Exit codes: 0 all records processed, 1 some records were bad (each has an error record in the
output), 2 the command itself could not run (bad config, missing file, bad option).
"""

from __future__ import annotations

import importlib
import json
import logging
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import IO, Iterable, Optional

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from .case import Case, CaseError, read_cases
from .config import ConfigError, load_gate_config
from .gate import Gate
from .manifest import ManifestError
from .results import Decision, Result

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
COMMAND_MODULES: list[str] = ["autovalidators.inference.serving.cli", "autovalidators.training.cli",
                              "autovalidators.training.combiner_cli",
                              "autovalidators.training.abstention_cli",
                              "autovalidators.inference.regression_cli",
                              "autovalidators.inference.evaluation.atomic_qa_cli",
                              "autovalidators.data_prep.fact_spans.cli",
                              "autovalidators.inference.evaluation.cli",
                              "autovalidators.data_prep.tone.cli",
                              "autovalidators.inference.reporting.cli",
                              "autovalidators.inference.batch_cli",
                              "autovalidators.training.base_model_cli"]
# Rich wraps at 80 columns when output is not a terminal; decisions and reasons need more.
console = Console(stderr=True, width=max(140, shutil.get_terminal_size((140, 24)).columns))
BATCH_SIZE = 32
_DECISION_STYLE = {Decision.ACCEPT: "green", Decision.REVIEW: "yellow", Decision.REJECT: "bold red"}


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


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


def _batches(items: Iterable[Case | CaseError], size: int) -> Iterable[list[Case | CaseError]]:
    batch: list[Case | CaseError] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_validation(gate: Gate, records: Iterable[Case | CaseError], sink: IO[str]) -> tuple[list[Result], list[CaseError]]:
    """Validates records in batches, writing one JSON line per record in input order."""
    results: list[Result] = []
    errors: list[CaseError] = []
    for batch in _batches(records, BATCH_SIZE):
        cases = [r for r in batch if isinstance(r, Case)]
        by_position = iter(gate.validate_batch(cases))
        for record in batch:
            if isinstance(record, CaseError):
                errors.append(record)
                sink.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            else:
                result = next(by_position)
                results.append(result)
                sink.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    return results, errors


def print_summary(results: list[Result], errors: list[CaseError], gate: Gate) -> None:
    table = Table(title="autovalidators", show_lines=False)
    for column in ("id", "decision", "failure", "next action", "conf"):
        table.add_column(column, no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=1)
    for r in results:
        style = _DECISION_STYLE[r.decision]
        table.add_row(r.id, f"[{style}]{r.decision.value}[/{style}]", r.failure_type.value,
                      r.next_action.value, str(r.confidence), r.reason)
    console.print(table)
    counts = {d.value: sum(1 for r in results if r.decision is d) for d in Decision}
    console.print("decisions: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; bad records: {len(errors)}")
    for error in errors:
        console.print(f"[red]bad record[/red] {error}")
    if gate.judge is not None and gate.judge.stats:
        console.print("LLM judge: " + ", ".join(f"{k} {v}" for k, v in sorted(gate.judge.stats.items())))
    if gate.uses_fallback:
        fallback = ", ".join(gate.fallbacks)
        console.print(f"[yellow]note:[/yellow] no trained model for {fallback}; the heuristic fallback ran instead")


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
        raise _fail(f"{input}: no such file")
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


@benchmark_app.command("gate")
def benchmark_gate(
    cases: Optional[Path] = typer.Option(None, help="JSONL of cases (default: the bundled examples)"),
    repeat: int = typer.Option(20, min=1, help="rounds over the cases"),
    json_out: Path = typer.Option(Path("out/benchmarks/gate.json"), "--json", help="where to write the JSON"),
    validators: Optional[str] = typer.Option(None, help="comma-separated validator names"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators"),
) -> None:
    """Latency of the whole gate, one case per call, on the validators that load (models or heuristics)."""
    from .latency import measure_gate

    gate = _build_gate(None, validators, models_dir)
    source = cases or Path(str(resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")))
    records = list(read_cases(source))
    good = [r for r in records if isinstance(r, Case)]
    if len(good) != len(records):
        raise _fail(f"{source}: {len(records) - len(good)} bad record(s); run `validate` on it to see them")
    report = measure_gate(gate, good, repeat=repeat)
    report["source"] = str(source)
    table = Table(title=f"gate latency, {len(good)} cases x {repeat} rounds")
    for column in ("validators", "p50 ms", "p95 ms", "p99 ms", "batch cases/s"):
        table.add_column(column)
    kinds = ", ".join(f"{n}={v['kind']}" for n, v in gate.models.items())
    s = report["single_case"]
    table.add_row(kinds, f"{s['p50_ms']:.2f}", f"{s['p95_ms']:.2f}", f"{s['p99_ms']:.2f}",
                  f"{report['batch_cases_per_s']:.0f}")
    console.print(table)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {json_out}")


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
