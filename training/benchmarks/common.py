"""Shared benchmark machinery: latency timing, the report table, writing metrics to a manifest.

Each task's own benchmark (`TaskSpec.benchmark`, "module:function") measures quality and calls
these helpers; `run_benchmark` dispatches to it. Latency is wall-clock per call with a fixed
thread count (stated in the report), after warm-up runs.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import platform
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from autovalidators.inference.latency import percentiles
from autovalidators.inference.manifest import BENCHMARK_NAME, MANIFEST_NAME, load_manifest, sha256_of, update_manifest

from autovalidators.training.config import TaskConfig
from autovalidators.training.tasks.base import TaskSpec

logger = logging.getLogger(__name__)

# The shipped copy of a benchmark (models/<name>/benchmark.json) keeps every metric but at most
# this many per-example predictions per list (evenly spaced, so each set keeps its share) with
# texts cut to TEXT_CHARS: enough for the report's curves, calibration and worst errors, small
# enough to commit (~1 MB).
SHIPPED_PREDICTIONS = 2000
TEXT_CHARS = 280
TEXT_FIELDS = ("question", "answer", "text", "context")


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

    from autovalidators.inference.onnx_session import cpu_description

    # The load average says how busy the machine was: latency on a shared box is not a quiet one's.
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            **cpu_description(), "cpu_count": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2)}


def f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Elementwise F1 = 2tp / (2tp + fp + fn); 0 where nothing was predicted or expected. Vectorised
    so that paired bootstraps score thousands of resamples at once."""
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp, dtype=np.float64), where=denominator > 0)


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


def time_torch_forward(model: Any, feeds: dict[int, dict[str, Any]], runs: dict[int, int]) -> dict[str, Any]:
    """`time_calls` of a torch model's forward on NumPy feeds, per input length (inference mode)."""
    import torch

    result = {}
    with torch.inference_mode():
        for n, arrays in feeds.items():
            feed = {k: torch.from_numpy(v) for k, v in arrays.items()}
            result[str(n)] = time_calls(lambda feed=feed: model(**feed), runs.get(n, 20))
    return result


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
    unknown = sorted(set(options) - set(inspect.signature(function).parameters))
    if unknown:
        raise ValueError(f"the {spec.name} benchmark has no option(s) {unknown}")
    report = function(spec, task_config, Path(model_dir), **options)
    if command:
        report["command"] = command
        if options.get("update_manifest"):
            benchmark = dict(load_manifest(model_dir).metrics.get("benchmark") or {})
            update_manifest_metrics(Path(model_dir), {"benchmark": {**benchmark, "command": command}})
    if options.get("update_manifest"):
        write_shipped_benchmark(Path(model_dir), report, spec.name)
    return report


def compact_report(report: dict[str, Any], limit: int = SHIPPED_PREDICTIONS, text_chars: int = TEXT_CHARS
                   ) -> dict[str, Any]:
    """A copy of a benchmark report for shipping: every number kept, `predictions` lists thinned
    to `limit` evenly spaced rows with texts cut to `text_chars`; `compact` says what was cut."""
    kept: dict[str, dict[str, int]] = {}

    def shrink(value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            return {k: shrink(v, path + (str(k),)) for k, v in value.items()}
        if isinstance(value, list) and path and path[-1] == "predictions":
            step = max(1, -(-len(value) // limit))  # ceil: at most `limit` rows
            rows = [_cut_texts(row, text_chars) for row in value[::step]]
            kept[".".join(path)] = {"kept": len(rows), "of": len(value)}
            return rows
        if isinstance(value, list):
            return [shrink(v, path) for v in value]
        return value

    compact = shrink(report, ())
    compact["compact"] = {"predictions": kept, "text_chars": text_chars,
                          "note": "metrics are computed on every example; curves use the kept predictions"}
    return compact


def _cut_texts(row: Any, text_chars: int) -> Any:
    if not isinstance(row, dict):
        return row
    return {k: (v[:text_chars] + " …" if k in TEXT_FIELDS and isinstance(v, str) and len(v) > text_chars else v)
            for k, v in row.items()}


def data_hashes(report: dict[str, Any], task: str) -> dict[str, str]:
    """sha256 of the data files a report names (as the report section reads them), hashed now."""
    from autovalidators.inference.reporting.adapters import data_files_for

    return {name: sha256_of(Path(path)) for name, path in data_files_for(task, report).items()
            if isinstance(path, str) and Path(path).is_file()}


def write_shipped_benchmark(model_dir: Path, report: dict[str, Any], task: str) -> Path:
    """Writes `<model_dir>/benchmark.json`: the compact report, with data hashes, that ships with the
    model so `autovalidators report` shows its numbers without the prepared data. Not in the
    manifest's sha256 set (see `inference.manifest.BENCHMARK_NAME`)."""
    compact = compact_report(report)
    recorded = compact.get("data_sha256") if isinstance(compact.get("data_sha256"), dict) else {}
    compact["data_sha256"] = {**data_hashes(report, task), **recorded}
    compact.setdefault("model_sha256", load_manifest(model_dir, verify=False).model_sha256)
    path = model_dir / BENCHMARK_NAME
    path.write_text(json.dumps(compact, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    logger.info("wrote %s (%.0f kB)", path, path.stat().st_size / 1e3)
    return path
