"""`autovalidators batch`: score a log of any size, locally or on Ray Data, resumable.

Registered at CLI start (`inference.cli.COMMAND_MODULES`); pyarrow and Ray load inside the command.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .cli import _fail, app, benchmark_app, console
from .config import ConfigError, load_gate_config
from .manifest import MANIFEST_NAME, ManifestError, load_manifest
from .validators import DEFAULT_MODELS_DIR, known_validators

ENGINES = ("local", "ray")
ERRORS_SHOWN = 10  # bad records printed in the summary; all are in the output


def default_threads(engine: str, workers: int) -> int | None:
    """onnxruntime threads per worker: the cores shared out (Ray: one CPU per actor)."""
    if engine == "ray":
        return 1
    return max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None


def check_models(names: list[str], folder: Path) -> None:
    """Unknown validator names and model folders that fail their sha256 check stop the run here,
    with the CLI's message, before workers start (there they would surface as worker tracebacks)."""
    unknown = [n for n in names if n not in known_validators()]
    if unknown:
        raise ValueError(f"unknown validator(s) {unknown}; choose from {', '.join(known_validators())}")
    for name in names:
        if (folder / name / MANIFEST_NAME).is_file():
            load_manifest(folder / name)


def score_log(input: Path, output: Path, *, engine: str = "local", workers: int = 1, ray_address: str | None = None,
              config: str | None = None, validators: list[str] | None = None, models_dir: str | None = None,
              threads: int | None = None, shard_lines: int = 256, progress: Any = None) -> dict[str, Any]:
    """Scores `input` into `output` (skipping what is there already) and returns the run's summary.

    `progress`: an object with `start(total)` (records still to score) and `advance(n)` (records
    written), for a progress bar.
    Raises `BatchInputError`, `ConfigError`, `ManifestError` or `ValueError` before scoring starts
    when the run cannot start.
    """
    from .batch_engine import ShardScorer, peak_rss_mb, run_local, run_ray
    from .batch_io import open_sink, plan_shards

    if engine not in ENGINES:
        raise ValueError(f"--engine {engine!r}: choose {' or '.join(ENGINES)}")
    gate_config = load_gate_config(config)  # a bad policy fails here, before any worker starts
    names = validators or gate_config.validators
    check_models(names, Path(models_dir or gate_config.models_dir or DEFAULT_MODELS_DIR))
    sink = open_sink(output)
    done = sink.done_keys()
    shards, total = plan_shards(input, shard_lines)
    scorer = ShardScorer(config, names, models_dir, threads if threads else default_threads(engine, workers), done)
    if engine == "local" and workers <= 1:
        scorer.gate  # noqa: B018  (builds the models now: a bad model folder fails before the bar starts)
    if progress:
        progress.start(max(total - len(done), 0))
    started = time.perf_counter()
    if engine == "ray":
        chunks: Iterator[dict[str, list]] = run_ray(shards, scorer, workers, ray_address)
    else:
        chunks = run_local(shards, scorer, workers)
    decisions: Counter[str] = Counter()
    errors: list[str] = []
    worker_rss: dict[int, float] = {}
    worker_cpu: dict[int, float] = {}
    written = 0
    first_result: float | None = None  # seconds until the first results arrived
    try:
        for chunk in chunks:
            for pid, rss, cpu in zip(chunk.pop("worker_pid"), chunk.pop("worker_peak_rss_mb"), chunk.pop("worker_cpu_s")):
                worker_rss[int(pid)] = max(worker_rss.get(int(pid), 0.0), float(rss))
                worker_cpu[int(pid)] = max(worker_cpu.get(int(pid), 0.0), float(cpu))
            sink.write(chunk)
            written += len(chunk["id"])
            if first_result is None:
                first_result = time.perf_counter() - started
            decisions.update(d for d in chunk["decision"] if d)
            errors.extend(e for e in chunk["error"] if e)
            if progress:
                progress.advance(len(chunk["id"]))
    finally:
        sink.close()
    seconds = time.perf_counter() - started
    return {
        "input": str(input), "output": str(output), "engine": engine, "workers": workers,
        "threads_per_worker": scorer.threads, "validators": list(names),
        "records": total, "skipped_already_done": len(done), "written": written,
        "decisions": dict(sorted(decisions.items())), "bad_records": len(errors), "errors": errors[:100],
        "seconds": round(seconds, 3), "cases_per_s": round(written / seconds, 2) if seconds > 0 else None,
        "first_result_seconds": round(first_result, 3) if first_result is not None else None,
        "workers_peak_rss_mb": {str(pid): rss for pid, rss in sorted(worker_rss.items())},
        # CPU time of the scoring workers (model loading included), whatever the machine's load.
        "workers_cpu_s": {str(pid): round(cpu, 2) for pid, cpu in sorted(worker_cpu.items())},
        "driver_peak_rss_mb": round(peak_rss_mb(), 1),
    }


