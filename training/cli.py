"""`autovalidators prepare|train|average|export|benchmark <task>` for every task in the registry.

Commands are registered per entry of `training.tasks.TASKS`, so a new task gets all five by
adding its spec. Nothing heavy is imported here: torch/transformers load inside command bodies.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from autovalidators.data_prep.user_data import USER_DATA_TASKS
from autovalidators.data_prep.user_data_cli import (COLUMNS_HELP, DATA_HELP, OUT_HELP, SPLIT_HELP, prepare_from_data,
                                                    refuse_data_options)
from autovalidators.inference.cli import average_app, benchmark_app, console, export_app, prepare_app, train_app
from autovalidators.inference.config import ConfigError

from autovalidators.training.tasks import TASKS, get_task

logger = logging.getLogger(__name__)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _verbose() -> None:
    # The package logs progress at INFO; the CLI's default root level is WARNING.
    logging.getLogger("autovalidators").setLevel(logging.INFO)


def _load(task: str, config: Optional[Path]):
    from autovalidators.training.config import load_task_config

    from autovalidators.inference.config import CONFIG_DIR

    spec = get_task(task)
    config = config or (CONFIG_DIR / spec.config_file if spec.config_file else None)
    try:
        return spec, load_task_config(config, spec.prepare_schema, spec.name)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _benchmark_command_line(cli_name: str, config: Optional[Path], model: Path, output: Path,
                            previous: Optional[Path] = None) -> str:
    """The command that reproduces a benchmark run: written into its report and manifest."""
    command = ["autovalidators", "benchmark", cli_name]
    if config is not None:
        command += ["--config", str(config)]
    if model != Path("models") / cli_name.replace("-", "_"):
        command += ["--model", str(model)]
    if previous is not None:
        command += ["--previous", str(previous)]
    return " ".join(command + ["--output", str(output)])


def _register(task: str) -> None:
    cli_name = task.replace("_", "-")
    config_help = f"task config YAML (default: configs/{get_task(task).config_file or task + '.yaml'})"

    def prepare_command(config: Optional[Path] = typer.Option(None, help=config_help)) -> None:
        from autovalidators.data_prep.io import DataError

        _verbose()
        spec, task_config = _load(task, config)
        try:
            card = spec.prepare_fn(task_config.prepare)
        except (DataError, FileNotFoundError) as exc:
            raise _fail(str(exc)) from None
        for name, stats in card["splits"].items():
            console.print(f"{name}: {stats['rows']} rows, labels {stats.get('label', {})}")
        for note in card["notes"]:
            console.print(f"note: {note}")

    def prepare_or_data_command(
        config: Optional[Path] = typer.Option(None, help=config_help + "; with --data: its train/export recipe"),
        data: Optional[str] = typer.Option(None, help=DATA_HELP),
        split: Optional[str] = typer.Option(None, help=SPLIT_HELP),
        columns: Optional[str] = typer.Option(None, help=COLUMNS_HELP),
        out: Optional[Path] = typer.Option(None, help=OUT_HELP),
    ) -> None:
        if data is None:
            refuse_data_options(split=split, columns=columns, out=out)
            prepare_command(config)
        else:
            prepare_from_data(task, data, split=split, columns=columns, out=out, config=config)

    if get_task(task).generic_prepare_command:
        # Tasks with a user-data schema take `--data` (data_prep/user_data.py); without it, as before.
        takes_data = task in USER_DATA_TASKS
        prepare_app.command(cli_name, help=f"Build the {task} training data and its data card"
                                           + (" (or from your own file: --data)." if takes_data else ".")
                            )(prepare_or_data_command if takes_data else prepare_command)

    @train_app.command(cli_name, help=f"Fine-tune the {task} model (CPU, or GPUs via `accelerate launch`).")
    def train_command(
        config: Optional[Path] = typer.Option(None, help=config_help),
        resume: bool = typer.Option(False, help="continue from <output_dir>/last"),
        output_dir: Optional[str] = typer.Option(None, help="override train.output_dir"),
        max_steps: Optional[int] = typer.Option(None, help="override train.max_steps"),
    ) -> None:
        from autovalidators.training.trainer import train

        _verbose()
        spec, task_config = _load(task, config)
        overrides = {k: v for k, v in {"output_dir": output_dir, "max_steps": max_steps}.items() if v is not None}
        train_config = task_config.train.model_copy(update=overrides)
        try:
            result = train(spec, train_config, resume=resume, config_source=str(config or ""))
        except (FileExistsError, FileNotFoundError, ValueError) as exc:
            raise _fail(str(exc)) from None
        console.print_json(json.dumps(result))

    @average_app.command(cli_name, help=f"Average the weights of {task} runs from one starting point into one "
                                        "model (greedy on dev by default); export it like a training run.")
    def average_command(
        run: list[Path] = typer.Option(..., help="a training output_dir (holds best/); repeat for each ingredient"),
        to: Path = typer.Option(..., help="the new run folder; its best/ is what `export --run` takes"),
        config: Optional[Path] = typer.Option(None, help=config_help + "; its train.dev_file chooses ingredients"),
        uniform: bool = typer.Option(False, help="average every run instead of choosing them greedily on dev"),
        metric: Optional[str] = typer.Option(None, help="the dev metric the greedy choice maximises (default: the "
                                                         "task's main metric, as in training)"),
    ) -> None:
        from autovalidators.training.weight_average import AverageError, average_runs

        _verbose()
        spec, task_config = _load(task, config)
        try:
            record = average_runs(spec, run, to, task_config.train, greedy=not uniform, metric=metric)
        except (AverageError, FileNotFoundError) as exc:
            raise _fail(str(exc)) from None
        chosen_by = record["weight_average"]["metric"]
        for ingredient in record["weight_average"]["ingredients"]:
            console.print(f"{'kept' if ingredient['kept'] else 'left out'}: {ingredient['run']} "
                          f"(dev {chosen_by} {ingredient[f'dev_{chosen_by}']:.4f})")
        console.print(f"wrote {to / 'best'}: dev {chosen_by} {record['dev_metrics'][chosen_by]:.4f}")

    @export_app.command(cli_name, help=f"Export a trained {task} run to ONNX fp32 + int8 with a manifest.")
    def export_command(
        run: Path = typer.Option(..., help="the training output_dir (holds best/)"),
        to: Path = typer.Option(Path("models") / task, help="the shipped model folder to write"),
        config: Optional[Path] = typer.Option(None, help=config_help),
    ) -> None:
        from autovalidators.training.export import ExportError, export

        _verbose()
        spec, task_config = _load(task, config)
        try:
            manifest = export(spec, run, to, task_config)
        except (ExportError, FileNotFoundError) as exc:
            raise _fail(str(exc)) from None
        console.print(f"wrote {to}: " + ", ".join(f"{k} ({v[:12]}…)" for k, v in manifest.files.items()))
        console.print_json(json.dumps(manifest.metrics))

    @benchmark_app.command(cli_name, help=f"Quality (fp32 vs int8) and latency of the {task} model.")
    def benchmark_command(
        model: Path = typer.Option(Path("models") / task, help="shipped model folder (int8 model.onnx)"),
        run: Optional[Path] = typer.Option(None, help="training run with onnx/ (fp32) to compare; default: "
                                                      "the manifest's training.run_dir"),
        config: Optional[Path] = typer.Option(None, help=config_help),
        output: Optional[Path] = typer.Option(None, help="JSON report (default: out/benchmarks/<task>.json, "
                                                          "<task>_loo.json with --leave-one-out)"),
        threads: int = typer.Option(2, help="onnxruntime/torch threads for the latency runs"),
        torch_latency: bool = typer.Option(True, help="also time torch eager when torch is installed"),
        update_manifest: bool = typer.Option(False, help="write the measured metrics into the manifest"),
        previous: Optional[Path] = typer.Option(None, help="another model folder of this task (the one being "
                                                            "replaced), compared on the same rows (tone)"),
        leave_one_out: bool = typer.Option(False, "--leave-one-out", help="fact-spans: fit the combiner recipe "
                                           "without each judged set and score it beside the heuristic"),
        recipe: Path = typer.Option(Path("configs/fact_spans_combiner.yaml"), help="--leave-one-out: the recipe"),
        cross_encoder: Optional[str] = typer.Option(None, help="--leave-one-out: the frozen cross-encoder's "
                                                    "folder or 'none' (default: the recipe's, else --model's)"),
        candidates: Optional[int] = typer.Option(None, help="--leave-one-out --update-manifest: how many candidate "
                                                 "recipes have been scored on these held-out rows, this one included"),
    ) -> None:
        from autovalidators.training.benchmarks.common import run_benchmark

        _verbose()
        if leave_one_out:
            if task != "fact_spans":
                raise _fail("--leave-one-out is for fact-spans")
            _leave_one_out(recipe, model, cross_encoder, output or Path("out/benchmarks/fact_spans_loo.json"), threads,
                           update_manifest, candidates)
            return
        output = output or Path("out") / "benchmarks" / f"{task}.json"
        spec, task_config = _load(task, config)
        extra = {"previous": previous} if previous is not None else {}
        try:
            report = run_benchmark(spec, task_config, model, run_dir=run, threads=threads,
                                   torch_latency=torch_latency, update_manifest=update_manifest,
                                   command=_benchmark_command_line(cli_name, config, model, output, previous),
                                   **extra)
        except (FileNotFoundError, ValueError) as exc:
            raise _fail(str(exc)) from None
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        console.print(f"wrote {output}")


def _leave_one_out(recipe: Path, model: Path, cross_encoder: Optional[str], output: Path, threads: int,
                   update_manifest: bool, candidates: Optional[int]) -> None:
    from autovalidators.data_prep.io import DataError
    from autovalidators.inference.config import ConfigError, load_config
    from autovalidators.training.benchmarks.common import update_manifest_metrics
    from autovalidators.training.benchmarks.fact_spans_loo import leave_one_out, numeric_rows
    from autovalidators.training.grounding.combiner import CombinerConfig

    try:
        config = load_config(recipe, CombinerConfig)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    # The recipe's cross-encoder; where its export folder is not on this machine, the --model folder's,
    # which `export fact-spans-combiner` copied from it. A recipe without one is lexical.
    if cross_encoder:
        encoder = None if cross_encoder == "none" else Path(cross_encoder)
    elif config.cross_encoder is None:
        encoder = None
    else:
        encoder = Path(config.cross_encoder) if Path(config.cross_encoder).is_dir() else model
    command = (f"autovalidators benchmark fact-spans --leave-one-out --recipe {recipe} --model {model}"
               + (f" --cross-encoder {cross_encoder}" if cross_encoder else ""))
    try:
        root = Path("runs/fact_spans_loo")
        report = leave_one_out(config, cross_encoder=encoder, cache_dir=root, threads=threads, label=f"({recipe.name})",
                               out_dir=root / f"{recipe.stem}-{'lexical' if encoder is None else 'frozen_cross_encoder'}")
    except (DataError, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    report["command"] = command
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {output}")
    if update_manifest:
        if encoder is None or encoder.resolve() != model.resolve():
            raise _fail(f"--update-manifest records the leave-one-out rows of {model}'s own recipe: run it without "
                        "--cross-encoder")
        update_manifest_metrics(model, {"leave_one_out": {
            "command": command, "cross_encoder_sha256": report.get("cross_encoder_sha256"),
            "sets": numeric_rows(report), "ship_rule": report["ship_rule"],
            **({"candidates_scored_on_held_out_rows": candidates} if candidates else {})}})


for _task in TASKS:
    _register(_task)


@train_app.command("tone-head", help="Refit the tone model's output layer on its frozen encoder (neutral text and "
                                     "identity statements added; CPU, minutes).")
def train_tone_head_command(
    config: Path = typer.Option(Path("configs/tone_head.yaml"), help="recipe (schema training.tone_head.ToneHeadConfig)"),
    to: Optional[Path] = typer.Option(None, help="also ship the new model into this folder (e.g. models/tone)"),
    skip_prepare: bool = typer.Option(False, help="reuse the prepared files when they exist"),
) -> None:
    from rich.table import Table

    from autovalidators.data_prep.io import DataError
    from autovalidators.training.tone_head import load_config, refit

    _verbose()
    try:
        report = refit(load_config(config), to=to, skip_prepare=skip_prepare, config_source=config)
    except (DataError, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    table = Table(title=f"tone head refit ({config})")
    for column in ("split", "what", "texts", "flagged / F1"):
        table.add_column(column)
    for split in ("dev",):
        gold = report[split]["gold_sources"]
        table.add_row(split, "gold sources macro-F1", "", f"{gold['macro_f1']:.3f}")
        for label, metrics in gold["labels"].items():
            if metrics["known"]:
                table.add_row(split, f"  {label} F1", str(metrics["known"]), f"{metrics['f1']:.3f}")
        for key, row in {**report[split]["neutral_flags"], **report[split]["statements"]}.items():
            table.add_row(split, f"flagged: {key}", str(row["texts"]), f"{row['rate']:.1%}")
    console.print(table)
    console.print(f"thresholds: {json.dumps({k: round(v, 3) for k, v in report['thresholds'].items()})}")
    for language, cuts in report["thresholds_by_language"].items():
        console.print(f"thresholds ({language}): {json.dumps({k: round(v, 3) for k, v in cuts.items()})}")
    console.print(f"wrote {Path(load_config(config).output_dir) / 'report.json'}" + (f" and shipped to {to}" if to else ""))


@export_app.command("unsigned-int8", help="Store a model folder's int8 weights as uint8 (lossless), so CPUs with "
                                          "and without VNNI give the same scores; re-hashes its manifest.")
def unsigned_int8_command(
    model: Path = typer.Argument(..., help="a model folder written by `autovalidators export`"),
) -> None:
    from autovalidators.inference.manifest import ManifestError, load_manifest, write_manifest
    from autovalidators.training.unsigned_int8 import UnsignedInt8Error, make_file_unsigned

    try:
        manifest = load_manifest(model)  # a folder that verifies before, so the new hashes vouch for this change only
        changed = {path.name: make_file_unsigned(path) for path in sorted(model.glob("*.onnx"))}
    except (ManifestError, UnsignedInt8Error) as exc:
        raise _fail(str(exc)) from None
    if not any(changed.values()):
        console.print(f"{model}: no int8 weights to convert")
        return
    write_manifest(model, manifest.model_dump(exclude={"format_version", "files"}))
    console.print(f"{model}: " + ", ".join(f"{name} {count} tensors" for name, count in changed.items() if count)
                  + "; manifest re-hashed. Its benchmark.json names the old sha256: rerun `autovalidators benchmark`")


@benchmark_app.command("tone-dev", help="Tone candidates side by side on dev rows (forum messages, toxic comments, "
                                        "neutral sources, identity statements, genre files), each minus the first.")
def benchmark_tone_dev_command(
    models: list[Path] = typer.Argument(..., help="model folders; the first is the reference (e.g. models/tone)"),
    dev_file: Path = typer.Option(..., help="a prepared tone dev file (prepare tone writes dev_sampled.jsonl)"),
    genre_file: Optional[list[Path]] = typer.Option(None, help="JSONL of neutral texts of one genre (field `text`); "
                                                    "repeat the option for several, each its own measure"),
    recipe: Path = typer.Option(Path("configs/tone_head_wiki_encoder.yaml"),
                                help="tone head recipe whose `neutral_sources` name the neutral rows"),
    output: Path = typer.Option(Path("out/benchmarks/tone_dev.json"), help="JSON report"),
    threads: int = typer.Option(2, help="onnxruntime threads"),
) -> None:
    from autovalidators.data_prep.io import DataError
    from autovalidators.inference.manifest import ManifestError
    from autovalidators.training.benchmarks.tone_dev import compare, dev_rows, table_rows
    from autovalidators.training.tone_head import load_config

    from rich.table import Table

    try:
        rows = dev_rows(dev_file, load_config(recipe).neutral_sources, genre_file or ())
        report = compare(models, rows, threads)
    except (DataError, ManifestError, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    report["command"] = " ".join(["autovalidators benchmark tone-dev", *map(str, models), "--dev-file", str(dev_file),
                                  *(arg for path in genre_file or () for arg in ("--genre-file", str(path))),
                                  "--recipe", str(recipe)])
    table = Table(title=f"tone dev rows ({dev_file}); later models minus {models[0]}, paired bootstrap [95%]")
    for column in ["measure", "rows", *map(str, models), *(f"{m} − first" for m in models[1:])]:
        table.add_column(column)
    for cells in table_rows(report):
        table.add_row(*cells)
    console.print(table)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {output}")
