"""`autovalidators prepare fact-spans`: registered on the CLI's `prepare` group at start-up.

Nothing heavy is imported here; the command body imports the data-prep modules it runs.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from autovalidators.inference.cli import console, prepare_app
from autovalidators.inference.config import CONFIG_DIR, ConfigError, load_config


@prepare_app.command("fact-spans")
def prepare_fact_spans(
    config: Path = typer.Option(CONFIG_DIR / "fact_spans.yaml", help="typed config (configs/fact_spans.yaml)"),
    out: Path = typer.Option(Path("data/fact_spans"), "--out", help="output folder: <split>.jsonl, heldout/, data card"),
) -> None:
    """Build span-labelled training data (synthetic + human) and the held-out benchmark set.

    Given the model's task config (`configs/fact_spans_model.yaml`: `prepare/train/export`
    sections), it runs the task's prepare step instead, which also writes the training mix.
    """
    import yaml

    from autovalidators.data_prep.io import DataError

    raw = yaml.safe_load(config.read_text(encoding="utf-8")) if config.is_file() else None
    if isinstance(raw, dict) and "prepare" in raw:
        _prepare_task(config)
        return

    from .build import prepare
    from .config import FactSpansPrepConfig

    try:
        settings = load_config(config, FactSpansPrepConfig)
        report = prepare(settings, out)
    except (ConfigError, DataError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    table = Table(title=f"fact-spans data in {out}")
    for column in ("split", "rows", "hallucinated", "by source", "by language"):
        table.add_column(column)
    for name, stats in report.card["splits"].items():
        table.add_row(name, str(stats["rows"]), str(stats["hallucinated"].get("True", 0)),
                      ", ".join(f"{k} {v}" for k, v in stats["source"].items()),
                      ", ".join(f"{k} {v}" for k, v in stats["language"].items()))
    console.print(table)
    if report.errors:
        console.print(f"[yellow]{len(report.errors)} source row(s) skipped[/yellow]; first: {report.errors[0]}")
    console.print(f"data card: {out / 'DATA_CARD.md'}")


def _prepare_task(config: Path) -> None:
    """The fact-span task's own prepare (data + `train_mix.jsonl`) from a task config."""
    from autovalidators.data_prep.io import DataError
    from autovalidators.training.config import load_task_config
    from autovalidators.training.tasks import get_task

    spec = get_task("fact_spans")
    try:
        task_config = load_task_config(config, spec.prepare_schema, spec.name)
        card = spec.prepare_fn(task_config.prepare)
    except (ConfigError, DataError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    for name, stats in card["splits"].items():
        console.print(f"{name}: {stats['rows']} rows")
