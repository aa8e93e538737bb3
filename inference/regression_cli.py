"""`autovalidators regress record|check`: regression baselines that make CI fail on a regression.

Exit codes of `check`: 0 no regression, 1 quality regressed (the reasons are printed and in the
JSON report), 2 the check could not run (missing file, bad config or baseline).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .case import read_cases
from .cli import _build_gate, _fail, _unreadable, app, console
from .config import ConfigError
from .regression import (
    RegressionError,
    RegressionReport,
    compare,
    load_baseline,
    load_regression_config,
    snapshot,
    write_baseline,
)

regress_app = typer.Typer(no_args_is_help=True, help="Record a regression baseline and check changes against it.")
app.add_typer(regress_app, name="regress")

_CASES = typer.Option(..., "--cases", help="JSONL of cases; meta.expected_decision makes a case labelled")
_BASELINE = typer.Option(..., "--baseline", help="baseline JSON, e.g. inference/examples/baselines/regression_cases.json")
_CONFIG = typer.Option(None, "--config", help="gate policy YAML (default: configs/gate.yaml)")
_VALIDATORS = typer.Option(None, help="comma-separated: fact_spans,qa_relevance,tone")
_MODELS_DIR = typer.Option(None, help="folder with trained validators (default: models/)")


def _command(verb: str, **options: object) -> str:
    """The command line that reproduces this run, stored in the baseline."""
    parts = ["autovalidators", "regress", verb]
    for name, value in options.items():
        if value is not None:
            parts += [f"--{name.replace('_', '-')}", str(value)]
    return shlex.join(parts)


def _snapshot(cases: Path, config: Optional[Path], validators: Optional[str], models_dir: Optional[Path],
              command: str) -> dict:
    if not cases.is_file():
        raise _fail(_unreadable(cases))
    gate = _build_gate(config, validators, models_dir)
    records = list(read_cases(cases, max_text_chars=gate.config.input.max_text_chars))
    with console.status(f"running {len(records)} cases through the gate"):
        return snapshot(gate, records, command=command, cases_path=cases)


@regress_app.command("record")
def record(
    cases: Path = _CASES,
    baseline: Path = _BASELINE,
    config: Optional[Path] = _CONFIG,
    validators: Optional[str] = _VALIDATORS,
    models_dir: Optional[Path] = _MODELS_DIR,
) -> None:
    """Run the gate over CASES and store decisions, scores and model sha256s as the baseline."""
    command = _command("record", cases=cases, baseline=baseline, config=config, validators=validators,
                       models_dir=models_dir)
    data = _snapshot(cases, config, validators, models_dir, command)
    write_baseline(baseline, data)
    rows = data["cases"]
    labelled = [r for r in rows if r["expected"].get("decision")]
    correct = sum(1 for r in labelled if r["decision"] == r["expected"]["decision"]
                  and r["failure_type"] == r["expected"].get("failure_type", r["failure_type"]))
    console.print(f"recorded {len(rows)} cases to {baseline}"
                  + (f"; {correct}/{len(labelled)} labelled cases as expected" if labelled else ""))
    for error in data["errors"]:
        console.print(f"[red]bad record[/red] {error}")
    if data["errors"]:
        raise typer.Exit(code=1)


@regress_app.command("check")
def check(
    cases: Path = _CASES,
    baseline: Path = _BASELINE,
    config: Optional[Path] = _CONFIG,
    validators: Optional[str] = _VALIDATORS,
    models_dir: Optional[Path] = _MODELS_DIR,
    rules: Optional[Path] = typer.Option(None, help="regression policy YAML (default: configs/regression.yaml)"),
    report: Optional[Path] = typer.Option(None, help="also write the report as JSON here"),
) -> None:
    """Re-run the current validators and exit 1 when quality regressed against the baseline."""
    try:
        regression_config = load_regression_config(rules)
        old = load_baseline(baseline)
    except (ConfigError, RegressionError) as exc:
        raise _fail(str(exc)) from None
    command = _command("check", cases=cases, baseline=baseline, config=config, validators=validators,
                       models_dir=models_dir)
    new = _snapshot(cases, config, validators, models_dir, command)
    result = compare(old, new, regression_config)
    print_report(result)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": command, "baseline": str(baseline), "baseline_command": old.get("command"),
                   "config": regression_config.model_dump(mode="json"), **result.to_dict()}
        report.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        console.print(f"wrote {report}")
    if not result.passed:
        raise typer.Exit(code=1)


def print_report(result: RegressionReport) -> None:
    console.print(f"compared {result.compared} cases; missing {len(result.missing)}, new {len(result.new)}, "
                  f"bad records {len(result.errors)}")
    if result.config_changed:
        console.print("[yellow]the gate policy differs from the baseline's[/yellow]")
    if result.cases_file_changed:
        console.print("[yellow]the cases file differs from the baseline's[/yellow]")
    for name, change in result.models_changed.items():
        console.print(f"[yellow]model {name} changed:[/yellow] {change['baseline']} -> {change['current']}")
    for case_id in result.missing:
        console.print(f"[red]missing[/red] {case_id}: in the baseline, not in this run")
    for error in result.errors:
        console.print(f"[red]bad record[/red] {error}")
    if result.flips:
        table = Table(title="decision flips")
        for column in ("id", "old", "new", "expected", "verdict"):
            table.add_column(column, no_wrap=True)
        table.add_column("new reason", overflow="fold", ratio=1)
        styles = {"worse": "bold red", "better": "green", "changed": "yellow"}
        for flip in result.flips:
            style = styles[flip.verdict]
            table.add_row(flip.id, f"{flip.old_decision} {flip.old_failure}", f"{flip.new_decision} {flip.new_failure}",
                          flip.expected or "-", f"[{style}]{flip.verdict}[/{style}]", flip.new_reason)
        console.print(table)
    if result.score_deltas:
        table = Table(title=f"score deltas beyond tolerance ({len(result.score_deltas)})")
        for column in ("id", "score", "old", "new", "delta", "tolerance"):
            table.add_column(column, no_wrap=True)
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        for delta in result.score_deltas:
            table.add_row(delta.id, delta.score, fmt(delta.old), fmt(delta.new), fmt(delta.delta), fmt(delta.tolerance))
        console.print(table)
    tests = Table(title="aggregate tests")
    for column in ("test", "cases", "old", "new", "worse / CI", "better", "p", "significant"):
        tests.add_column(column, no_wrap=True)
    if result.accuracy:
        tests.add_row("accuracy vs expected", str(result.accuracy["cases"]), f"{result.accuracy['baseline']:.3f}",
                      f"{result.accuracy['current']:.3f}", "", "", "", "")
    for test in result.mcnemar:
        tests.add_row(f"McNemar ({test.basis})", str(test.cases), "", "", str(test.worse), str(test.better),
                      f"{test.p_value:.3g}", "yes" if test.significant else "no")
    for shift in result.bootstrap:
        tests.add_row(f"bootstrap mean {shift.score}", str(shift.cases), f"{shift.old_mean:.3f}",
                      f"{shift.new_mean:.3f}", f"[{shift.ci_low:+.3f}, {shift.ci_high:+.3f}]", "",
                      f"{shift.p_value:.3g}", "yes" if shift.significant else "no")
    console.print(tests)
    if result.passed:
        console.print("[green]PASS[/green]: no regression against the baseline")
    else:
        console.print("[bold red]FAIL[/bold red]: quality regressed")
        for failure in result.failures:
            console.print(f"  - {failure}")
