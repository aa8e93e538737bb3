"""Shared benchmark machinery: latency timing, the report table, writing metrics to a manifest.

Each task's own benchmark (`TaskSpec.benchmark`, "module:function") measures quality and calls
these helpers; `run_benchmark` dispatches to it. Latency is wall-clock per call with a fixed
thread count (stated in the report), after warm-up runs.
"""

from __future__ import annotations

import importlib
import logging
import platform
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from autovalidators.inference.latency import percentiles
from autovalidators.inference.manifest import MANIFEST_NAME, load_manifest, update_manifest

from .config import TaskConfig
from .tasks.base import TaskSpec

logger = logging.getLogger(__name__)


def time_calls(function: Callable[[], Any], runs: int, warmup: int = 3) -> dict[str, float]:
    """p50/p95/mean milliseconds of `function()` over `runs` calls after `warmup` calls."""
    for _ in range(warmup):
        function()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    return {**percentiles(samples), "runs": runs}


def machine() -> dict[str, Any]:
    import os

    # The load average says how busy the machine was: latency on a shared box is not a quiet one's.
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)}


def print_table(title: str, rows: list[dict[str, Any]], columns: list[str], console: Console | None = None) -> None:
    """One rich table; floats shown with 4 digits (3 for milliseconds)."""
    console = console or Console(stderr=True)
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in (columns[0],) else "right")
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column, "")
            if isinstance(value, float):
                value = f"{value:.3f}" if column.endswith("ms") else f"{value:.4f}"
            cells.append(str(value))
        table.add_row(*cells)
    console.print(table)


def load_torch_model(spec: TaskSpec, best: Path, threads: int):
    """The trained torch model from `best/` for eager-latency baselines, or None when torch or the
    run folder is absent (the ONNX numbers are still measured)."""
    try:
        import torch
    except ImportError:
        return None
    if not best.is_dir():
        return None
    torch.set_num_threads(threads)
    return spec.model_class().from_pretrained(str(best)).eval()


def update_manifest_metrics(folder: Path, metrics: dict[str, Any]) -> None:
    """Rewrites the manifest with `metrics` merged in (files re-hashed, so it stays verifiable)."""
    update_manifest(folder, metrics={**load_manifest(folder).metrics, **metrics})
    logger.info("wrote benchmark metrics into %s", folder / MANIFEST_NAME)


def run_benchmark(spec: TaskSpec, task_config: TaskConfig, model_dir: Path, *, command: str | None = None,
                  **options: Any) -> dict[str, Any]:
    """Runs the task's benchmark (see `TaskSpec.benchmark`) and returns its JSON report.

    `command`: the command line that reproduces the run (the CLI passes its own); it goes into the
    report and, with `update_manifest=True`, into the manifest's `metrics.benchmark.command`.
    """
    if not spec.benchmark:
        raise ValueError(f"task {spec.name} has no benchmark yet")
    if not (Path(model_dir) / MANIFEST_NAME).is_file():
        raise FileNotFoundError(f"{model_dir}: no manifest.json; export a model first")
    module_name, attribute = spec.benchmark.split(":")
    function = getattr(importlib.import_module(module_name), attribute)
    report = function(spec, task_config, Path(model_dir), **options)
    if command:
        report["command"] = command
        if options.get("update_manifest"):
            benchmark = dict(load_manifest(model_dir).metrics.get("benchmark") or {})
            update_manifest_metrics(Path(model_dir), {"benchmark": {**benchmark, "command": command}})
    return report
