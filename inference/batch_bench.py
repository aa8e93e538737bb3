"""`autovalidators benchmark batch`: cases/s and peak memory of `validate` and `batch` (local, Ray).

All runs score the same RAGTruth-sized cases: RAGTruth rows (`reference` = context, `response` =
answer, `question`; the QA third has questions, the summaries and data-to-text have none) cycled
to the requested count with unique ids. Each run is a fresh CLI process, as a user would start it;
its wall time includes start-up and model loading, and its peak RSS and CPU time are the
process's own (`os.wait4`, threads and waited-for children included). Ray's actors are not its
children: `batch` reports their peak RSS and CPU time itself (Ray's own daemons are not counted).

Wall time depends on how busy the machine is; CPU time much less. So the 10-million-case
figure is CPU-bound work: CPU seconds per case x 10M, in core-hours, i.e. what the log costs per
core (hours on N free cores = core-hours / N).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_RAGTRUTH = Path("../shared/datasets/ragtruth_subset/ragtruth_600.jsonl")
LOG_CASES = 10_000_000  # the log size the estimate is for
CLI = [sys.executable, "-c", "from autovalidators.inference.cli import main; main()"]


def ragtruth_cases(source: Path, count: int) -> list[dict[str, Any]]:
    """`count` cases from RAGTruth rows, cycling through them; a data-to-text `reference` (a JSON
    object) becomes its JSON text, as a RAG system would paste it into the prompt."""
    rows = []
    with open(source, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                answer = row["response"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{source}:{number}: not a RAGTruth row ({exc})") from None
            reference = row.get("reference") or ""
            if not isinstance(reference, str):
                reference = json.dumps(reference, ensure_ascii=False)
            rows.append({"question": row.get("question") or "", "context": reference, "answer": answer,
                         "meta": {"ragtruth_id": str(row.get("id")), "task_type": row.get("task_type")}})
    if not rows:
        raise ValueError(f"{source}: no rows")
    return [{"id": f"rt{i:07d}", **rows[i % len(rows)]} for i in range(count)]


def _peak_rss_kb(pid: int) -> int | None:
    """VmHWM of a live process (its own address space's peak RSS), from /proc; None when unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class _PeakWatcher(threading.Thread):
    """Polls a child's VmHWM until it exits. Why not the child's ru_maxrss: Linux folds the address
    space a process had before exec into it, and a child spawned by fork/vfork had its parent's, so
    a large parent (a test runner holding models) showed up as the child's peak."""

    def __init__(self, pid: int, every_s: float = 0.02):
        super().__init__(name=f"peak-rss-{pid}", daemon=True)
        self.pid, self.every_s, self.peak_kb, self.done = pid, every_s, None, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            value = _peak_rss_kb(self.pid)
            if value is not None:
                self.peak_kb = max(self.peak_kb or 0, value)
            self.done.wait(self.every_s)


def run_measured(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs one command; its wall seconds, exit code and peak RSS (MB, its own: see _PeakWatcher)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, **(env or {})})
    watcher = _PeakWatcher(process.pid)
    watcher.start()
    stderr = process.stderr.read() if process.stderr else b""
    # VmHWM is monotonic while the process lives: one last read right before it is reaped.
    last = _peak_rss_kb(process.pid)
    watcher.done.set()
    watcher.join()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    peaks = [kb for kb in (watcher.peak_kb, last) if kb is not None]
    peak_kb = max(peaks) if peaks else usage.ru_maxrss  # no /proc (not Linux): the rusage figure
    return {"exit": process.returncode, "seconds": round(seconds, 2), "peak_rss_mb": round(peak_kb / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "pid": process.pid,
            "stderr_tail": stderr.decode("utf-8", "replace")[-1500:]}


def engine_of(args: list[str]) -> str:
    return args[args.index("--engine") + 1] if "--engine" in args else "local"


def decisions(path: Path) -> dict[str, str | None]:
    found = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            found[str(record.get("id"))] = record.get("decision")
    return found


def machine() -> dict[str, Any]:
    from .onnx_session import cpu_description

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            **cpu_description(), "cores": cores, "load_average_1m": round(os.getloadavg()[0], 2)}


