"""Builds the report: read (or first run) each benchmark, adapt it, draw the figures, write the files.

`report.json` is the `Report` model; `report.md` links the PNGs written to `img/`; `report.html`
embeds them. A benchmark JSON that is absent gives a "not benchmarked" section naming the command
to run; one that cannot be read gives an "unreadable" section with the reason. Neither stops the
other sections.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from ..manifest import BENCHMARK_NAME, MANIFEST_NAME, ManifestError, load_manifest
from .adapters import ADAPTERS
from .render import Figure, render_html, render_markdown
from .schema import Provenance, Report, ReportConfig, ValidatorSection

logger = logging.getLogger(__name__)
Step = Callable[[str], None]  # called with a description as each step starts


def _command(config: ReportConfig, name: str, benchmarks_dir: Path) -> str:
    section = config.sections[name]
    return section.command.format(file=benchmarks_dir / section.file)


def models_dir(config: ReportConfig) -> Path:
    """The config's models folder; outside a checkout (a relative path that is not there) the
    installed package's shipped models."""
    folder = Path(config.models_dir)
    if not folder.is_absolute() and not folder.is_dir():
        from ..validators import DEFAULT_MODELS_DIR

        return DEFAULT_MODELS_DIR
    return folder


def shipped_benchmark(config: ReportConfig, name: str) -> Path | None:
    """`<models_dir>/<needs_model>/benchmark.json`, the results shipped with the model, if any."""
    needs = config.sections[name].needs_model
    path = models_dir(config) / needs / BENCHMARK_NAME if needs else None
    return path if path is not None and path.is_file() else None


def read_section(name: str, config: ReportConfig, benchmarks_dir: Path) -> ValidatorSection:
    """One section from its benchmark JSON (a run here, else the one shipped with the model), or
    the reason there is none."""
    section = config.sections[name]
    path = benchmarks_dir / section.file
    command = _command(config, name, benchmarks_dir)
    notes = []
    if not path.is_file() and shipped_benchmark(config, name):
        path = shipped_benchmark(config, name)
        notes.append(f"numbers shipped with the model ({path}); to measure them on this machine: {command}")
    if not path.is_file():
        return ValidatorSection(name=name, status="not benchmarked",
                                message=f"no benchmark JSON at {path}; run: {command}",
                                provenance=Provenance(command=command, command_recorded=False))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        adapter = ADAPTERS.get(name)
        if adapter is None:
            raise ValueError(f"no report adapter for {name!r}; known: {', '.join(sorted(ADAPTERS))}")
        result = adapter(data, path, section, config)
    except (json.JSONDecodeError, ValueError, KeyError, TypeError, ValidationError) as exc:
        logger.warning("%s: cannot read %s: %s", name, path, exc)
        return ValidatorSection(name=name, status="unreadable", message=f"{path}: {type(exc).__name__}: {exc}",
                                provenance=Provenance(command=command, command_recorded=False,
                                                      benchmark_file=str(path)))
    notes += _stale(config, name, result.provenance.model_sha256, command)
    return result.model_copy(update={"notes": notes + result.notes}) if notes else result


def _stale(config: ReportConfig, name: str, measured_sha: str, command: str) -> list[str]:
    """A note when the benchmark measured another model than the one in the models folder."""
    needs = config.sections[name].needs_model
    if not needs or not measured_sha:
        return []
    try:
        current = load_manifest(models_dir(config) / needs, verify=False).model_sha256
    except ManifestError:
        return []
    if current == measured_sha:
        return []
    return [f"measured on model sha256 {measured_sha[:12]}…, but {models_dir(config) / needs} now holds "
            f"{current[:12]}…: these numbers are not this model's; re-run: {command}"]


