"""Typed config of the HTTP service (`configs/serve.yaml`), kept apart from the server module.

The CLI loads and checks this before importing FastAPI, so a bad key is reported even where the
`serve` extra is not installed, and `autovalidators --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

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
    # Reading the body plus validating: past this the request is answered 408 and its remaining
    # work is dropped between chunks, so a slow request can't hold the server.
    request_timeout_s: float = Field(10.0, gt=0, description="seconds per request, body read included")
    # Requests being validated at once, including timed-out work still finishing a chunk; beyond
    # this the server answers 429 at once instead of queueing without bound.
    max_in_flight: int = Field(256, gt=0, description="requests in validation at once before 429")


class ServeConfig(StrictModel):
    """How `autovalidators serve` runs; command-line options override host, port and workers."""

    host: str = Field("127.0.0.1", description="address to bind; 0.0.0.0 exposes it beyond this machine")
    port: int = Field(8080, ge=0, le=65535, description="TCP port; 0 picks a free one")
    # Each process builds its own Gate (and ONNX sessions) once; threads within it share them.
    workers: int = Field(1, ge=1, description="server processes")
    threads: int = Field(4, ge=1, description="validation threads per process")
    # Cases validated per Gate call inside a request; the timeout is checked between chunks.
    chunk_size: int = Field(16, ge=1, description="cases per Gate call within one request")
    gate_config: str | None = Field(None, description="gate policy YAML; None = configs/gate.yaml")
    validators: list[Literal["fact_spans", "qa_relevance", "tone"]] | None = Field(
        None, description="validators to run; None = the gate config's list"
    )
    models_dir: str | None = Field(None, description="trained validators; None = the gate config's")
    # The key itself never lives in a config file: only the name of the variable that holds it.
    api_key_env: str | None = Field(None, description="env var holding the API key; None = no key needed")
    api_key_header: str = Field("X-API-Key", min_length=1, description="header that carries the key")
    docs: bool = Field(True, description="serve OpenAPI docs at /docs and the spec at /openapi.json")
    limits: ServeLimits = ServeLimits()



def load_serve_config(path: str | Path | None = None) -> ServeConfig:
    """The service config from `path`, or the shipped `configs/serve.yaml`."""
    return load_config(path or DEFAULT_SERVE_CONFIG, ServeConfig)
