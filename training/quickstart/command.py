"""The body of `autovalidators quickstart --train` (the command itself lives in inference/cli.py,
which imports this module only when `--train` is given, so plain `quickstart` stays torch-free)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

DEFAULT_ROOT = Path("out") / "quickstart-train"


def _fail(console: Console, message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def default_out() -> Path:
    return DEFAULT_ROOT / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")


def run_train_quickstart(out: Path | None, base_model: str | None, steps: int | None, config: Path | None) -> None:
    """Loads the config, runs the loop, prints the closing tables and the output folder.

    Exit codes as elsewhere: 2 when a stage (or the config/options) could not run.
    """
    from autovalidators.inference.run import console as cli_console, print_summary
    from autovalidators.inference.config import ConfigError

    # Bound to the stderr of now: stages redirect sys.stderr into their logs, the bars must not follow.
    console = Console(file=sys.stderr, width=cli_console.width)
    try:
        from autovalidators.training.quickstart.config import load_quickstart_config

        settings = load_quickstart_config(config).with_overrides(base_model=base_model, steps=steps)
    except (ConfigError, ValueError) as exc:
        raise _fail(console, str(exc)) from None
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise _fail(console, f"{exc}; `quickstart --train` needs the train extra: pip install 'autovalidators[train]'")
    out = out or default_out()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise _fail(console, f"{out} exists and is not an empty folder; choose another --out")
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise _fail(console, f"{exc.name} is not installed; `quickstart --train` needs the train extra: "
                             "pip install 'autovalidators[train]'") from None
    # No hub downloads: "minilm" and local folders need none, and a hub name must already be cached.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from autovalidators.training.base_models.registry import BaseModelError, resolve_base_model

    try:
        resolved = resolve_base_model(settings.base_model)
    except BaseModelError as exc:
        raise _fail(console, f"--base-model: {exc}") from None
    if not Path(resolved).is_dir() and os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        # A hub name offline must already be cached; say so now rather than after the data stage.
        from huggingface_hub import try_to_load_from_cache

        cached = "/" in resolved and not resolved.startswith(("/", ".", "~")) and \
            isinstance(try_to_load_from_cache(resolved, "config.json"), str)
        if not cached:
            raise _fail(console, f"--base-model {settings.base_model!r}: no such model folder, and not a Hugging "
                                 "Face model in the local cache (HF_HUB_OFFLINE is set); use 'minilm' or a folder")

    from autovalidators.training.quickstart.pipeline import Quickstart, QuickstartError

    out.mkdir(parents=True, exist_ok=True)
    console.print(f"quickstart --train: base model {settings.base_model}, output {out}")
    try:
        outcome = Quickstart(settings, out, console).run()
    except QuickstartError as exc:
        raise _fail(console, f"{exc}\nPartial outputs are in {out}") from None

    print_summary(outcome.results, outcome.errors, outcome.gate)
    table = Table(title="quickstart --train")
    for column in ("stage", "seconds"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for stage, seconds in outcome.timings.items():
        table.add_row(stage, f"{seconds:.1f}")
    console.print(table)
    quality = Table(title="fresh models (light benchmark on held-out bundled data)")
    for column in ("validator", "metric", "value", "n", "int8 MB"):
        quality.add_column(column)
    for task, numbers in outcome.summary.get("benchmarks", {}).items():
        value = numbers.get("value")
        quality.add_row(task, str(numbers.get("metric")), "-" if value is None else f"{value:.3f}",
                        str(numbers.get("n")), str(outcome.summary.get("models", {}).get(task, {}).get("model_mb")))
    console.print(quality)
    console.print(f"report: {outcome.summary.get('report')}")
    console.print(f"[bold]output folder: {out}[/bold]")
    if outcome.errors:
        raise typer.Exit(code=1)
