"""Typed config of the HTTP service (`configs/serve.yaml`), kept apart from the server module.

The CLI loads and checks this before importing FastAPI, so a bad key is reported even where the
`serve` extra is not installed, and `autovalidators --help` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from ..config import CONFIG_DIR, StrictModel, load_config

DEFAULT_SERVE_CONFIG = CONFIG_DIR / "serve.yaml"


class ServeLimits(StrictModel):
    """What one request may ask for; each breach is answered with a 4xx JSON error."""

    # Read before parsing: a larger body is refused (413) without being read to the end.
    max_body_bytes: int = Field(1_048_576, gt=0, description="largest request body, in bytes")
    # More cases than this in one `{"cases": [...]}` is refused whole (413): split the batch.
    max_batch_size: int = Field(64, gt=0, description="most cases in one batch request")
    # A longer question or answer makes that record an error (422 for one case, an error
    # record in a batch); the rest of a batch is still validated.
    max_text_chars: int = Field(20_000, gt=0, description="longest question/answer, in characters")
    # All passages together; contexts are windowed by the models, so they may be longer.
    max_context_chars: int = Field(200_000, gt=0, description="longest context, all passages, in characters")
    # The body must arrive within this (else 408), and the cases must *start* validating within it:
    # a request whose estimated queue wait is longer is answered 503 + Retry-After at once, before
    # any work; one still queued at its deadline is dropped unstarted (503). Started work finishes.
    request_timeout_s: float = Field(10.0, gt=0, description="seconds to receive the body and start validating")
    # Cases waiting for an executor; a request that would overflow it is answered 503 at once.
    max_queue_cases: int = Field(64, gt=0, description="cases queued (not yet started) before 503")


class BatchingConfig(StrictModel):
    """How concurrent requests are gathered into one Gate call (scores never depend on it)."""

    # Up to this many cases from concurrent requests go into one `validate_batch` call; a batch
    # request larger than this runs alone, in pieces of this size.
    max_batch_cases: int = Field(16, ge=1, description="most cases per Gate call")
    # After taking the oldest request, an executor waits this long for more to arrive.
    max_wait_ms: float = Field(5.0, ge=0, description="how long to gather requests into one call")


class ServeConfig(StrictModel):
    """How `autovalidators serve` runs; command-line options override host, port and workers."""

    host: str = Field("127.0.0.1", description="address to bind; 0.0.0.0 exposes it beyond this machine")
    port: int = Field(8080, ge=0, le=65535, description="TCP port; 0 picks a free one")
    # Each process builds its own Gate (and ONNX sessions) once; its executors share them.
    workers: int = Field(1, ge=1, description="server processes")
    # Gate calls running at once per process, each on a gathered batch. None = from the cores
    # (see `resolve_threads`): executors x ort_threads x workers should not exceed the cores, or
    # the calls fight over them and every request gets slower.
    executors: int | None = Field(None, ge=1, description="batches validated at once per process; None = auto")
    ort_threads: int | None = Field(None, ge=1, description="onnxruntime intra-op threads per call; None = auto")
    batching: BatchingConfig = BatchingConfig()
    # Python's GIL switch interval in the server process: how long an executor's Python work may
    # hold the interpreter before the event loop (health probes, 503s) gets a turn.
    switch_interval_ms: float = Field(1.0, gt=0, le=100, description="GIL switch interval of `serve`, ms")
    gate_config: str | None = Field(None, description="gate policy YAML; None = configs/gate.yaml")
    validators: list[str] | None = Field(None, description="registered validators to run; None = the gate config's list")
    models_dir: str | None = Field(None, description="trained validators; None = the gate config's")
    # The key itself never lives in a config file: only the name of the variable that holds it.
    api_key_env: str | None = Field(None, description="env var holding the API key; None = no key needed")
    api_key_header: str = Field("X-API-Key", min_length=1, description="header that carries the key")
    docs: bool = Field(True, description="serve OpenAPI docs at /docs and the spec at /openapi.json")
    limits: ServeLimits = ServeLimits()



def resolve_threads(config: ServeConfig, cores: int | None = None) -> tuple[int, int]:
    """(executors, onnxruntime threads per call) for one server process.

    Default: the process's share of the cores (cores / workers) split as one executor per core
    with one onnxruntime thread each. Measured with `benchmark serve` on 2 cores and RAGTruth-sized
    cases (configs/serve.yaml says the numbers): two single-threaded executors beat one executor on
    two threads, because a Gate call is part Python (tokenising, sentence features, decision) that
    a second executor overlaps with the other's model calls.
    """
    cores = cores or os.cpu_count() or 1
    share = max(1, cores // config.workers)
    executors = config.executors or (max(1, share // config.ort_threads) if config.ort_threads else share)
    ort_threads = config.ort_threads or max(1, share // executors)
    return executors, ort_threads


def load_serve_config(path: str | Path | None = None) -> ServeConfig:
    """The service config from `path`, or the shipped `configs/serve.yaml`."""
    return load_config(path or DEFAULT_SERVE_CONFIG, ServeConfig)
