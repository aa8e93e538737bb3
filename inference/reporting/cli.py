"""`autovalidators report`, `autovalidators card`, `autovalidators prepare obedience` and `autovalidators benchmark obedience`.

Registered at CLI start (`inference.cli.COMMAND_MODULES`); nothing heavy is imported here:
matplotlib, the data-prep builders and the gate load inside the command bodies.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..cli import _build_gate, _fail, app, benchmark_app, console, prepare_app
from ..config import CONFIG_DIR, ConfigError, load_config

DEFAULT_PAIRS = Path("out/obedience/pairs.jsonl")


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=False)


def _argv(context: typer.Context) -> str:
    """The running command with every option spelled out (defaults included): exact to re-run."""
    parts = ["autovalidators", *context.command_path.split()[1:]]
    for param in context.command.params:
        value = context.params.get(param.name or "")
        if value is None or not param.opts:
            continue
        if getattr(param, "is_flag", False):
            if value or getattr(param, "secondary_opts", None):
                parts.append(param.opts[0] if value else param.secondary_opts[0])
            continue
        parts += [param.opts[0], str(value)]
    return shlex.join(parts)


@app.command("report")
def report(
    ctx: typer.Context,
    out: Path = typer.Option(Path("reports/latest"), "--out", help="folder for report.json, report.md, report.html"),
    benchmarks: Optional[Path] = typer.Option(None, "--benchmarks", help="folder of benchmark JSONs "
                                              "(default: the config's benchmarks_dir, out/benchmarks)"),
    run: bool = typer.Option(False, "--run", help="run every benchmark first (those whose model exists)"),
    config: Path = typer.Option(CONFIG_DIR / "report.yaml", help="report config (configs/report.yaml)"),
) -> None:
    """One report for all validators: P/R/F1 tables, curves, calibration, latency, worst errors, provenance."""
    from .build import build_report, draw_figures, run_benchmarks, write_report
    from .plots import require_matplotlib
    from .schema import ReportConfig

    try:
        settings = load_config(config, ReportConfig)
        require_matplotlib()
    except (ConfigError, ImportError) as exc:
        raise _fail(str(exc)) from None
    benchmarks_dir = benchmarks or Path(settings.benchmarks_dir)
    steps = len(settings.sections) * (3 if run else 2) + 1
    with _progress() as progress:
        task = progress.add_task("report", total=steps)

        def step(description: str) -> None:
            progress.update(task, description=description, advance=1)

        outcomes = run_benchmarks(settings, benchmarks_dir, out / "logs", step) if run else None
        built = build_report(settings, benchmarks_dir, out.name, _argv(ctx), outcomes, step)
        figures = draw_figures(built, settings, step)
        step("write")
        paths = write_report(built, figures, out)
        progress.update(task, completed=steps, description="done")
    table = Table(title=f"report {out}")
    for column in ("section", "status", "metric rows", "figures", "note"):
        table.add_column(column)
    for section in built.sections:
        table.add_row(section.name, section.status, str(len(section.metrics)),
                      str(sum(1 for f in figures if f.section == section.name)),
                      "; ".join(x for x in ((outcomes or {}).get(section.name), section.message) if x))
    console.print(table)
    console.print("wrote " + ", ".join(str(p) for p in paths.values()))


@prepare_app.command("obedience")
def prepare_obedience(
    config: Path = typer.Option(CONFIG_DIR / "fact_spans.yaml", help="fact-spans config whose `reading` sets are used"),
    output: Path = typer.Option(DEFAULT_PAIRS, "--out", help="JSONL of obedience pairs"),
    per_language: int = typer.Option(60, min=1, help="pairs per language, at most"),
    seed: int = typer.Option(13, help="the same seed gives the same pairs"),
) -> None:
    """Counterfactual contexts with a context-following and a world-knowledge answer each."""
    from ...data_prep.io import DataError, write_jsonl
    from ...data_prep.obedience import build_from_config

    try:
        with console.status("building obedience pairs"):
            pairs, messages = build_from_config(config, per_language=per_language, seed=seed)
    except (ConfigError, DataError) as exc:
        raise _fail(str(exc)) from None
    count = write_jsonl(output, pairs)
    console.print(f"wrote {count} pairs to {output}" + (f"; {len(messages)} source row(s) skipped" if messages else ""))


@benchmark_app.command("obedience")
def benchmark_obedience(
    ctx: typer.Context,
    pairs: Path = typer.Option(DEFAULT_PAIRS, "--pairs",
                               help="JSONL of pairs (built first when it is the default and absent)"),
    json_out: Path = typer.Option(Path("out/benchmarks/obedience.json"), "--json", help="where to write the JSON"),
    validators: Optional[str] = typer.Option(None, help="comma-separated validator names (default: the gate's)"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators"),
    gate_config: Optional[Path] = typer.Option(None, "--gate-config", help="gate policy YAML"),
) -> None:
    """How often each validator sides with a counterfactual context over world knowledge."""
    from ..manifest import sha256_of
    from .obedience import read_pairs, score_obedience

    if not pairs.is_file():
        if pairs != DEFAULT_PAIRS:
            raise _fail(f"{pairs}: no such file; build it with `autovalidators prepare obedience --out {pairs}`")
        prepare_obedience(config=CONFIG_DIR / "fact_spans.yaml", output=pairs, per_language=60, seed=13)
    records, errors = read_pairs(pairs)
    if not records:
        raise _fail(f"{pairs}: no valid pairs" + (f" (first error: {errors[0]})" if errors else ""))
    gate = _build_gate(gate_config, validators, models_dir, judge=False)
    with _progress() as progress:
        task = progress.add_task("obedience pairs", total=len(records))
        result = score_obedience(gate, records, progress=lambda n: progress.advance(task, n))
    models = result["models"]
    report = {"command": _argv(ctx), "data": {"pairs": str(pairs)}, "data_sha256": {"pairs": sha256_of(pairs)},
              "model_sha256": "; ".join(f"{n}={m.get('sha256') or m.get('kind')}" for n, m in models.items()
                                        if n != "gate"),
              "bad_lines": errors, **result}
    table = Table(title=f"obedience: {len(records)} counterfactual pairs")
    for column in ("validator", "kind", "pairs", "sides w/ context", "sides w/ world", "no preference",
                   "world flagged", "context flagged"):
        table.add_column(column, justify="left" if column in ("validator", "kind") else "right")
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    for name, values in result["validators"].items():
        table.add_row(name, str(models.get(name, {}).get("kind", "")), str(values["pairs"]),
                      pct(values["sides_context_rate"]), pct(values["sides_world_rate"]),
                      pct(values["no_preference_rate"]), pct(values["world_flagged_rate"]),
                      pct(values["context_flagged_rate"]))
    console.print(table)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    console.print(f"wrote {json_out}")
    for error in errors:
        console.print(f"[red]bad line[/red] {error}")
    if errors:
        raise typer.Exit(code=1)


@app.command("card")
def card(
    names: Optional[list[str]] = typer.Argument(None, help="model folders to write, e.g. tone qa_relevance "
                                                "(default: every folder of the models dir with a manifest.json)"),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="folder of model folders (default: models/)"),
    check: bool = typer.Option(False, "--check", help="write nothing; exit 1 naming every card that differs "
                               "from what would be generated (for CI)"),
) -> None:
    """Write each model's card, models/<name>/README.md, from its manifest.json, benchmark.json and card.yaml."""
    from ..validators import DEFAULT_MODELS_DIR
    from .model_card import model_folders, stale_cards, write_card

    try:
        folders = model_folders(models_dir or DEFAULT_MODELS_DIR, names)
        if check:
            stale = stale_cards(folders)
        else:
            changed = {folder: write_card(folder) for folder in folders}
    except ValueError as exc:  # ManifestError, CardError, ConfigError: each names its file
        raise _fail(str(exc)) from None
    if check:
        for path in stale:
            console.print(f"[red]stale card[/red] {path}: regenerate it with "
                          f"`autovalidators card {path.parent.name}`")
        if stale:
            raise typer.Exit(code=1)
        console.print(f"{len(folders)} card(s) up to date")
        return
    for folder, was_changed in changed.items():
        console.print(f"{'wrote' if was_changed else 'unchanged'} {folder / 'README.md'}")