def benchmark_batch(source: Path, work: Path, *, cases: int = 2000, memory_cases: int = 200, workers: int = 2,
                    engines: tuple[str, ...] = ("validate", "local", "ray"), validators: str | None = None,
                    models_dir: str | None = None, arena_baseline: bool = True, step: Any = None) -> dict[str, Any]:
    """Every run's figures and the machine's; see the module docstring."""
    work.mkdir(parents=True, exist_ok=True)
    all_cases = ragtruth_cases(source, cases)
    log = work / f"ragtruth_{cases}.jsonl"
    small = work / f"ragtruth_{memory_cases}.jsonl"
    for path, rows in ((log, all_cases), (small, all_cases[:memory_cases])):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    common = [*(["--validators", validators] if validators else []), *(["--models-dir", models_dir] if models_dir else [])]
    plan: list[tuple[str, Path, list[str], dict[str, str], int]] = []
    if "validate" in engines:
        plan.append((f"validate {memory_cases}", small, ["validate", str(small), "--output",
                     str(work / "validate_small.jsonl"), "--quiet", *common], {}, memory_cases))
        if arena_baseline:
            plan.append((f"validate {memory_cases}, ORT arena on", small, [
                "validate", str(small), "--output", str(work / "validate_small_arena.jsonl"), "--quiet", *common],
                {"AUTOVALIDATORS_ORT_ARENA": "1"}, memory_cases))
        plan.append((f"validate {cases}", log, ["validate", str(log), "--output", str(work / "validate.jsonl"), "--quiet",
                                       *common], {}, cases))
    for engine in (e for e in engines if e != "validate"):
        n = workers if engine == "ray" else 1
        output = work / f"batch_{engine}.jsonl"
        output.unlink(missing_ok=True)  # a fresh run, not a resumed one
        plan.append((f"batch {engine} x{n}", log, [
            "batch", str(log), "--output", str(output), "--engine", engine, "--workers", str(n), "--quiet",
            "--summary-json", str(work / f"batch_{engine}.summary.json"), *common], {}, cases))
    report: dict[str, Any] = {"source": str(source), "cases": cases, "memory_cases": memory_cases,
                              "machine": machine(), "runs": []}
    for name, _, args, env, count in plan:
        if step:
            step(name)
        measured = run_measured([*CLI, *args], env)
        row: dict[str, Any] = {"run": name, "cases": count, "command": "autovalidators " + " ".join(args), **measured,
                               "env": env}
        if measured["exit"] not in (0, 1):
            row["error"] = measured["stderr_tail"]
            report["runs"].append(row)
            continue
        row["cases_per_s"] = round(count / measured["seconds"], 2)
        if "--summary-json" in args:
            summary = json.loads(Path(args[args.index("--summary-json") + 1]).read_text())
            row.update(first_result_seconds=summary["first_result_seconds"], workers=summary["workers"],
                       threads_per_worker=summary["threads_per_worker"],
                       workers_peak_rss_mb=list(summary["workers_peak_rss_mb"].values()))
            # Workers outside this process's tree (Ray actors) add their own CPU time.
            actors = sum(summary["workers_cpu_s"].values()) if engine_of(args) == "ray" else 0.0
            row["cpu_s"] = round(measured["cpu_s"] + actors, 2)
            output = Path(args[args.index("--output") + 1])
            if "validate" in engines:
                reference, got = decisions(work / "validate.jsonl"), decisions(output)
                row["decisions_equal_validate"] = sum(got.get(k) == v for k, v in reference.items())
        row["cpu_ms_per_case"] = round(1000 * row["cpu_s"] / count, 1)
        row["core_hours_per_10m"] = round(LOG_CASES * row["cpu_s"] / count / 3600, 1)
        report["runs"].append(row)
    report["machine_after"] = machine()
    return report
