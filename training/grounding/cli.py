"""`autovalidators train|export fact-spans-combiner`: the fact-span model's stacked combiner;
`autovalidators benchmark heuristic-spans`: the lexical heuristic's span modes and support thresholds.

Nothing heavy is imported here; command bodies import scikit-learn and onnxruntime.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from autovalidators.inference.cli import benchmark_app, console, export_app, train_app
from autovalidators.inference.config import CONFIG_DIR, ConfigError, load_config

DEFAULT_CONFIG = CONFIG_DIR / "fact_spans_combiner.yaml"


@train_app.command("fact-spans-combiner", help="Fit the fact-span combiner (trees over grounding features).")
def train_combiner_command(
    config: Path = typer.Option(DEFAULT_CONFIG, help="configs/fact_spans_combiner.yaml"),
    cross_encoder: Optional[str] = typer.Option(None, help="override cross_encoder (a folder, or 'none')"),
    output_dir: Optional[str] = typer.Option(None, help="override output_dir"),
) -> None:
    from autovalidators.data_prep.io import DataError

    from autovalidators.training.grounding.combiner import CombinerConfig, train_combiner

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    try:
        settings = load_config(config, CombinerConfig)
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    overrides: dict[str, str | None] = {}
    if output_dir is not None:
        overrides["output_dir"] = output_dir
    if cross_encoder is not None:
        overrides["cross_encoder"] = None if cross_encoder == "none" else cross_encoder
    settings = settings.model_copy(update=overrides)
    try:
        summary = train_combiner(settings, config_source=str(config))
    except (DataError, FileNotFoundError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    console.print_json(json.dumps({"threshold": summary["threshold"], "span_mode": summary["span_mode"],
                                   **{k: v for k, v in summary["metrics"].items() if k != "feature_importance"}}))


@export_app.command("fact-spans-combiner", help="Assemble models/fact_spans from a combiner run and its cross-encoder.")
def export_combiner_command(
    run: Path = typer.Option(Path("runs/fact_spans_combiner"), help="the combiner's output_dir"),
    to: Path = typer.Option(Path("models/fact_spans"), help="the model folder to write"),
) -> None:
    from autovalidators.inference.manifest import ManifestError

    from autovalidators.training.grounding.export import export_combiner

    try:
        manifest = export_combiner(run, to)
    except (ManifestError, FileNotFoundError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    console.print(f"wrote {to}: " + ", ".join(f"{k} ({v[:12]}…)" for k, v in manifest.files.items()))


@benchmark_app.command("heuristic-spans", help="The lexical heuristic per judged set: example F1, character F1 of each span mode, "
                       "and both F1s by the support below which a sentence is flagged.")
def benchmark_heuristic_spans_command(
    split: str = typer.Option("dev", help="dev (choose a mode here) or test (the leave-one-out benchmark's held-out rows)"),
    data_dir: Path = typer.Option(Path("prepared/grounding"), help="`autovalidators prepare grounding` output"),
    gate_sets: Path = typer.Option(Path("out/gate_sets"), help="`autovalidators prepare gate-sets` output"),
    output: Optional[Path] = typer.Option(None, help="JSON report (default: out/benchmarks/heuristic_spans_<split>.json)"),
) -> None:
    from autovalidators.training.benchmarks.common import machine, print_table
    from autovalidators.training.benchmarks.heuristic_spans import (MODES, READINGS, compare_span_modes, reading_rows,
                                                                      table_rows, threshold_rows)

    try:
        report = compare_span_modes(data_dir, split, gate_sets)
    except (FileNotFoundError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    report.update(command=f"autovalidators benchmark heuristic-spans --split {split} --data-dir {data_dir} --gate-sets {gate_sets}",
                  machine=machine())
    output = output or Path("out") / "benchmarks" / f"heuristic_spans_{split}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    print_table(f"lexical heuristic ({split}): example F1, and character F1 by span mode (Δ vs "
                f"{next(iter(MODES))}, paired bootstrap)", table_rows(report),
                ["set", "rows", "example F1", "sentence F1 (shipped)", *MODES],
                console=console)
    thresholds = report["support_thresholds"]
    print_table(f"lexical heuristic ({split}): example / character F1 by the support below which a sentence is "
                f"flagged (one value everywhere; default {thresholds['supported_at']:g}; shipped "
                f"{thresholds['task_supported_at']} per task, Δ vs default, paired bootstrap)",
                threshold_rows(report), ["set", *thresholds["thresholds"], "Δ example", "Δ char", "Δ sentence"],
                console=console)
    print_table(f"lexical heuristic ({split}): the shipped heuristic minus it without each reading, example / "
                f"character / sentence F1 [95%, paired bootstrap]", reading_rows(report), ["set", *READINGS], console=console)
    console.print(f"wrote {output}")
