"""`autovalidators prepare fact-spans`: registered on the CLI's `prepare` group at start-up.

Nothing heavy is imported here; the command body imports the data-prep modules it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from autovalidators.inference.cli import console, prepare_app
from autovalidators.inference.config import CONFIG_DIR, ConfigError, load_config

from ..user_data_cli import COLUMNS_HELP, DATA_HELP, SPLIT_HELP, prepare_from_data, refuse_data_options


@prepare_app.command("fact-spans")
def prepare_fact_spans(
    config: Optional[Path] = typer.Option(None, help="typed config (default: configs/fact_spans.yaml); with --data: "
                                                     "the model's task config whose train/export recipe is used "
                                                     "(default: configs/fact_spans_model.yaml)"),
    out: Optional[Path] = typer.Option(None, "--out", help="output folder: <split>.jsonl, heldout/, data card "
                                                           "(default: data/fact_spans; with --data: "
                                                           "prepared/fact_spans_<data name>)"),
    data: Optional[str] = typer.Option(None, help=DATA_HELP),
    split: Optional[str] = typer.Option(None, help=SPLIT_HELP),
    columns: Optional[str] = typer.Option(None, help=COLUMNS_HELP),
) -> None:
    """Build span-labelled training data (synthetic + human) and the held-out benchmark set.

    Given the model's task config (`configs/fact_spans_model.yaml`: `prepare/train/export`
    sections), it runs the task's prepare step instead, which also writes the training mix.
    With `--data`, it prepares your own labelled answers instead (data_prep/USER_DATA.md).
    """
    import yaml

    from autovalidators.data_prep.io import DataError

    def is_task_config(path: Path) -> bool:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        return isinstance(raw, dict) and "prepare" in raw

    if data is not None:
        if config is not None and not is_task_config(config):
            console.print(f"[red]error:[/red] with --data, --config takes the model's task config (prepare/train/"
                          f"export sections, like configs/fact_spans_model.yaml); {config} is not one")
            raise typer.Exit(code=2)
        prepare_from_data("fact_spans", data, split=split, columns=columns, out=out, config=config)
        return
    refuse_data_options(split=split, columns=columns)
    config = config or CONFIG_DIR / "fact_spans.yaml"
    out = out or Path("data/fact_spans")
    if is_task_config(config):
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
