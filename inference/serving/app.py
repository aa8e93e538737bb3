"""The HTTP service: `POST /v1/validate`, `GET /v1/models`, `GET /healthz`, `GET /metrics`, docs.

One Gate per process, built before the first request. Requests do not call it themselves: their
cases join a bounded queue (`scheduler.BatchingScheduler`) whose few executor threads gather
concurrent requests into one `validate_batch` call, so at most `executors` calls run at once and
the cores are not oversubscribed. Every limit in `configs/serve.yaml` is answered at once with a
JSON error, never a 500 or a hang:

| breach | status | error.code |
|---|---|---|
| missing or wrong API key (when configured) | 401 | unauthorized |
| body not JSON / not UTF-8 / empty | 400 | invalid_json, invalid_utf8, empty_body |
| body over `max_body_bytes` | 413 | body_too_large |
| batch over `max_batch_size` | 413 | batch_too_large |
| one case with a bad field or an over-long text | 422 | invalid_case |
| body neither a case nor `{"cases": [...]}` | 422 | invalid_body |
| body not received within `request_timeout_s` | 408 | timeout |
| queue full, or its estimated wait past `request_timeout_s` | 503 + Retry-After | overloaded |
| still queued at `request_timeout_s` (dropped unstarted) | 503 + Retry-After | overloaded |

A 503 is answered before any work is done. Admitted work that has started always finishes; a
client that disconnects while its request is queued frees its place. In a batch, a bad record
gets the CLI's error record in its place and the rest is validated. Needs the `serve` extra
(fastapi, uvicorn, prometheus-client).
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
from pathlib import Path
from typing import Any, Iterator

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..case import Case, CaseError
from ..config import load_gate_config
from ..gate import Gate
from ..manifest import MANIFEST_NAME, ManifestError, load_manifest
from ..validators import DEFAULT_MODELS_DIR
from .config import ServeConfig, load_serve_config, resolve_threads
from .metrics import ServiceMetrics
from .requests import ERROR_SCHEMA, ApiError, case_error_body, decode_json, parse_request, request_schema
from .scheduler import BatchingScheduler, Expired, Job, Overloaded, retry_after_header

logger = logging.getLogger(__name__)

CONFIG_ENV = "AUTOVALIDATORS_SERVE_CONFIG"  # how `serve --workers N` hands the config to each process
API_VERSION = "1"


class SafeJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped: text is valid JSON and valid UTF-8 whatever the input held."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def resolve_api_key(config: ServeConfig) -> str | None:
    """The key from the env var the config names; a named but empty variable is an error (fail closed)."""
    if not config.api_key_env:
        return None
    key = os.environ.get(config.api_key_env, "")
    if not key:
        raise ValueError(f"api_key_env is {config.api_key_env!r} but that environment variable is empty or unset; "
                         "set it, or set api_key_env: null to serve without a key")
    return key


def build_gate(config: ServeConfig, *, threads: int | None = None) -> Gate:
    """The process's one Gate, from the service config's gate policy, validators and models_dir;
    `threads`: onnxruntime intra-op threads per model call."""
    gate_config = load_gate_config(config.gate_config)
    judge = None
    if gate_config.judge.enabled:
        # Consulted only on uncertain cases; its own timeout sits inside request_timeout_s.
        from ..judge import LLMJudge

        judge = LLMJudge(gate_config.judge)
    return Gate(gate_config, validators=config.validators, models_dir=config.models_dir, judge=judge,
                threads=threads)


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


def _overloaded(message: str, retry_after_s: float, reason: str) -> ApiError:
    return ApiError(503, "overloaded", message, {"reason": reason},
                    headers={"Retry-After": retry_after_header(retry_after_s)})


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body is already read, so the next ASGI message is
    the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _wait_for(job: Job, request: Request, scheduler: BatchingScheduler) -> list[dict[str, Any]] | None:
    """The job's results, or None when the client went away first (a queued job is then dropped)."""
    result = asyncio.ensure_future(asyncio.wrap_future(job.future))
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not result.done():
        scheduler.cancel(job)
        result.cancel()
        return None
    return result.result()


