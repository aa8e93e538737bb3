"""`autovalidators serve` and `autovalidators benchmark serve`.

Imported at CLI start (see COMMAND_MODULES), so nothing heavy here at import time: FastAPI and
uvicorn are imported inside the command bodies, with a hint naming the `serve` extra.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..cli import app, benchmark_app, console
from ..config import ConfigError
from ..manifest import ManifestError
from .config import load_serve_config

logger = logging.getLogger(__name__)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _require_serve_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        hint = "install the serve extra: pip install 'autovalidators[serve]'"
        raise _fail(f"{exc.name} is not installed; {hint}") from None


@app.command()
def serve(
    host: Optional[str] = typer.Option(None, help="address to bind (default: the config's, 127.0.0.1)"),
    port: Optional[int] = typer.Option(None, help="TCP port (default: the config's, 8080)"),
    config: Optional[Path] = typer.Option(None, help="service YAML (default: configs/serve.yaml)"),
    workers: Optional[int] = typer.Option(None, help="server processes (default: the config's)"),
    log_level: str = typer.Option("info", help="uvicorn log level"),
) -> None:
    """Serve the validators over HTTP: POST /v1/validate, GET /v1/models, GET /healthz, /docs."""
    _require_serve_extra()
    import uvicorn

    from .app import CONFIG_ENV, create_app

    try:
        serve_config = load_serve_config(config)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    host = host or serve_config.host
    port = serve_config.port if port is None else port
    workers = workers or serve_config.workers
    docs = f"; docs at http://{host}:{port}/docs" if serve_config.docs else ""
    try:
        # Built here even when worker processes will build their own: a bad model, key or gate
        # config is then one clear error instead of a traceback per worker.
        application = create_app(serve_config)
    except (ConfigError, ManifestError, ValueError) as exc:
        raise _fail(str(exc)) from None
    if workers > 1:
        # Each worker process builds its own Gate from the same config file.
        if config:
            os.environ[CONFIG_ENV] = str(config.resolve())
        console.print(f"serving on http://{host}:{port} with {workers} processes{docs}")
        uvicorn.run("autovalidators.inference.serving.app:create_app_from_env", factory=True, host=host, port=port,
                    workers=workers, log_level=log_level)
        return
    console.print(f"serving on http://{host}:{port}{docs}")
    uvicorn.run(application, host=host, port=port, log_level=log_level)


@benchmark_app.command("serve")
def benchmark_serve(
    clients: int = typer.Option(50, min=1, help="concurrent clients, each with one keep-alive connection"),
    seconds: float = typer.Option(60.0, min=0.1, help="how long to send requests"),
    url: Optional[str] = typer.Option(None, help="an already running server (default: start one on loopback)"),
    config: Optional[Path] = typer.Option(None, help="service YAML for the started server"),
    cases: Optional[Path] = typer.Option(None, help="JSONL of cases to send (default: the bundled examples)"),
    batch_size: int = typer.Option(1, min=1, help="cases per request (1 = the single-case form)"),
    api_key_env: Optional[str] = typer.Option(None, help="env var with the API key for --url"),
    json_out: Path = typer.Option(Path("out/benchmarks/serve.json"), "--json", help="where to write the JSON report"),
) -> None:
    """Load-check the HTTP service: concurrent clients on loopback; errors, throughput, p50/p95/p99."""
    from .loadtest import load_case_dicts, run_load, started_server

    try:
        records = load_case_dicts(cases)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    api_key = os.environ.get(api_key_env, "") if api_key_env else None
    if url is None:
        _require_serve_extra()
        try:
            serve_config = load_serve_config(config)
        except ConfigError as exc:
            raise _fail(str(exc)) from None
        if serve_config.api_key_env:
            api_key = os.environ.get(serve_config.api_key_env, "")
        with started_server(config) as base_url:
            console.print(f"server started at {base_url}; {clients} clients for {seconds:g} s")
            report = run_load(base_url, records, clients=clients, seconds=seconds, batch_size=batch_size,
                              api_key=api_key, api_key_header=serve_config.api_key_header)
    else:
        console.print(f"{clients} clients against {url} for {seconds:g} s")
        report = run_load(url, records, clients=clients, seconds=seconds, batch_size=batch_size, api_key=api_key)

    table = Table(title="autovalidators serve: load check")
    for column in ("clients", "seconds", "requests", "errors", "req/s", "cases/s", "p50 ms", "p95 ms", "p99 ms",
                   "max ms"):
        table.add_column(column, justify="right")
    lat = report.latency_ms
    table.add_row(str(report.clients), f"{report.seconds:.1f}", str(report.requests), str(report.errors),
                  f"{report.requests_per_s:.1f}", f"{report.cases_per_s:.1f}", f"{lat['p50']:.1f}",
                  f"{lat['p95']:.1f}", f"{lat['p99']:.1f}", f"{lat['max']:.1f}")
    console.print(table)
    if report.models:
        console.print("models: " + ", ".join(f"{name} ({kind})" for name, kind in report.models.items())
                      + f"; {report.cpu_count} CPUs")
    for sample in report.error_samples:
        console.print(f"[red]error[/red] {sample}")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {json_out}")
    if report.errors or report.requests == 0:
        raise typer.Exit(code=1)

