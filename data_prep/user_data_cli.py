"""`--data` on `autovalidators prepare <task>`: your own file or a hub dataset (data_prep.user_data).

The prepare commands of every task that takes user data (training/cli.py for qa-relevance and
tone, data_prep/fact_spans/cli.py, training/abstention/cli.py) share these options and this body.
Light at import time (typer and the schemas, no torch): `datasets` and the task configs load
inside `prepare_from_data`.

Beside the data it writes `config.yaml`: the task's training recipe (the task's config file, or
`--config`) with `prepare`'s data folder and `train.train_file/dev_file` pointed at the prepared
data, so `train|export|benchmark <task> --config <out>/config.yaml` run unchanged on it.

Exit codes: 0 prepared; 1 prepared, but some rows were bad (each is named, and skipped); 2 nothing
prepared (unreadable data, a wrong mapping, a missing column, a bad config).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import typer

from autovalidators.inference.cli import console

# The tasks data_prep.user_data has a schema for (a test keeps the two lists equal).
DATA_HELP = ("your data instead of the public recipe: a .json/.jsonl/.csv/.parquet file or a Hugging Face dataset "
             "name; schemas in data_prep/USER_DATA.md")
SPLIT_HELP = ("with --data: put every row into this split (train, dev or test) instead of splitting 80/10/10 by "
              "group; for a hub dataset also the split read")
COLUMNS_HELP = "with --data: your column names for ours, e.g. user_msg=question,bot_reply=answer,ok=label"
OUT_HELP = "with --data: the output folder (default: prepared/<task>_<data name>)"
SHOWN_BAD_ROWS = 20


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def refuse_data_options(**options: Any) -> None:
    """--split/--columns/--out mean nothing without --data: say so instead of ignoring them."""
    given = [f"--{name}" for name, value in options.items() if value is not None]
    if given:
        raise _fail(f"{', '.join(given)} only apply with --data")


def _recipe(task: str, config: Optional[Path]) -> dict[str, Any]:
    """The task config whose train/export sections config.yaml is written from (default: the task's)."""
    if task == "abstention":
        from autovalidators.training.abstention.train import load_abstention_config

        return load_abstention_config(config).model_dump(mode="json")
    from autovalidators.inference.config import CONFIG_DIR
    from autovalidators.training.config import load_task_config
    from autovalidators.training.tasks import get_task

    spec = get_task(task)
    path = config or CONFIG_DIR / (spec.config_file or f"{spec.name}.yaml")
    return load_task_config(path, spec.prepare_schema, spec.name).model_dump(mode="json")


def write_task_config(task: str, out: Path, recipe: dict[str, Any]) -> Path:
    """`<out>/config.yaml`: `recipe` (a task config as a dict) with its data paths pointed at `out`."""
    import yaml

    from .user_data import SCHEMAS

    config = {"prepare": {SCHEMAS[task].data_key: str(out)},
              **{key: value for key, value in recipe.items() if key != "prepare"}}
    train = dict(config.get("train") or {})
    if task != "abstention":  # abstention reads <prepare.out_dir>/<split>.jsonl itself
        train.update(train_file=str(out / "train.jsonl"), dev_file=str(out / "dev.jsonl"))
    train["output_dir"] = str(Path("runs") / out.name)
    config["train"] = train
    cli = task.replace("_", "-")
    header = (f"# Written by `autovalidators prepare {cli} --data`: the task's recipe pointed at this folder.\n"
              f"# autovalidators train {cli} --config {out / 'config.yaml'}   (then export / benchmark, same "
              "--config)\n# Not a `prepare` config: `prepare --config` would rebuild the public-data recipe.\n")
    path = out / "config.yaml"
    path.write_text(header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _check_written(task: str, path: Path) -> None:
    """config.yaml must load like any task config, or `train --config` would fail later."""
    if task == "abstention":
        from autovalidators.training.abstention.train import load_abstention_config

        load_abstention_config(path)
        return
    from autovalidators.training.config import load_task_config
    from autovalidators.training.tasks import get_task

    spec = get_task(task)
    load_task_config(path, spec.prepare_schema, spec.name)


def default_out(task: str, data: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(data).stem if Path(data).suffix else data.rstrip("/").split("/")[-1])
    return Path("prepared") / f"{task}_{name}"


def prepare_from_data(task: str, data: str, *, split: Optional[str], columns: Optional[str], out: Optional[Path],
                      config: Optional[Path]) -> None:
    """Runs `prepare_user_data`, prints splits, label counts and bad rows; exits 1 on bad rows."""
    import logging

    from autovalidators.inference.config import ConfigError

    try:
        import datasets
    except ImportError:
        raise _fail("--data reads files with Hugging Face `datasets`: pip install -e '.[train]'") from None

    from .user_data import UserDataError, prepare_user_data

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    datasets.disable_progress_bars()  # a progress bar per tiny file is noise in a command's output
    out = out or default_out(task, data)
    try:
        recipe = _recipe(task, config)
        report = prepare_user_data(task, data, out, split=split, columns=columns)
        config_path = write_task_config(task, out, recipe)
        _check_written(task, config_path)
    except (UserDataError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    for name, stats in report.card["splits"].items():
        counts = "; ".join(f"{k}: " + ", ".join(f"{value} {n}" for value, n in counted.items())
                           for k, counted in stats.items() if k != "rows")
        console.print(f"{name}: {stats['rows']} rows ({counts})")
    for note in report.card["notes"]:
        if not note.startswith("skipped row "):  # bad rows are printed below
            console.print(f"note: {note}")
    for bad in report.bad_rows[:SHOWN_BAD_ROWS]:
        console.print(f"[red]skipped[/red] {bad}")
    cli = task.replace("_", "-")
    console.print(f"wrote {out}/: dataset/ (Arrow DatasetDict), <split>.jsonl, DATA_CARD.md, config.yaml")
    console.print(f"next: autovalidators train {cli} --config {config_path}")
    if report.bad_rows:
        console.print(f"{len(report.bad_rows)} bad row(s) skipped, {sum(map(len, report.splits.values()))} kept; "
                      f"all are listed in {out / 'bad_rows.jsonl'}")
        raise typer.Exit(code=1)
