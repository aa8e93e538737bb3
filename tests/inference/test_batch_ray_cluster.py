"""`batch --engine ray --ray-address`: the job joins a Ray cluster that is already running.

The "cluster" is a head node on this machine (`ray start --head --block`, 2 CPUs), started and
stopped by this test through the one process it launched; the CLI runs as its own process, as a
user's would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra: pip install -e '.[ray]'")
CLI = [sys.executable, "-c", "from autovalidators.inference.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cases(path: Path) -> Path:
    rows = [{"id": f"c{i}", "question": "How long is the X200 warranty?",
             "context": "The X200 router comes with a two-year limited warranty.",
             "answer": "The X200 has a two-year limited warranty." if i % 2 else "It has a lifetime warranty."}
            for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


@pytest.mark.slow
def test_batch_joins_a_running_cluster(tmp_path):
    port = free_port()
    ray = Path(sys.executable).with_name("ray")
    # Ray's unix sockets live under the temp dir, whose path must stay short (pytest's is too long).
    temp = tempfile.mkdtemp(prefix="avray", dir="/tmp")
    # A throwaway cluster on this machine: Ray's token authentication off for head and job alike.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    head = subprocess.Popen([str(ray), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={temp}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        source, out, summary = cases(tmp_path / "log.jsonl"), tmp_path / "out.jsonl", tmp_path / "summary.json"
        deadline = time.monotonic() + 120
        while True:  # the head is up once its GCS port accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, "ray head did not start"
                time.sleep(1)
        done = subprocess.run([*CLI, "batch", str(source), "--output", str(out), "--engine", "ray", "--workers", "2",
                               "--ray-address", f"127.0.0.1:{port}", "--shard-lines", "4", "--quiet",
                               "--summary-json", str(summary)], capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 1, done.stderr[-3000:]  # the broken line
        validated = subprocess.run([*CLI, "validate", str(source), "--output", str(tmp_path / "v.jsonl"), "--quiet"],
                                   capture_output=True, text=True, timeout=300)
        assert validated.returncode == 1
        got = [json.loads(line) for line in out.read_text().splitlines()]
        expected = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
        assert [(r.get("id"), r.get("decision")) for r in got] == [(r.get("id"), r.get("decision")) for r in expected]
        assert got[-1]["error"]["line"] == 13
        assert json.loads(summary.read_text())["workers_peak_rss_mb"]  # the cluster's actors reported in
    finally:
        head.terminate()  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:  # anything left of the head's own session (only what this test started)
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)
