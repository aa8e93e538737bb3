"""The service under more load than it can take: fast 503s instead of time-outs, correct answers
for what was admitted, a queued request dropped when its client leaves, health and metrics that
answer while saturated."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from autovalidators.inference import Case, Gate  # noqa: E402
from autovalidators.inference.results import ToneOutput  # noqa: E402
from autovalidators.inference.serving.app import create_app, serve_in_thread  # noqa: E402
from autovalidators.inference.serving.config import BatchingConfig, ServeConfig, ServeLimits  # noqa: E402
from autovalidators.inference.validators import ValidatorInfo  # noqa: E402
from autovalidators.inference.validators.heuristic import HeuristicTone  # noqa: E402

CASES = [{"id": f"c{i}", "question": "When did the Eiffel Tower open?",
          "context": "The Eiffel Tower was opened on 31 March 1889 for the World's Fair in Paris.",
          "answer": answer}
         for i, answer in enumerate(["The Eiffel Tower opened on 31 March 1889.",
                                     "It opened in 1925 with 40 lifts.",
                                     "Thank you for asking! It opened in 1889.",
                                     "You idiot, it opened in 1889."] * 4)]


class SlowTone:
    """The heuristic tone validator, `delay_s` slower per call; counts calls and case ids."""

    info = ValidatorInfo(name="tone", kind="heuristic", version="slow-test")

    def __init__(self, delay_s: float):
        self.delay_s, self.inner = delay_s, HeuristicTone()
        self.calls: list[list[str]] = []

    def predict(self, cases: Sequence[Case]) -> list[ToneOutput]:
        self.calls.append([c.id for c in cases])
        time.sleep(self.delay_s)
        return self.inner.predict(cases)


def _serve(tmp_path: Path, delay_s: float, **settings: Any):
    limits = {k: settings.pop(k) for k in list(settings) if k in ServeLimits.model_fields}
    batching = {k: settings.pop(k) for k in list(settings) if k in BatchingConfig.model_fields}
    config = ServeConfig(models_dir=str(tmp_path / "no-models"), executors=1, ort_threads=1,
                         limits=ServeLimits(**limits), batching=BatchingConfig(**batching), **settings)
    tone = SlowTone(delay_s)
    gate = Gate(models_dir=tmp_path / "no-models", instances={"tone": tone})
    return serve_in_thread(create_app(config, gate=gate)), gate, tone


def _request(base_url: str, method: str, path: str, body: Any = None,
             timeout: float = 30) -> tuple[int, Any, dict[str, str], float]:
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    began = time.perf_counter()
    data = None if body is None else json.dumps(body).encode("utf-8")
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    raw = response.read()
    elapsed = time.perf_counter() - began
    headers = {k.lower(): v for k, v in response.getheaders()}
    connection.close()
    parsed = json.loads(raw) if raw.startswith((b"{", b"[")) else raw.decode("utf-8")
    return response.status, parsed, headers, elapsed


def _without_latency(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "meta": {k: v for k, v in result["meta"].items() if k != "latency_ms"}}


def test_overload_gives_fast_503s_no_timeouts_and_correct_answers(tmp_path: Path) -> None:
    # A batch takes a whole second, so "refused before any work" reads as "answered in under half a batch"
    # with room for the scheduling delays of a 2-core CI machine running other tests (a 0.4 s batch and a
    # 0.3 s bound failed there once at 0.50 s).
    server, gate, tone = _serve(tmp_path, delay_s=1.0, max_queue_cases=3, max_batch_cases=4, max_wait_ms=30)
    answers: list[tuple[int, Any, dict[str, str], float]] = []
    health: list[float] = []
    with server as base_url:
        def client(case: dict[str, Any]) -> None:
            answers.append(_request(base_url, "POST", "/v1/validate", case))

        threads = [threading.Thread(target=client, args=(case,)) for case in CASES]
        for thread in threads:
            thread.start()
        time.sleep(0.1)  # saturated now: one batch running, the queue full
        for _ in range(5):
            status, body, _, elapsed = _request(base_url, "GET", "/healthz")
            assert status == 200 and body["status"] == "ok"
            health.append(elapsed)
        for thread in threads:
            thread.join()
        _, metrics, _, _ = _request(base_url, "GET", "/metrics")

    statuses = [a[0] for a in answers]
    assert set(statuses) == {200, 503}, statuses  # nothing else: no 408, no 500, no hang
    shed = [a for a in answers if a[0] == 503]
    admitted = [a for a in answers if a[0] == 200]
    assert len(admitted) >= 4 and len(shed) >= 4
    for _, body, headers, elapsed in shed:
        assert body["error"]["code"] == "overloaded"
        assert int(headers["retry-after"]) >= 1
        assert elapsed < 0.5  # refused before any work (one batch takes 1.0 s)
    assert max(health) < 0.1  # the probe answers while every executor is busy
    # Gathered across requests: fewer Gate calls than answered requests.
    assert len(tone.calls) < len(admitted)
    assert max(len(call) for call in tone.calls) > 1
    # What was admitted is exactly what the Python API says of the case alone.
    by_id = {case["id"]: case for case in CASES}
    for _, body, headers, _ in admitted:
        alone = gate.validate(Case(**by_id[body["id"]])).to_dict()
        assert _without_latency(body) == _without_latency(alone)
        assert headers["server-timing"].startswith("queue;dur=")
    assert f'autovalidators_requests_total{{status="503"}} {float(len(shed))}' in metrics
    assert f'autovalidators_requests_total{{status="200"}} {float(len(admitted))}' in metrics
    assert "autovalidators_queue_wait_seconds_count" in metrics and "autovalidators_queue_cases 0.0" in metrics


def test_a_request_still_queued_at_its_deadline_is_dropped_unstarted(tmp_path: Path) -> None:
    server, _, tone = _serve(tmp_path, delay_s=1.0, request_timeout_s=0.5, max_wait_ms=0)
    with server as base_url:
        first: list[Any] = []
        thread = threading.Thread(target=lambda: first.append(_request(base_url, "POST", "/v1/validate", CASES[0])))
        thread.start()
        time.sleep(0.2)
        # The first call's 1 s is unknown yet (the estimate starts at 0.25 s): admitted, then expired.
        status, body, headers, elapsed = _request(base_url, "POST", "/v1/validate", CASES[1])
        thread.join()
    assert first[0][0] == 200
    assert status == 503 and body["error"]["reason"] == "expired" and "retry-after" in headers
    assert tone.calls == [["c0"]]  # the expired request never ran


def test_a_client_that_leaves_frees_its_place_in_the_queue(tmp_path: Path) -> None:
    server, _, tone = _serve(tmp_path, delay_s=0.8, max_queue_cases=1, max_wait_ms=0)
    with server as base_url:
        parts = urlsplit(base_url)
        first: list[Any] = []
        thread = threading.Thread(target=lambda: first.append(_request(base_url, "POST", "/v1/validate", CASES[0])))
        thread.start()
        time.sleep(0.2)  # c0 runs
        body = json.dumps(CASES[1]).encode("utf-8")
        leaving = socket.create_connection((parts.hostname, parts.port))
        leaving.sendall(b"POST /v1/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        time.sleep(0.2)  # c1 is queued: the queue (1 case) is full
        full = _request(base_url, "POST", "/v1/validate", CASES[2])
        leaving.close()
        time.sleep(0.2)  # the server notices and drops c1
        status, answer, _, _ = _request(base_url, "POST", "/v1/validate", CASES[3])
        thread.join()
    assert full[0] == 503 and full[1]["error"]["reason"] == "queue_full"
    assert status == 200 and answer["id"] == "c3" and first[0][0] == 200
    assert all("c1" not in call for call in tone.calls)
