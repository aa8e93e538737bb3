"""Load check for the HTTP service: N concurrent clients, each on one keep-alive connection.

Stdlib only (threads + http.client) so the numbers measure the server, not a client library.
The server under test runs in its own process (`started_server`), so the clients' threads do
not share its interpreter lock.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import numpy as np

from ..case import Case, read_cases

MAX_ERROR_SAMPLES = 5
HEALTH_PROBE_S = 0.25


# Statuses that are the service working as designed under load: answered, or shed at once.
OK, SHED = "200", "503"
TIMEOUT_STATUSES = ("408", "504", "TimeoutError")  # TimeoutError: the client gave up (socket.timeout)


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0, "max": 0.0}
    array = np.asarray(values, dtype=float)
    return {"p50": round(float(np.percentile(array, 50)), 3), "p95": round(float(np.percentile(array, 95)), 3),
            "p99": round(float(np.percentile(array, 99)), 3), "mean": round(float(array.mean()), 3),
            "max": round(float(array.max()), 3)}


@dataclass
class LoadReport:
    """What a load check measured. Latencies are per request, from send to last byte read:
    `latency_ms` of answered (200) requests, `shed_latency_ms` of the 503s the server refused at
    once; `queue_wait_ms` is the server's own queue time of answered requests (Server-Timing)."""

    url: str
    clients: int
    seconds: float
    batch_size: int
    requests: int
    admitted: int  # answered 200
    shed: int  # refused 503 before any work
    timeouts: int  # 408/504 or a client-side time-out: work the client gave up on
    errors: int  # anything else (and time-outs): what must be 0
    cases: int
    requests_per_s: float
    cases_per_s: float  # answered cases per second
    latency_ms: dict[str, float]
    shed_latency_ms: dict[str, float]
    queue_wait_ms: dict[str, float]
    health_ms: dict[str, float]  # GET /healthz every HEALTH_PROBE_S during the run (an orchestrator's probe)
    status_counts: dict[str, int]
    error_samples: list[str] = field(default_factory=list)
    # What was measured: numbers from heuristic fallbacks and from ONNX models are not comparable.
    models: dict[str, str] = field(default_factory=dict)
    cpu_count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_case_dicts(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Cases to send, as JSON-ready dicts; default: the bundled example cases.

    Raises:
        ValueError: the file is missing, empty, or has a bad record (naming its line).
    """
    if path is None:
        source = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")
        with resources.as_file(source) as bundled:
            return load_case_dicts(bundled)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    cases = []
    for record in read_cases(path):
        if not isinstance(record, Case):
            raise ValueError(f"bad record {record}; a load check needs valid cases only")
        cases.append(record.model_dump())
    if not cases:
        raise ValueError(f"{path}: no cases")
    return cases


def _server_models(base_url: str, headers: dict[str, str]) -> dict[str, str]:
    """name -> "kind version" from GET /v1/models; empty when the server does not say."""
    request = urllib.request.Request(base_url + "/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            listed = json.loads(response.read()).get("models", [])
        return {m["name"]: f"{m['kind']} {m['version']}" for m in listed}
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return {}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_healthy(base_url: str, timeout_s: float, process: subprocess.Popen | None = None) -> None:
    """Polls GET /healthz until it answers 200; raises RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base_url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{base_url}/healthz did not answer within {timeout_s:g} s")


@contextlib.contextmanager
def started_server(config: str | Path | None = None, *, startup_timeout_s: float = 60.0) -> Iterator[str]:
    """Runs `autovalidators serve` on a free loopback port in a child process; yields its URL."""
    port = free_port()
    # Not `-m autovalidators.inference.cli`: run as __main__, that module would be a second copy
    # without the commands that COMMAND_MODULES register on the imported one.
    command = [sys.executable, "-c", "from autovalidators.inference.cli import main; main()", "serve",
               "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning"]
    if config:
        command += ["--config", str(config)]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_healthy(base_url, startup_timeout_s, process)
            except RuntimeError as exc:
                log.seek(0)
                tail = log.read().decode("utf-8", "replace")[-2000:]
                raise RuntimeError(f"{exc}; server output:\n{tail}") from None
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _queue_ms(server_timing: str | None) -> float | None:
    """The `queue;dur=…` entry of a Server-Timing header, in ms."""
    for entry in (server_timing or "").split(","):
        name, _, params = entry.strip().partition(";")
        if name == "queue" and params.startswith("dur="):
            try:
                return float(params[4:])
            except ValueError:
                return None
    return None


class _Client(threading.Thread):
    """One simulated client: sends requests back to back until the deadline."""

    def __init__(self, index: int, url: str, bodies: list[bytes], headers: dict[str, str],
                 start: threading.Barrier, deadline: list[float], timeout_s: float, honor_retry_after: bool):
        super().__init__(name=f"load-client-{index}", daemon=True)
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = (parts.path.rstrip("/") or "") + "/v1/validate"
        self.bodies, self.headers, self.start_barrier = bodies, headers, start
        self.deadline, self.timeout_s, self.offset = deadline, timeout_s, index
        self.honor_retry_after = honor_retry_after
        self.latencies: list[float] = []
        self.shed_latencies: list[float] = []
        self.queue_waits: list[float] = []
        self.statuses: dict[str, int] = {}
        self.errors: list[str] = []

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def run(self) -> None:
        connection = self._connect()
        self.start_barrier.wait()
        sent = self.offset  # clients start at different cases, so the mix is the same at any moment
        while time.perf_counter() < self.deadline[0]:
            body = self.bodies[sent % len(self.bodies)]
            sent += 1
            began = time.perf_counter()
            timing = retry_after = None
            try:
                connection.request("POST", self.path, body=body, headers=self.headers)
                response = connection.getresponse()
                payload = response.read()
                elapsed = (time.perf_counter() - began) * 1000
                status = str(response.status)
                timing = response.getheader("Server-Timing")
                retry_after = response.getheader("Retry-After")
            except (OSError, http.client.HTTPException) as exc:
                status, payload, elapsed = type(exc).__name__, b"", None
                connection.close()
                connection = self._connect()
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == OK and elapsed is not None:
                self.latencies.append(elapsed)
                queued = _queue_ms(timing)
                if queued is not None:
                    self.queue_waits.append(queued)
            elif status == SHED and elapsed is not None:
                self.shed_latencies.append(elapsed)
                if self.honor_retry_after and retry_after and retry_after.isdigit():
                    # As a well-behaved client does; a tight retry loop only measures JSON parsing.
                    time.sleep(max(0.0, min(float(retry_after), self.deadline[0] - time.perf_counter())))
                    # The server closes keep-alive connections idle for 5 s: start a fresh one, as
                    # HTTP client libraries do with a stale pooled connection.
                    connection.close()
                    connection = self._connect()
            else:
                self.errors.append(f"{status}: {payload[:200].decode('utf-8', 'replace')}")
        connection.close()


class _HealthProbe(threading.Thread):
    """GET /healthz every HEALTH_PROBE_S until stopped, timing each answer (what a liveness probe sees)."""

    def __init__(self, base_url: str):
        super().__init__(name="load-health-probe", daemon=True)
        self.url, self.stop, self.latencies = base_url + "/healthz", threading.Event(), []

    def run(self) -> None:
        while not self.stop.wait(HEALTH_PROBE_S):
            began = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    response.read()
            except OSError:
                continue
            self.latencies.append((time.perf_counter() - began) * 1000)


def run_load(base_url: str, cases: list[dict[str, Any]], *, clients: int = 50, seconds: float = 60.0,
             batch_size: int = 1, api_key: str | None = None, api_key_header: str = "X-API-Key",
             timeout_s: float = 30.0, honor_retry_after: bool = True) -> LoadReport:
    """Sends `cases` (cycled) from `clients` threads for `seconds`. A 200 is admitted, a 503 shed
    (the server refusing at once; the client then waits its Retry-After unless told not to);
    anything else, time-outs included, is an error."""
    base_url = base_url.rstrip("/")
    if batch_size == 1:
        bodies = [json.dumps(c).encode("utf-8") for c in cases]
    else:
        cycled = [cases[i % len(cases)] for i in range(max(len(cases), batch_size))]
        bodies = [json.dumps({"cases": cycled[i:i + batch_size]}).encode("utf-8")
                  for i in range(0, len(cycled) - batch_size + 1, batch_size)]
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers[api_key_header] = api_key
    barrier = threading.Barrier(clients + 1)
    deadline = [float("inf")]
    workers = [_Client(i, base_url, bodies, headers, barrier, deadline, timeout_s, honor_retry_after)
               for i in range(clients)]
    for worker in workers:
        worker.start()
    barrier.wait()  # every client is connected and waiting: start the clock for all at once
    began = time.perf_counter()
    deadline[0] = began + seconds
    probe = _HealthProbe(base_url)
    probe.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    probe.stop.set()
    probe.join()

    statuses: dict[str, int] = {}
    for worker in workers:
        for status, count in worker.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    requests = sum(statuses.values())
    ok, shed = statuses.get(OK, 0), statuses.get(SHED, 0)
    timeouts = sum(statuses.get(s, 0) for s in TIMEOUT_STATUSES)
    return LoadReport(
        url=base_url, clients=clients, seconds=round(elapsed, 3), batch_size=batch_size, requests=requests,
        admitted=ok, shed=shed, timeouts=timeouts, errors=requests - ok - shed,
        cases=ok * batch_size, requests_per_s=requests / elapsed if elapsed else 0.0,
        cases_per_s=ok * batch_size / elapsed if elapsed else 0.0,
        latency_ms=_percentiles([lat for w in workers for lat in w.latencies]),
        shed_latency_ms=_percentiles([lat for w in workers for lat in w.shed_latencies]),
        queue_wait_ms=_percentiles([q for w in workers for q in w.queue_waits]),
        health_ms=_percentiles(probe.latencies),
        status_counts=statuses,
        error_samples=[e for w in workers for e in w.errors][:MAX_ERROR_SAMPLES],
        models=_server_models(base_url, {k: v for k, v in headers.items() if k != "Content-Type"}),
        cpu_count=os.cpu_count(),
    )


def validate_throughput(cases: list[dict[str, Any]], *, config: str | Path | None = None,
                        batch_size: int = 32) -> float:
    """Cases per second of one process running `autovalidators validate`'s loop (the Gate on
    batches of `batch_size`) over `cases`, with the serve config's gate and models: the reference
    the service's throughput is held to. One warm-up call first, as the server makes at start."""
    from ..config import load_gate_config
    from ..gate import Gate
    from .config import load_serve_config

    serve_config = load_serve_config(config)
    gate = Gate(load_gate_config(serve_config.gate_config), validators=serve_config.validators,
                models_dir=serve_config.models_dir)
    records = [Case(**c) for c in cases]
    gate.validate(records[0])
    began = time.perf_counter()
    for start in range(0, len(records), batch_size):
        gate.validate_batch(records[start:start + batch_size])
    return len(records) / (time.perf_counter() - began)
