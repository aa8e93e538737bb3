"""`autovalidators serve` and `autovalidators benchmark serve`.

Imported at CLI start (see COMMAND_MODULES), so nothing heavy here at import time: FastAPI and
uvicorn are imported inside the command bodies, with a hint naming the `serve` extra.
"""

from __future__ import annotations

import json
import logging
import os
import sys
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
    # The event loop shares the interpreter lock with the executors' Python work (sentence
    # features, decisions); a 1 ms switch interval instead of 5 ms lets it answer health probes
    # and shed requests promptly while they run (`benchmark serve` prints both).
    sys.setswitchinterval(serve_config.switch_interval_ms / 1000)
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


def _client_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise _fail(f"--clients {text!r}: give whole numbers separated by commas, e.g. 1,4,16,50") from None
    if not levels or min(levels) < 1:
        raise _fail(f"--clients {text!r}: each level must be at least 1")
    return levels


@benchmark_app.command("serve")
def benchmark_serve(
    clients: str = typer.Option("50", help="concurrent clients, or several levels run in turn: 1,4,16,50"),
    seconds: float = typer.Option(60.0, min=0.1, help="how long to send requests at each level"),
    url: Optional[str] = typer.Option(None, help="an already running server (default: start one on loopback)"),
    config: Optional[Path] = typer.Option(None, help="service YAML for the started server"),
    cases: Optional[Path] = typer.Option(None, help="JSONL of cases to send (default: the bundled examples)"),
    ragtruth: int = typer.Option(0, min=0, help="instead of --cases: the first N RAGTruth responses with their "
                                                "passages (RAGTruth-sized cases, from --ragtruth-file)"),
    ragtruth_file: Path = typer.Option(Path("../shared/datasets/ragtruth_subset/ragtruth_600.jsonl"),
                                       help="the RAGTruth JSONL --ragtruth reads"),
    batch_size: int = typer.Option(1, min=1, help="cases per request (1 = the single-case form)"),
    api_key_env: Optional[str] = typer.Option(None, help="env var with the API key for --url"),
    reference: bool = typer.Option(True, help="first measure one process running `validate` on the same cases "
                                              "(not with --url)"),
    retry_after: bool = typer.Option(True, help="clients wait a 503's Retry-After before sending again"),
    json_out: Path = typer.Option(Path("out/benchmarks/serve.json"), "--json", help="where to write the JSON report"),
) -> None:
    """Load-check the HTTP service: answered vs shed requests, time-outs, queue wait, p50/p99 per level.

    Exits 1 on any error or time-out (a fast 503 is the server shedding load, not an error).
    """
    from .loadtest import load_case_dicts, run_load, started_server, validate_throughput

    levels = _client_levels(clients)
    if ragtruth:
        from ..batch_bench import ragtruth_cases

        if not ragtruth_file.is_file():
            raise _fail(f"{ragtruth_file}: no such file; point --ragtruth-file at RAGTruth's JSONL")
        try:
            records = ragtruth_cases(ragtruth_file, ragtruth)
        except ValueError as exc:
            raise _fail(str(exc)) from None
    else:
        try:
            records = load_case_dicts(cases)
        except ValueError as exc:
            raise _fail(str(exc)) from None
    api_key = os.environ.get(api_key_env, "") if api_key_env else None
    reports = []
    reference_cps = None
    if url is None:
        _require_serve_extra()
        try:
            serve_config = load_serve_config(config)
        except ConfigError as exc:
            raise _fail(str(exc)) from None
        if serve_config.api_key_env:
            api_key = os.environ.get(serve_config.api_key_env, "")
        if reference:
            # Measured before the server starts, so the two never share the cores.
            reference_cps = validate_throughput(records, config=config)
            console.print(f"one process, `validate` loop: {reference_cps:.2f} cases/s")
        with started_server(config) as base_url:
            for level in levels:
                console.print(f"server at {base_url}; {level} clients for {seconds:g} s")
                reports.append(run_load(base_url, records, clients=level, seconds=seconds, batch_size=batch_size,
                                        api_key=api_key, api_key_header=serve_config.api_key_header,
                                        honor_retry_after=retry_after))
    else:
        for level in levels:
            console.print(f"{level} clients against {url} for {seconds:g} s")
            reports.append(run_load(url, records, clients=level, seconds=seconds, batch_size=batch_size,
                                    api_key=api_key, honor_retry_after=retry_after))

    table = Table(title="autovalidators serve: load check")
    for column in ("clients", "requests", "200", "503", "time-outs", "errors", "cases/s", "vs validate",
                   "p50 ms", "p99 ms", "503 p99 ms", "queue p50 ms", "queue p99 ms", "healthz max ms"):
        table.add_column(column, justify="right")
    for report in reports:
        lat, shed, queue = report.latency_ms, report.shed_latency_ms, report.queue_wait_ms
        ratio = f"{report.cases_per_s / reference_cps:.2f}" if reference_cps else "-"
        table.add_row(str(report.clients), str(report.requests), str(report.admitted), str(report.shed),
                      str(report.timeouts), str(report.errors), f"{report.cases_per_s:.2f}", ratio,
                      f"{lat['p50']:.0f}", f"{lat['p99']:.0f}", f"{shed['p99']:.1f}" if report.shed else "-",
                      f"{queue['p50']:.0f}", f"{queue['p99']:.0f}", f"{report.health_ms['max']:.0f}")
    console.print(table)
    if reports and reports[0].models:
        console.print("models: " + ", ".join(f"{name} ({kind})" for name, kind in reports[0].models.items())
                      + f"; {reports[0].cpu_count} CPUs; {len(records)} cases, {batch_size} per request")
    for report in reports:
        for sample in report.error_samples:
            console.print(f"[red]error[/red] ({report.clients} clients) {sample}")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"validate_cases_per_s": reference_cps, "cases": len(records), "levels": [r.to_dict() for r in reports]}
    json_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {json_out}")
    if any(r.errors or r.admitted == 0 for r in reports):
        raise typer.Exit(code=1)