def create_app(config: ServeConfig | None = None, *, gate: Gate | None = None) -> FastAPI:
    """The FastAPI app; builds the Gate now (unless given) so a bad model fails before serving."""
    config = config or load_serve_config()
    limits = config.limits
    api_key = resolve_api_key(config)
    executors, ort_threads = resolve_threads(config)
    gate = gate or build_gate(config, threads=ort_threads)
    models = describe_models(gate, config.models_dir)
    scheduler = BatchingScheduler(lambda cases: [r.to_dict() for r in gate.validate_batch(cases)],
                                  executors=executors, max_batch_cases=config.batching.max_batch_cases,
                                  max_wait_ms=config.batching.max_wait_ms, max_queue_cases=limits.max_queue_cases)
    metrics = ServiceMetrics(scheduler)
    scheduler.observe = metrics.observe
    logger.info("serving with %d executor(s) x %d onnxruntime thread(s)", executors, ort_threads)
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
    app.state.scheduler = scheduler
    app.state.metrics = metrics
    app.router.add_event_handler("shutdown", scheduler.close)
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
                                            (408, "body not received within request_timeout_s"),
                                            (413, "body or batch too large"),
                                            (422, "not a case or a batch; or one bad case"),
                                            (503, "overloaded: retry after Retry-After seconds; nothing was done"))}

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
        began = time.monotonic()
        try:
            response = await _validate(request, began)
        except ApiError as exc:
            metrics.requests.labels(str(exc.status)).inc()
            if exc.status == 503:
                metrics.shed.labels(exc.extra.get("reason", "overloaded")).inc()
            raise
        except Exception:
            metrics.requests.labels("500").inc()  # answered by the JSON 500 handler below
            raise
        metrics.requests.labels(str(response.status_code)).inc()
        metrics.latency.observe(time.monotonic() - began)
        return response

    async def _validate(request: Request, began: float) -> SafeJSONResponse:
        deadline = began + limits.request_timeout_s
        try:
            body = await asyncio.wait_for(_read_body(request, limits.max_body_bytes), limits.request_timeout_s)
        except asyncio.TimeoutError:
            raise ApiError(408, "timeout", f"the body was not received within {limits.request_timeout_s:g} s") from None
        parsed = parse_request(decode_json(body), limits)
        if not parsed.batch and isinstance(parsed.records[0], CaseError):
            return _error_response(422, case_error_body(parsed.records[0]))
        cases = [r for r in parsed.records if isinstance(r, Case)]
        results: list[dict[str, Any]] = []
        timing = ""
        if cases:
            try:
                job = scheduler.submit(cases, deadline=deadline)
            except Overloaded as exc:
                raise _overloaded(exc.message, exc.retry_after_s, exc.reason) from None
            try:
                produced = await _wait_for(job, request, scheduler)
            except Expired as exc:
                raise _overloaded(f"{exc}; the server is saturated, retry later", scheduler.estimated_wait_s(),
                                  "expired") from None
            if produced is None:  # the client is gone: nobody reads this
                return _error_response(499, {"error": {"code": "client_closed", "message": "client disconnected"}})
            results = produced
            # Server-Timing (W3C): how long the cases queued, so clients and load checks can see it.
            queued_ms = ((job.started or job.enqueued) - job.enqueued) * 1000
            timing = f"queue;dur={queued_ms:.1f}, total;dur={(time.monotonic() - began) * 1000:.1f}"
        headers = {"Server-Timing": timing} if timing else None
        if not parsed.batch:
            return SafeJSONResponse(results[0], headers=headers)
        produced_iter = iter(results)
        items = [r.to_dict() if isinstance(r, CaseError) else next(produced_iter) for r in parsed.records]
        errors = sum(isinstance(r, CaseError) for r in parsed.records)
        return SafeJSONResponse({"results": items, "errors": errors}, headers=headers)

    @app.get("/v1/models", dependencies=[Depends(require_key)], summary="The validators this server runs",
             responses={401: error_responses[401]})
    async def list_models() -> dict[str, Any]:
        return {"models": models, "fallback": sorted(m["name"] for m in models if m["kind"] == "heuristic")}

    @app.get("/healthz", summary="Liveness: the Gate is built and the server answers (also when saturated)")
    async def healthz() -> dict[str, Any]:
        # Runs on the event loop, never behind the validation queue, so it answers under load.
        return {"status": "ok", "validators": list(gate.validators), "uptime_s": round(time.time() - started, 1),
                "queue_cases": scheduler.queued_cases, "in_flight_cases": scheduler.running_cases}

    @app.get("/metrics", summary="Prometheus text format: queue depth, in-flight, shed, latency histograms",
             response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn's worker processes: reads the config path from $AUTOVALIDATORS_SERVE_CONFIG."""
    import sys

    config = load_serve_config(os.environ.get(CONFIG_ENV) or None)
    sys.setswitchinterval(config.switch_interval_ms / 1000)  # as `serve` does in a single process
    return create_app(config)


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