def run_benchmarks(config: ReportConfig, benchmarks_dir: Path, log_dir: Path,
                   step: Step | None = None) -> dict[str, str]:
    """Runs each section's benchmark command (`--run`); returns {section: outcome}.

    A model validator whose model folder is missing is skipped (its section then reads whatever
    JSON exists, or says "not benchmarked"). Output goes to `<log_dir>/<section>.log`.
    """
    outcomes: dict[str, str] = {}
    log_dir.mkdir(parents=True, exist_ok=True)
    for name, section in config.sections.items():
        if section.needs_model and not (models_dir(config) / section.needs_model / MANIFEST_NAME).is_file():
            outcomes[name] = f"skipped: no model in {models_dir(config) / section.needs_model}"
            continue
        missing = [p for p in section.needs_data if not Path(p).exists()]
        if missing:
            shown = " (the report shows the numbers shipped with the model)" if shipped_benchmark(config, name) else ""
            outcomes[name] = (f"skipped: no prepared data at {missing[0]}; run `{section.prepare}` first, "
                              f"then report --run again{shown}")
            continue
        command = _command(config, name, benchmarks_dir)
        if step:
            step(f"benchmark {name}")
        argv = shlex.split(command)
        if argv and argv[0] == "autovalidators":
            # The same interpreter and install as this process, whatever is first on PATH. Not
            # `-m ...cli`: as __main__ that module would be loaded twice and the commands that
            # other modules register would land on the copy that does not run.
            argv = [sys.executable, "-c", "from autovalidators.inference.cli import main; main()", *argv[1:]]
        log = log_dir / f"{name}.log"
        with open(log, "w", encoding="utf-8") as sink:
            finished = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, check=False)
        outcomes[name] = "ran" if finished.returncode == 0 else f"failed (exit {finished.returncode}; see {log})"
        hint = re.search(r"run:? `(autovalidators prepare [^`]+)`", log.read_text(encoding="utf-8", errors="replace"))
        if finished.returncode != 0 and hint:  # the benchmark says which data it lacked
            outcomes[name] += f"; it needs prepared data: run `{hint.group(1)}` first"
    return outcomes


def build_report(config: ReportConfig, benchmarks_dir: Path, name: str, command: str,
                 run_outcomes: dict[str, str] | None = None, step: Step | None = None) -> Report:
    sections = []
    for section_name in config.sections:
        if step:
            step(f"read {section_name}")
        section = read_section(section_name, config, benchmarks_dir)
        outcome = (run_outcomes or {}).get(section_name)
        if outcome and outcome != "ran":
            section = section.model_copy(update={"notes": [*section.notes, f"--run: {outcome}"]})
        sections.append(section)
    return Report(name=name, created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  command=command, sections=sections, meta={"benchmarks_dir": str(benchmarks_dir),
                                                            "run": run_outcomes or {}})


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "figure"


def draw_figures(report: Report, config: ReportConfig, step: Step | None = None) -> list[Figure]:
    """Every figure of every section: PR curves, confusion matrices, calibration, latency bars."""
    from . import plots

    plots.require_matplotlib()
    figures: list[Figure] = []

    def add(section: str, kind: str, title: str, png: bytes) -> None:
        file = f"img/{_slug(section)}_{kind}_{len(figures):02d}_{_slug(title)}.png"
        figures.append(Figure(section=section, kind=kind, title=title, png=png, file=file))

    for section in report.sections:
        if step:
            step(f"plot {section.name}")
        for scored in section.scored:
            add(section.name, "pr", f"precision–recall: {scored.name}", plots.pr_curve(scored))
        for confusion in section.confusion:
            add(section.name, "confusion", f"confusion matrix: {confusion.name} ({confusion.origin})",
                plots.confusion_plot(confusion))
        usable = [s for s in section.scored if s.scores]
        if usable:
            add(section.name, "calibration", f"calibration: {section.name}",
                plots.calibration_plot(usable, config.calibration_bins))
        preferences = [(r.group, r.extra.get("sides_context_rate"), r.extra.get("no_preference_rate"),
                        r.extra.get("sides_world_rate")) for r in section.metrics if r.scope == "validator"]
        preferences = [p for p in preferences if all(isinstance(v, float) for v in p[1:])]
        if preferences:
            add(section.name, "obedience", "obedience per validator", plots.preference_plot(preferences))
        if section.latency:
            add(section.name, "latency", f"latency: {section.name}", plots.latency_plot(section.latency))
    return figures


def write_report(report: Report, figures: list[Figure], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    for figure in figures:
        target = out_dir / figure.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(figure.png)
    paths = {"json": out_dir / "report.json", "md": out_dir / "report.md", "html": out_dir / "report.html"}
    paths["json"].write_text(report.model_dump_json(indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report, figures), encoding="utf-8")
    paths["html"].write_text(render_html(report, figures), encoding="utf-8")
    return paths
