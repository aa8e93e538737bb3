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


@dataclass
class LoadReport:
    """What a load check measured; latencies are per request, from send to last byte read."""

    url: str
    clients: int
    seconds: float
    batch_size: int
    requests: int
    cases: int
    errors: int
    requests_per_s: float
    cases_per_s: float
    latency_ms: dict[str, float]
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


class _Client(threading.Thread):
    """One simulated client: sends requests back to back until the deadline."""

    def __init__(self, index: int, url: str, bodies: list[bytes], headers: dict[str, str],
                 start: threading.Barrier, deadline: list[float], timeout_s: float):
        super().__init__(name=f"load-client-{index}", daemon=True)
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = (parts.path.rstrip("/") or "") + "/v1/validate"
        self.bodies, self.headers, self.start_barrier = bodies, headers, start
        self.deadline, self.timeout_s, self.offset = deadline, timeout_s, index
        self.latencies: list[float] = []
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
            try:
                connection.request("POST", self.path, body=body, headers=self.headers)
                response = connection.getresponse()
                payload = response.read()
                elapsed = (time.perf_counter() - began) * 1000
                status = str(response.status)
            except (OSError, http.client.HTTPException) as exc:
                status, payload, elapsed = type(exc).__name__, b"", None
                connection.close()
                connection = self._connect()
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == "200" and elapsed is not None:
                self.latencies.append(elapsed)
            else:
                self.errors.append(f"{status}: {payload[:200].decode('utf-8', 'replace')}")
        connection.close()


def run_load(base_url: str, cases: list[dict[str, Any]], *, clients: int = 50, seconds: float = 60.0,
             batch_size: int = 1, api_key: str | None = None, api_key_header: str = "X-API-Key",
             timeout_s: float = 30.0) -> LoadReport:
    """Sends `cases` (cycled) from `clients` threads for `seconds`; any non-200 counts as an error."""
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
    workers = [_Client(i, base_url, bodies, headers, barrier, deadline, timeout_s) for i in range(clients)]
    for worker in workers:
        worker.start()
    barrier.wait()  # every client is connected and waiting: start the clock for all at once
    began = time.perf_counter()
    deadline[0] = began + seconds
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began

    latencies = np.array([lat for w in workers for lat in w.latencies], dtype=float)
    statuses: dict[str, int] = {}
    for worker in workers:
        for status, count in worker.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    requests = sum(statuses.values())
    errors = requests - statuses.get("200", 0)
    ok = statuses.get("200", 0)
    percentiles = (
        {"p50": float(np.percentile(latencies, 50)), "p95": float(np.percentile(latencies, 95)),
         "p99": float(np.percentile(latencies, 99)), "mean": float(latencies.mean()), "max": float(latencies.max())}
        if latencies.size else {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0, "max": 0.0}
    )
    return LoadReport(
        url=base_url, clients=clients, seconds=round(elapsed, 3), batch_size=batch_size, requests=requests,
        cases=ok * batch_size, errors=errors, requests_per_s=requests / elapsed if elapsed else 0.0,
        cases_per_s=ok * batch_size / elapsed if elapsed else 0.0,
        latency_ms={k: round(v, 3) for k, v in percentiles.items()}, status_counts=statuses,
        error_samples=[e for w in workers for e in w.errors][:MAX_ERROR_SAMPLES],
        models=_server_models(base_url, {k: v for k, v in headers.items() if k != "Content-Type"}),
        cpu_count=os.cpu_count(),
    )
