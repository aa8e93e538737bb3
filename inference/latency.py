"""Latency of the whole gate on a file of cases: the number behind "milliseconds per case"."""

from __future__ import annotations

import os
import platform
import resource
import time
from typing import Sequence

import numpy as np

from .case import Case
from .gate import Gate
from .onnx_session import cpu_description


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    values = np.asarray(samples_ms, dtype=float)
    return {
        "p50_ms": float(np.percentile(values, 50)),
        "p95_ms": float(np.percentile(values, 95)),
        "p99_ms": float(np.percentile(values, 99)),
        "mean_ms": float(values.mean()),
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_gate(gate: Gate, cases: Sequence[Case], *, repeat: int = 20, warmup: int = 2) -> dict:
    """Per-case latency (one case per call) and batch throughput, after `warmup` rounds, and the
    process's peak memory by then (every validator loaded, the cases scored alone and in a batch)."""
    if not cases:
        raise ValueError("no cases to measure")
    for _ in range(warmup):
        gate.validate_batch(cases)
    single = []
    for _ in range(repeat):
        for case in cases:
            started = time.perf_counter()
            gate.validate(case)
            single.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    for _ in range(repeat):
        gate.validate_batch(cases)
    batch_seconds = time.perf_counter() - started
    return {
        "cases": len(cases),
        "repeat": repeat,
        "single_case": percentiles(single),
        "batch_cases_per_s": len(cases) * repeat / batch_seconds,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "validators": gate.models,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    **cpu_description(), "threads_env": os.environ.get("AUTOVALIDATORS_THREADS")},
    }