@app.command("batch")
def batch(
    input: Path = typer.Argument(..., help="cases as JSONL, or Parquet (a file or a folder of .parquet files)"),
    output: Path = typer.Option(..., "--output", "-o", help="results: .jsonl (validate's lines) or .parquet "
                                "(a folder of part files); a rerun skips the ids already there"),
    engine: str = typer.Option("local", help="local (this process, or a process pool with --workers) or ray"),
    workers: int = typer.Option(1, min=1, help="parallel workers, each loads the models once"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="an existing Ray cluster "
                                              "(e.g. auto or ray://host:10001); default: start a local one"),
    validators: Optional[str] = typer.Option(None, help="comma-separated: fact_spans,qa_relevance,tone"),
    config: Optional[Path] = typer.Option(None, help="gate policy YAML (default: configs/gate.yaml)"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators (default: models/)"),
    threads: Optional[int] = typer.Option(None, min=1, help="onnxruntime threads per worker "
                                          "(default: cores / workers; Ray: 1 per actor)"),
    shard_lines: int = typer.Option(256, min=1, help="JSONL lines per shard, the unit of work and of progress (Parquet: one row group)"),
    summary_json: Optional[Path] = typer.Option(None, "--summary-json", help="also write the summary here"),
    quiet: bool = typer.Option(False, help="no progress bar"),
) -> None:
    """Score a large log: streaming, resumable, on this machine or Ray Data; a summary at the end.

    Exit codes as for validate: 1 when some records were bad (each has an error record in the output)."""
    from .batch_io import BatchInputError

    if engine != "ray" and ray_address:
        raise _fail("--ray-address needs --engine ray")
    names = [n.strip() for n in validators.split(",") if n.strip()] if validators else None
    columns = [TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    bar = _Bar(Progress(*columns, console=console, disable=quiet))
    try:
        summary = score_log(input, output, engine=engine, workers=workers, ray_address=ray_address,
                            config=str(config) if config else None, validators=names,
                            models_dir=str(models_dir) if models_dir else None, threads=threads,
                            shard_lines=shard_lines, progress=bar)
    except (BatchInputError, ConfigError, ManifestError, ValueError) as exc:
        raise _fail(str(exc)) from None
    finally:
        bar.stop()
    print_batch_summary(summary)
    if summary_json:
        summary_json.parent.mkdir(parents=True, exist_ok=True)
        summary_json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if summary["bad_records"]:
        raise typer.Exit(code=1)


class _Bar:
    """`score_log`'s progress bar, shown once the input's shards are planned and the checks passed
    (a run that cannot start prints its error without an empty bar)."""

    def __init__(self, progress: Progress):
        self.progress, self.task = progress, None

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("scoring", total=total)

    def advance(self, n: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def stop(self) -> None:
        self.progress.stop()


def print_batch_summary(summary: dict[str, Any]) -> None:
    table = Table(title=f"batch {summary['input']} -> {summary['output']}")
    for column in ("engine", "workers", "records", "skipped (done)", "written", "bad", "seconds", "cases/s",
                   "peak RSS per worker MB"):
        table.add_column(column, justify="right")
    rss = summary["workers_peak_rss_mb"]
    table.add_row(summary["engine"], str(summary["workers"]), str(summary["records"]),
                  str(summary["skipped_already_done"]), str(summary["written"]), str(summary["bad_records"]),
                  f"{summary['seconds']:.1f}", f"{summary['cases_per_s'] or 0:.1f}",
                  ", ".join(f"{v:.0f}" for v in rss.values()) or "-")
    console.print(table)
    console.print("decisions: " + (", ".join(f"{k} {v}" for k, v in summary["decisions"].items()) or "none"))
    for error in summary["errors"][:ERRORS_SHOWN]:
        console.print(f"[red]bad record[/red] {error}")
    if summary["bad_records"] > ERRORS_SHOWN:
        console.print(f"... and {summary['bad_records'] - ERRORS_SHOWN} more bad records (error records in the output)")


@benchmark_app.command("batch")
def benchmark_batch_command(
    ragtruth: Path = typer.Option(Path("../shared/datasets/ragtruth_subset/ragtruth_600.jsonl"), "--ragtruth",
                                  help="RAGTruth rows (reference, response, question) the cases are built from"),
    cases: int = typer.Option(2000, min=1, help="cases per throughput run (the rows are cycled)"),
    memory_cases: int = typer.Option(200, min=1, help="cases of the validate memory run"),
    workers: int = typer.Option(2, min=1, help="Ray workers"),
    engines: str = typer.Option("validate,local,ray", help="runs: validate, local, ray"),
    validators: Optional[str] = typer.Option(None, help="comma-separated validator names (default: the gate's)"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators (default: models/)"),
    arena_baseline: bool = typer.Option(True, help="also run the memory case with onnxruntime's arena on"),
    work: Path = typer.Option(Path("out/benchmarks/batch"), help="folder for the cases and outputs"),
    json_out: Path = typer.Option(Path("out/benchmarks/batch.json"), "--json", help="where to write the JSON"),
) -> None:
    """Cases/s and peak RSS of validate and batch (local, Ray) on the same RAGTruth-sized cases."""
    from .batch_bench import LOG_CASES, benchmark_batch

    if not ragtruth.is_file():
        raise _fail(f"{ragtruth}: no such file; point --ragtruth at RAGTruth JSONL (reference, response, question)")
    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    unknown = sorted(set(chosen) - {"validate", *ENGINES})
    if unknown:
        raise _fail(f"--engines: unknown {unknown}; choose from validate, local, ray")
    try:
        with console.status("benchmark") as status:
            report = benchmark_batch(ragtruth, work, cases=cases, memory_cases=memory_cases, workers=workers,
                                     engines=chosen, validators=validators,
                                     models_dir=str(models_dir) if models_dir else None,
                                     arena_baseline=arena_baseline, step=lambda name: status.update(f"running {name}"))
    except ValueError as exc:
        raise _fail(str(exc)) from None
    machine = report["machine"]
    table = Table(title=f"batch scoring: {cases} RAGTruth-sized cases, {machine['cores']} cores, "
                        f"load {machine['load_average_1m']} -> {report['machine_after']['load_average_1m']}")
    for column in ("run", "cases", "wall s", "cases/s", "CPU ms/case", "peak RSS MB", "worker RSS MB", "= validate",
                   f"{LOG_CASES // 1_000_000}M cases: core-h"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in report["runs"]:
        if "error" in row:
            table.add_row(row["run"], str(row["cases"]), "-", "-", "-", "-", "-", "-", f"failed (exit {row['exit']})")
            continue
        table.add_row(row["run"], str(row["cases"]), f"{row['seconds']:.1f}", f"{row['cases_per_s']:.1f}",
                      f"{row['cpu_ms_per_case']:.0f}", f"{row['peak_rss_mb']:.0f}",
                      ", ".join(f"{v:.0f}" for v in row.get("workers_peak_rss_mb", [])) or "-",
                      f"{row['decisions_equal_validate']}/{cases}" if "decisions_equal_validate" in row else "-",
                      f"{row['core_hours_per_10m']:.1f}")
    console.print(table)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {json_out}")
    failed = [row["run"] for row in report["runs"] if "error" in row]
    for row in report["runs"]:
        if "error" in row:
            console.print(f"[red]{row['run']} failed[/red]: {row['error']}")
    if failed:
        raise typer.Exit(code=1)
