"""The typed report: what `report.json` holds and what the Markdown/HTML renderers read.

Every number in a section is copied from one benchmark JSON; `source_key` says where in that file
(a dotted path) so a reader, or a test, can check it. Per-example predictions (`ScoredSet`) feed
the curves, the confusion matrices computed from predictions and the worst-error examples.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config import StrictModel

Status = Literal["benchmarked", "not benchmarked", "unreadable"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricRow(_Record):
    """P/R/F1 of one group: a task/split, a label, a language or a source."""

    scope: str  # "task", "label", "language", "source", ...
    group: str
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    support: int | None = None
    extra: dict[str, float | int | str | None] = Field(default_factory=dict)
    source_key: str = ""  # dotted path of these numbers in the benchmark JSON


class ScoredSet(_Record):
    """Per-example scores and 0/1 gold labels for one binary decision, plus its operating threshold."""

    name: str
    scores: list[float]
    labels: list[int]
    threshold: float | None = None
    # The benchmark's own 0/1 decision per example when it states one (fact spans: `hallucinated`
    # comes from spans, not from the score cut); confusion matrices and errors then use it.
    predicted: list[int] | None = None


class Confusion(_Record):
    name: str
    labels: tuple[str, str] = ("negative", "positive")
    matrix: list[list[int]]  # [[tn, fp], [fn, tp]]
    threshold: float | None = None
    origin: str = "benchmark"  # "benchmark" or "computed from the benchmark's predictions"


class LatencyRow(_Record):
    runtime: str  # torch_eager, onnx_fp32, onnx_int8; or "gate" for the whole gate
    setting: str  # e.g. "1x128", "32x128"
    p50_ms: float | None = None
    p95_ms: float | None = None
    source_key: str = ""


class Highlight(_Record):
    start: int
    end: int
    label: str  # HALLUCINATION, NOISE, FACT, or "changed"


class ErrorExample(_Record):
    id: str
    group: str
    error: str  # "false positive", "false negative", "missed span", ...
    score: float | None = None
    gold: str = ""
    question: str = ""
    text: str = ""  # the answer or text the validator judged
    context: str = ""
    language: str = ""
    highlights: list[Highlight] = Field(default_factory=list)  # offsets into `text`


class Provenance(_Record):
    command: str
    command_recorded: bool  # False: the benchmark JSON has no command; `command` is the default one
    benchmark_file: str = ""
    benchmark_sha256: str = ""
    model_sha256: str = ""
    model_version: str = ""
    data: dict[str, str] = Field(default_factory=dict)  # data file -> sha256, or "missing"


class ValidatorSection(_Record):
    name: str
    status: Status
    message: str = ""  # why not benchmarked, or what could not be read
    provenance: Provenance
    metrics: list[MetricRow] = Field(default_factory=list)
    scored: list[ScoredSet] = Field(default_factory=list)
    confusion: list[Confusion] = Field(default_factory=list)
    latency: list[LatencyRow] = Field(default_factory=list)
    errors: list[ErrorExample] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class Report(_Record):
    name: str
    created_utc: str
    command: str
    sections: list[ValidatorSection]
    meta: dict[str, Any] = Field(default_factory=dict)


class SectionConfig(StrictModel):
    # The benchmark JSON read for this section, relative to benchmarks_dir.
    file: str
    # The command that writes it; `{file}` becomes the JSON path. `report --run` runs it.
    command: str
    # A model folder under models_dir that must exist for `--run` to run the command (None: always).
    # Its `benchmark.json` (shipped with the model) is read when benchmarks_dir has no `file`.
    needs_model: str | None = None
    # Prepared data the command reads: when one of these paths is missing, `--run` skips the
    # command and says to run `prepare` first, instead of reporting a failure.
    needs_data: list[str] = Field(default_factory=list)
    prepare: str = ""


class ReportConfig(StrictModel):
    """configs/report.yaml: which benchmarks the report reads and how much of each it shows."""

    benchmarks_dir: str = "out/benchmarks"
    models_dir: str = "models"
    worst_errors: int = Field(8, ge=0)  # worst misclassified examples shown per validator
    calibration_bins: int = Field(10, ge=2, le=50)  # bins of the reliability plot
    context_chars: int = Field(700, ge=50)  # context shown with an error example, at most
    max_points: int = Field(5000, ge=10)  # per-example scores kept in report.json per set
    # Section name -> its benchmark; the section name picks the adapter (adapters.ADAPTERS).
    sections: dict[str, SectionConfig]
