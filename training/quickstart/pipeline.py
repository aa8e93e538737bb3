"""Runs the quickstart's stages in order with rich progress bars; every output in one folder.

    <out>/quickstart_config.yaml   the resolved quickstart config (overrides applied)
    <out>/configs/<task>.yaml      each task's TaskConfig: `autovalidators train <task> --config` re-runs it
    <out>/data/                    bundled samples as sources, prepared splits and data cards
    <out>/runs/<task>/             training runs (best/, metrics.jsonl, onnx/ with the export report)
    <out>/models/<task>/           model.onnx (int8) + tokenizer.json + manifest.json
    <out>/benchmarks/<task>.json   light benchmarks (+ gate.json), read by the report
    <out>/results.jsonl            a decision per bundled example case, from the fresh models
    <out>/report/report.html       the report (also report.md, report.json, img/)
    <out>/timings.json, summary.json, logs/   wall time per stage, headline numbers, logs

While a stage runs, its stderr (the trainer's tqdm bar, benchmark tables, warnings) goes to
`logs/<stage>.log` and the package's INFO log to `logs/quickstart.log`, so the screen shows only
the progress bars; the training bar follows the trainer's per-step log record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from autovalidators.training.quickstart.config import QuickstartTrainConfig

logger = logging.getLogger(__name__)

TASKS = ("qa_relevance", "fact_spans", "tone")
TRAINER_LOGGER = "autovalidators.training.trainer"
# The trainer logs "step %d/%d loss ..." every `log_every` (= 1 here) optimizer steps.
STEP_MESSAGE = "step %d/%d"


class QuickstartError(RuntimeError):
    """A stage that could not run; the message names the stage, the cause and the log."""


@dataclass
class Outcome:
    """What a finished quickstart left behind (all paths inside `out`)."""

    out: Path
    timings: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    results: list = field(default_factory=list)  # inference.run.Decided, one per case
    errors: list = field(default_factory=list)
    gate: Any = None


class _StepHandler(logging.Handler):
    """Moves the training bar on each of the trainer's per-step log records."""

    def __init__(self, on_step: Callable[[int, int], None]):
        super().__init__(logging.INFO)
        self.on_step = on_step

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if isinstance(record.msg, str) and record.msg.startswith(STEP_MESSAGE) and len(args) >= 2:
            self.on_step(int(args[0]), int(args[1]))


