"""The HTTP service: `POST /v1/validate`, `GET /v1/models`, `GET /healthz`, OpenAPI docs.

One Gate per process, built before the first request and shared by a small thread pool
(onnxruntime sessions are thread-safe; the heuristics hold no state). Every limit in
`configs/serve.yaml` is answered with a 4xx JSON error, never a 500 or a hang:

| breach | status | error.code |
|---|---|---|
| missing or wrong API key (when configured) | 401 | unauthorized |
| body not JSON / not UTF-8 / empty | 400 | invalid_json, invalid_utf8, empty_body |
| body over `max_body_bytes` | 413 | body_too_large |
| batch over `max_batch_size` | 413 | batch_too_large |
| one case with a bad field or an over-long text | 422 | invalid_case |
| body neither a case nor `{"cases": [...]}` | 422 | invalid_body |
| body read + validation over `request_timeout_s` | 408 | timeout |
| more than `max_in_flight` requests validating | 429 | busy |

In a batch, a bad record gets the CLI's error record in its place and the rest is validated.
Needs the `serve` extra (fastapi, uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..case import Case, CaseError
from ..config import load_gate_config
from ..gate import Gate
from ..manifest import MANIFEST_NAME, ManifestError, load_manifest
from ..validators import DEFAULT_MODELS_DIR
from .config import ServeConfig, load_serve_config
from .requests import ERROR_SCHEMA, ApiError, case_error_body, decode_json, parse_request, request_schema

logger = logging.getLogger(__name__)

CONFIG_ENV = "AUTOVALIDATORS_SERVE_CONFIG"  # how `serve --workers N` hands the config to each process
API_VERSION = "1"


class SafeJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped: text is valid JSON and valid UTF-8 whatever the input held."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class ValidationPool:
    """Runs Gate calls on a fixed thread pool and refuses work beyond `max_in_flight`.

    A slot is held until the worker is really done (not when the request gives up), so timed-out
    work still counts against the limit and a flood of slow requests gets 429s, not a backlog.
    """

    def __init__(self, gate: Gate, *, threads: int, max_in_flight: int, chunk_size: int):
        self.gate = gate
        self.chunk_size = chunk_size
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="autovalidators-serve")
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._max_in_flight = max_in_flight

    def submit(self, cases: list[Case], cancel: threading.Event) -> Future:
        if not self._slots.acquire(blocking=False):
            raise ApiError(429, "busy", f"{self._max_in_flight} requests are already being validated; retry shortly",
                           headers={"Retry-After": "1"})
        try:
            future = self._executor.submit(self._run, cases, cancel)
        except BaseException:
            self._slots.release()
            raise
        # Fires on completion and on cancellation of a queued call alike, so no slot leaks.
        future.add_done_callback(lambda _: self._slots.release())
        return future

    def _run(self, cases: list[Case], cancel: threading.Event) -> list[dict[str, Any]] | None:
        results: list[dict[str, Any]] = []
        for start in range(0, len(cases), self.chunk_size):
            if cancel.is_set():  # the request timed out: stop spending CPU on an answer nobody reads
                return None
            results.extend(r.to_dict() for r in self.gate.validate_batch(cases[start:start + self.chunk_size]))
        return results

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def resolve_api_key(config: ServeConfig) -> str | None:
    """The key from the env var the config names; a named but empty variable is an error (fail closed)."""
    if not config.api_key_env:
        return None
    key = os.environ.get(config.api_key_env, "")
    if not key:
        raise ValueError(f"api_key_env is {config.api_key_env!r} but that environment variable is empty or unset; "
                         "set it, or set api_key_env: null to serve without a key")
    return key


def build_gate(config: ServeConfig) -> Gate:
    """The process's one Gate, from the service config's gate policy, validators and models_dir."""
    gate_config = load_gate_config(config.gate_config)
    judge = None
    if gate_config.judge.enabled:
        # Consulted only on uncertain cases; its own timeout sits inside request_timeout_s.
        from ..judge import LLMJudge

        judge = LLMJudge(gate_config.judge)
    return Gate(gate_config, validators=config.validators, models_dir=config.models_dir, judge=judge)


def describe_models(gate: Gate, models_dir: str | Path | None) -> list[dict[str, Any]]:
    """Per validator: kind, version, sha256, and task/labels/thresholds/metrics from its manifest."""
    folder = Path(models_dir or gate.config.models_dir or DEFAULT_MODELS_DIR)
    described = []
    for name, validator in gate.validators.items():
        info = validator.info
        entry: dict[str, Any] = {"name": name, "kind": info.kind, "version": info.version, "sha256": info.sha256,
                                 "task": None, "labels": [], "thresholds": {}, "metrics": {}}
        if info.kind != "heuristic" and (folder / name / MANIFEST_NAME).is_file():
            try:
                # Already verified when the Gate loaded it; re-hashing here would only cost time.
                manifest = load_manifest(folder / name, verify=False)
                entry.update(task=manifest.task, labels=manifest.labels, thresholds=manifest.thresholds,
                             metrics=manifest.metrics, base_model=manifest.base_model)
            except ManifestError as exc:
                logger.warning("cannot describe %s: %s", name, exc)
        described.append(entry)
    return described


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "invalid_content_length", f"Content-Length {declared!r} is not a number")
        if int(declared) > max_bytes:
            raise ApiError(413, "body_too_large", f"the body is {int(declared):,} bytes, over the limit of "
                           f"{max_bytes:,}; send fewer or shorter cases", {"limit": max_bytes})
    # Chunked bodies declare no length: count while reading and stop at the limit.
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, "body_too_large", f"the body is over the limit of {max_bytes:,} bytes; "
                           "send fewer or shorter cases", {"limit": max_bytes})
        chunks.append(chunk)
    return b"".join(chunks)


def _error_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> SafeJSONResponse:
    return SafeJSONResponse(body, status_code=status, headers=headers)


def create_app(config: ServeConfig | None = None, *, gate: Gate | None = None) -> FastAPI:
    """The FastAPI app; builds the Gate now (unless given) so a bad model fails before serving."""
    config = config or load_serve_config()
    limits = config.limits
    api_key = resolve_api_key(config)
    gate = gate or build_gate(config)
    models = describe_models(gate, config.models_dir)
    pool = ValidationPool(gate, threads=config.threads, max_in_flight=limits.max_in_flight,
                          chunk_size=config.chunk_size)
    started = time.time()

    app = FastAPI(
        title="autovalidators",
        version=API_VERSION,
        description="Validate LLM/RAG answers: ACCEPT, REVIEW or REJECT, with the failure type, next action, "
                    "reason, confidence and triggering spans.",
        docs_url="/docs" if config.docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if config.docs else None,
        default_response_class=SafeJSONResponse,
    )
    app.state.gate = gate
    app.state.pool = pool
    app.router.add_event_handler("shutdown", pool.shutdown)
    key_header = APIKeyHeader(name=config.api_key_header, auto_error=False,
                              description="required when the server's config names api_key_env")

    def require_key(provided: str | None = Depends(key_header)) -> None:
        if api_key is None:
            return
        if not provided or not hmac.compare_digest(provided.encode("utf-8", "replace"), api_key.encode("utf-8")):
            raise ApiError(401, "unauthorized", f"missing or wrong API key in the {config.api_key_header} header",
                           headers={"WWW-Authenticate": "ApiKey"})

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> SafeJSONResponse:
        return _error_response(exc.status, exc.body(), exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> SafeJSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error_response(exc.status_code, {"error": {"code": code, "message": str(exc.detail)}},
                               getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _request_error(_: Request, exc: RequestValidationError) -> SafeJSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error_response(422, {"error": {"code": "invalid_request", "message": f"{where}: {first['msg']}"}})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> SafeJSONResponse:
        # A bug, not a bad request: logged with its traceback, answered as JSON all the same.
        logger.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error_response(500, {"error": {"code": "internal_error",
                                               "message": f"{type(exc).__name__}; see the server log"}})

    error_responses = {status: {"description": text, "content": {"application/json": {"schema": ERROR_SCHEMA}}}
                       for status, text in ((400, "not JSON"), (401, "missing or wrong API key"),
                                            (408, "over request_timeout_s"), (413, "body or batch too large"),
                                            (422, "not a case or a batch; or one bad case"),
                                            (429, "too many requests in flight"))}

    @app.post(
        "/v1/validate",
        dependencies=[Depends(require_key)],
        summary="Validate one case, or a batch {\"cases\": [...]}",
        responses={200: {"description": "one result (a case was sent) or {results, errors} (a batch was sent); "
                                        "a bad batch record gets an error record in its place"},
                   **error_responses},
        openapi_extra={"requestBody": {"required": True,
                                       "content": {"application/json": {"schema": request_schema(limits)}}}},
    )
    async def validate(request: Request) -> SafeJSONResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.request_timeout_s
        try:
            body = await asyncio.wait_for(_read_body(request, limits.max_body_bytes), limits.request_timeout_s)
        except asyncio.TimeoutError:
            raise ApiError(408, "timeout", f"the body was not received within {limits.request_timeout_s:g} s") from None
        parsed = parse_request(decode_json(body), limits)
        if not parsed.batch and isinstance(parsed.records[0], CaseError):
            return _error_response(422, case_error_body(parsed.records[0]))
        cases = [r for r in parsed.records if isinstance(r, Case)]
        results: list[dict[str, Any]] = []
        if cases:
            cancel = threading.Event()
            future = pool.submit(cases, cancel)
            try:
                results = await asyncio.wait_for(asyncio.wrap_future(future), max(deadline - loop.time(), 0.001))
            except asyncio.TimeoutError:
                cancel.set()
                raise ApiError(408, "timeout", f"validation took over {limits.request_timeout_s:g} s; "
                               "send fewer cases per request or raise limits.request_timeout_s") from None
        if not parsed.batch:
            return SafeJSONResponse(results[0])
        produced = iter(results)
        items = [r.to_dict() if isinstance(r, CaseError) else next(produced) for r in parsed.records]
        errors = sum(isinstance(r, CaseError) for r in parsed.records)
        return SafeJSONResponse({"results": items, "errors": errors})

    @app.get("/v1/models", dependencies=[Depends(require_key)], summary="The validators this server runs",
             responses={401: error_responses[401]})
    async def list_models() -> dict[str, Any]:
        return {"models": models, "fallback": sorted(m["name"] for m in models if m["kind"] == "heuristic")}

    @app.get("/healthz", summary="Liveness: the Gate is built and the server answers")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "validators": list(gate.validators), "uptime_s": round(time.time() - started, 1)}

    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn's worker processes: reads the config path from $AUTOVALIDATORS_SERVE_CONFIG."""
    return create_app(load_serve_config(os.environ.get(CONFIG_ENV) or None))


@contextlib.contextmanager
def serve_in_thread(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0,
                    startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Runs `app` with uvicorn in a background thread (tests, notebooks); yields its base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="autovalidators-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]  # the real port when port=0
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