class _ForwardWarnings(logging.Handler):
    """Hands the package's warnings to the root handlers (the CLI's console) while INFO stays in the file."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger().callHandlers(record)


def _known_errors() -> tuple[type[BaseException], ...]:
    from autovalidators.training.export import ExportError

    # Config/data/model problems (ValueError family: ConfigError, DataError, ManifestError,
    # BaseModelError, SplitError), missing files or hub models (OSError) and failed export rules.
    return (ValueError, OSError, ExportError)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


class Quickstart:
    """One run of the loop into `out`; `run()` returns its Outcome or raises QuickstartError."""

    def __init__(self, config: QuickstartTrainConfig, out: Path, console: Console):
        self.config, self.out, self.console = config, out, console
        self.outcome = Outcome(out=out)
        self.task_configs: dict[str, Any] = {}
        self.progress: Progress | None = None
        self.overall: TaskID | None = None
        self.current: TaskID | None = None

    # ---- plumbing ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times one stage, shows it on the current bar, keeps its stderr in logs/<stage>.log."""
        assert self.progress is not None and self.current is not None and self.overall is not None
        self.progress.reset(self.current, description=name, total=None, completed=0)
        log = self.out / "logs" / f"{_slug(name)}.log"
        started = time.perf_counter()
        logger.info("stage %s", name)
        try:
            with open(log, "w", encoding="utf-8") as sink, contextlib.redirect_stderr(sink):
                yield
        except _known_errors() as exc:
            raise QuickstartError(f"{name} failed: {exc}\n(logs: {log}, {self.out / 'logs' / 'quickstart.log'})") from exc
        finally:
            self.outcome.timings[name] = round(time.perf_counter() - started, 2)
        if self.progress.tasks[self.current].total is None:
            self.progress.update(self.current, total=1, completed=1)
        self.progress.advance(self.overall)

    def _stages(self) -> list[tuple[str, Callable[[str], None]]]:
        stages: list[tuple[str, Callable[[str], None]]] = [("prepare data", self.prepare)]
        stages += [(f"train {t}", self.train) for t in TASKS]
        stages += [(f"export {t}", self.export) for t in TASKS]
        stages += [(f"benchmark {t}", self.benchmark) for t in TASKS]
        if self.config.benchmark.gate_repeat:
            stages.append(("benchmark gate", self.benchmark_gate))
        stages += [("validate examples", self.validate), ("report", self.report)]
        return stages

    def run(self) -> Outcome:
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        file_log = logging.FileHandler(self.out / "logs" / "quickstart.log", encoding="utf-8")
        file_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        # The package's INFO goes to the log file only; its warnings still reach the console handlers.
        package = logging.getLogger("autovalidators")
        level, propagate = package.level, package.propagate
        forward = _ForwardWarnings()
        package.addHandler(file_log)
        package.addHandler(forward)
        package.setLevel(logging.INFO)
        package.propagate = False
        # transformers reports every freshly initialised head on the console; that is expected here.
        from transformers.utils import logging as hf_logging

        hf_level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        started = time.perf_counter()
        stages = self._stages()
        try:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=self.console, redirect_stderr=False,
                          redirect_stdout=False) as progress:
                self.progress = progress
                self.overall = progress.add_task("quickstart --train", total=len(stages))
                self.current = progress.add_task("", total=None)
                for name, step in stages:
                    with self.stage(name):
                        step(name)
        finally:
            self.outcome.timings["total"] = round(time.perf_counter() - started, 2)
            (self.out / "timings.json").write_text(json.dumps(self.outcome.timings, indent=2) + "\n")
            for handler in (file_log, forward):
                package.removeHandler(handler)
            package.setLevel(level)
            package.propagate = propagate
            hf_logging.set_verbosity(hf_level)
            file_log.close()
        (self.out / "summary.json").write_text(json.dumps(self.outcome.summary, indent=2, ensure_ascii=False) + "\n")
        return self.outcome

    # ---- stages --------------------------------------------------------------------------------
    def prepare(self, name: str) -> None:
        from autovalidators.training.tasks import get_task

        from autovalidators.training.quickstart.data import task_configs

        self.progress.update(self.current, total=len(TASKS) + 1)
        (self.out / "quickstart_config.yaml").write_text(
            yaml.safe_dump(self.config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        self.task_configs = task_configs(self.config, self.out)
        self.progress.advance(self.current)
        for task, task_config in self.task_configs.items():
            path = self.out / "configs" / f"{task}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(task_config.model_dump(mode="json"), sort_keys=False, allow_unicode=True),
                            encoding="utf-8")
            card = get_task(task).prepare_fn(task_config.prepare)
            self.outcome.summary.setdefault("data", {})[task] = {
                split: stats["rows"] for split, stats in card["splits"].items()}
            self.progress.advance(self.current)

    def train(self, name: str) -> None:
        from autovalidators.training.tasks import get_task
        from autovalidators.training.trainer import train

        task = name.split()[-1]
        task_config = self.task_configs[task]
        self.progress.update(self.current, total=task_config.train.max_steps)

        def on_step(step: int, total: int) -> None:
            self.progress.update(self.current, completed=step, total=total)

        handler = _StepHandler(on_step)
        logging.getLogger(TRAINER_LOGGER).addHandler(handler)
        try:
            result = train(get_task(task), task_config.train,
                           config_source=str(self.out / "configs" / f"{task}.yaml"))
        finally:
            logging.getLogger(TRAINER_LOGGER).removeHandler(handler)
        self.outcome.summary.setdefault("training", {})[task] = {
            "steps": result["steps"], "best_step": result["best_step"], "dev_metrics": result["dev_metrics"]}

    def export(self, name: str) -> None:
        from autovalidators.training.export import export
        from autovalidators.training.tasks import get_task

        task = name.split()[-1]
        manifest = export(get_task(task), self.out / "runs" / task, self.out / "models" / task, self.task_configs[task])
        self.outcome.summary.setdefault("models", {})[task] = {
            "precision": manifest.metrics.get("precision"), "model_mb": manifest.metrics.get("model_mb"),
            "thresholds": manifest.thresholds, "sha256": manifest.model_sha256}

    def benchmark(self, name: str) -> None:
        from autovalidators.training.quickstart import bench

        task = name.split()[-1]
        settings = self.config.benchmark
        report = bench.run(task, self.task_configs[task], self.out / "models" / task, self.out / "runs" / task,
                           threads=settings.threads, runs=settings.latency_runs, fp32=settings.fp32)
        path = self.out / "benchmarks" / f"{task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        self.outcome.summary.setdefault("benchmarks", {})[task] = headline(task, report)

    def _gate(self):
        if self.outcome.gate is None:
            from autovalidators.inference.config import load_gate_config
            from autovalidators.inference.gate import Gate

            from autovalidators.inference.abstention import load_abstention

            # The three validators come from this run; the abstention model is not retrained here,
            # so the shipped one decides `abstains` (its sha256 is in each result's meta.models).
            gate = Gate(load_gate_config(None), models_dir=self.out / "models", abstention=load_abstention())
            fallback = [n for n, v in gate.validators.items() if v.info.kind == "heuristic"]
            if fallback:
                raise ValueError(f"{', '.join(fallback)}: no model loaded from {self.out / 'models'}")
            self.outcome.gate = gate
        return self.outcome.gate

    def _cases(self) -> Path:
        return Path(str(resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")))

    def benchmark_gate(self, name: str) -> None:
        from autovalidators.inference.case import Case, read_cases
        from autovalidators.inference.latency import measure_gate

        from autovalidators.training.quickstart.bench import COMMAND

        cases = [c for c in read_cases(self._cases()) if isinstance(c, Case)]
        report = measure_gate(self._gate(), cases, repeat=self.config.benchmark.gate_repeat)
        report.update(command=COMMAND, source=str(self._cases()))
        (self.out / "benchmarks" / "gate.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    def validate(self, name: str) -> None:
        from autovalidators.inference.case import read_cases
        from autovalidators.inference.run import run_validation

        gate = self._gate()
        records = list(read_cases(self._cases(), max_text_chars=gate.config.input.max_text_chars))
        self.progress.update(self.current, total=len(records))
        with open(self.out / "results.jsonl", "w", encoding="utf-8") as sink:
            self.outcome.results, self.outcome.errors = run_validation(gate, records, sink)
        self.progress.update(self.current, completed=len(records))
        counts: dict[str, int] = {}
        for result in self.outcome.results:
            counts[result.decision.value] = counts.get(result.decision.value, 0) + 1
        self.outcome.summary["decisions"] = counts

    def report(self, name: str) -> None:
        from autovalidators.inference.reporting.build import build_report, draw_figures, write_report
        from autovalidators.inference.reporting.schema import ReportConfig, SectionConfig

        from autovalidators.training.quickstart.bench import COMMAND

        benchmarks = self.out / "benchmarks"
        sections = {task: SectionConfig(file=f"{task}.json", command=COMMAND, needs_model=task) for task in TASKS}
        if (benchmarks / "gate.json").is_file():
            sections["gate"] = SectionConfig(file="gate.json", command=COMMAND)
        settings = ReportConfig(benchmarks_dir=str(benchmarks), models_dir=str(self.out / "models"), sections=sections)
        steps = 2 * len(sections) + 1
        self.progress.update(self.current, total=steps)

        def step(description: str) -> None:
            self.progress.update(self.current, description=f"report: {description}", advance=1)

        built = build_report(settings, benchmarks, self.out.name, COMMAND, None, step)
        figures = draw_figures(built, settings, step)
        step("write")
        paths = write_report(built, figures, self.out / "report")
        self.outcome.summary["report"] = str(paths["html"])


def headline(task: str, report: dict[str, Any]) -> dict[str, Any]:
    """A few numbers per benchmark for the closing table, copied from its JSON."""
    quality = report.get("quality", {})
    shipped = quality.get("int8") or next(iter(quality.values()), {})
    if task == "qa_relevance":
        test = shipped.get("test", {})
        return {"metric": "test F1", "value": test.get("f1"), "n": test.get("pairs")}
    if task == "tone":
        return {"metric": "test macro-F1", "value": shipped.get("test_all", {}).get("macro_f1"),
                "n": report.get("data", {}).get("test")}
    from autovalidators.training.benchmarks.fact_spans import summarise

    predictions = [p for group in shipped.values() for p in group.get("predictions", [])]
    overall = summarise(predictions)
    return {"metric": "test example F1", "value": overall["example"]["f1"], "n": overall["examples"]}
