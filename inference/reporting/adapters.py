"""Benchmark JSON -> `ValidatorSection`: one small adapter per validator over shared readers.

The readers look for shapes, not exact paths, so a benchmark can nest its numbers as it likes:

- Metrics: every object holding `precision`, `recall` and `f1` becomes one table row, named by its
  dotted path (`quality.int8.test` -> "int8 / test"); a path through `by_language`/`languages`
  (or ending in `en`/`ru`) is a per-language row, through `labels` or ending in a label name a
  per-label row, through `by_source` a per-source row. Support comes from `support`, `pairs`,
  `known`, `n` or `count`.
- Latency: under the top-level `latency`, `{runtime: {setting: {p50_ms, p95_ms}}}` (or without
  the setting level); runtime `int8`/`fp32`/`torch_eager` (or `onnx_int8`, `onnx_fp32`).
- Per-example predictions: see `predictions.py`.
- Provenance: top-level `command` (string or argv list), `model_sha256` (else the manifest in
  `model_dir`), `model_version`, `data` ({name: path}) and optionally `data_sha256` ({name: sha}).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Callable

from ..manifest import ManifestError, load_manifest, sha256_of
from .jsonpath import BREAKDOWNS, LANGUAGES, group_name, number, walk
from .predictions import confusions, scored_sets, texts_by_id
from .schema import LatencyRow, MetricRow, Provenance, ReportConfig, SectionConfig, ValidatorSection

RUNTIMES = {"int8": "onnx_int8", "onnx_int8": "onnx_int8", "fp32": "onnx_fp32", "onnx_fp32": "onnx_fp32",
            "torch_eager": "torch_eager", "torch": "torch_eager", "shipped": "onnx"}
# An object with one of these (and without precision/recall/F1) is a summary row.
SUMMARY_KEYS = {"macro_f1", "map", "mrr", "accuracy", "roc_auc", "macro_roc_auc"}
SUPPORT_KEYS = ("support", "pairs", "known", "n", "count", "examples")
TONE_LABELS = ("toxicity", "obscenity", "insult", "threat", "identity_hate", "politics")


def _scope(path: tuple[str, ...], labels: set[str]) -> str:
    for segment in reversed(path[:-1]):
        if segment in BREAKDOWNS:
            return BREAKDOWNS[segment]
    if path and path[-1] in labels:
        return "label"
    if path and path[-1] in LANGUAGES:
        return "language"
    return "task"


def metric_rows(data: dict[str, Any], labels: set[str]) -> list[MetricRow]:
    rows = []
    for path, value in walk(data):
        if not isinstance(value, dict):
            continue
        if not {"precision", "recall", "f1"} <= value.keys() and SUMMARY_KEYS & value.keys():
            # A summary (macro-F1, MAP/MRR, accuracy, ROC-AUC): shown with its numbers, P/R/F1 empty.
            summary = {k: v if isinstance(v, int) else number(v) for k, v in value.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            rows.append(MetricRow(scope="summary", group=group_name(path), extra=summary, source_key=".".join(path)))
            continue
        if not {"precision", "recall", "f1"} <= value.keys():
            continue
        support_key = next((k for k in SUPPORT_KEYS if number(value.get(k)) is not None), None)
        # Ints stay ints (counts), floats are copied as they are; NaN becomes None.
        extra = {k: v if isinstance(v, (int, str)) else number(v) for k, v in value.items()
                 if k not in ("precision", "recall", "f1", support_key)
                 and (isinstance(v, (int, float, str)) or v is None) and not isinstance(v, bool)}
        rows.append(MetricRow(scope=_scope(path, labels), group=group_name(path), precision=number(value["precision"]),
                              recall=number(value["recall"]), f1=number(value["f1"]),
                              support=int(value[support_key]) if support_key else None, extra=extra,
                              source_key=".".join(path)))
    return rows


def _setting(name: str) -> str:
    # "single_128" -> "1x128", "batch_32x128" -> "32x128", "batch_32_short" -> "32x short",
    # "512" -> "512 tokens": batch x input, the form the latency tables use.
    if name.isdigit():
        return f"{name} tokens"
    if name.startswith("single_"):
        rest = name[len("single_"):]
        return f"1x{rest}" if rest.isdigit() else f"1x {rest}"
    match = re.fullmatch(r"batch_(\d+)[x_](.+)", name)
    if match:
        batch, what = match.groups()
        return f"{batch}x{what}" if what.isdigit() else f"{batch}x {what}"
    return name


def latency_rows(data: dict[str, Any]) -> list[LatencyRow]:
    rows = []
    for path, value in walk(data.get("latency") or {}, ("latency",)):
        if isinstance(value, dict) and "p50_ms" in value and len(path) >= 2:
            runtime = RUNTIMES.get(path[1], path[1])
            rows.append(LatencyRow(runtime=runtime, setting=" / ".join(_setting(p) for p in path[2:]) or "call",
                                   p50_ms=number(value.get("p50_ms")), p95_ms=number(value.get("p95_ms")),
                                   source_key=".".join(path)))
    return rows


def data_files(data: dict[str, Any]) -> dict[str, str]:
    """{name: path} of the data a benchmark JSON names: a dict of paths, or one file or folder."""
    named = data.get("data")
    if isinstance(named, dict):
        return {str(k): v for k, v in named.items() if isinstance(v, str)}
    if isinstance(named, str) and Path(named).is_dir():
        return {p.stem: str(p) for p in sorted(Path(named).glob("*.jsonl"))} or {"data": named}
    return {"data": named} if isinstance(named, str) else {}


def _data_hashes(data: dict[str, Any], files: dict[str, str], notes: list[str]) -> dict[str, str]:
    recorded = data.get("data_sha256") if isinstance(data.get("data_sha256"), dict) else {}
    hashes = {str(k): str(v) for k, v in recorded.items()}
    hashed_now = []
    for name, path in files.items():
        if not isinstance(path, str) or str(name) in hashes:
            continue
        key = f"{name}: {path}"
        if Path(path).is_file():
            hashes[key] = sha256_of(Path(path))
            hashed_now.append(str(name))
        else:
            hashes[key] = "missing"
    if hashed_now:
        notes.append(f"data sha256 of {', '.join(hashed_now)} computed when the report was built "
                     "(the benchmark JSON records paths, not hashes)")
    return hashes


def provenance(data: dict[str, Any], file: Path, config: SectionConfig, notes: list[str],
               files: dict[str, str] | None = None) -> Provenance:
    command = data.get("command")
    if isinstance(command, list):
        command = shlex.join(str(c) for c in command)
    model_sha = str(data.get("model_sha256") or "")
    version = str(data.get("model_version") or "")
    if not model_sha and data.get("model_dir"):
        try:
            manifest = load_manifest(data["model_dir"], verify=False)
            model_sha, version = manifest.model_sha256, version or manifest.version
        except ManifestError:
            notes.append(f"model sha256 unknown: {data['model_dir']} has no readable manifest")
    if not command:
        notes.append("the benchmark JSON does not record its command; the default command is shown")
    return Provenance(command=str(command or config.command.format(file=file)), command_recorded=bool(command),
                      benchmark_file=str(file), benchmark_sha256=sha256_of(file) if file.is_file() else "",
                      model_sha256=model_sha, model_version=version,
                      data=_data_hashes(data, data_files(data) if files is None else files, notes))


# ------------------------------------------------------------------------------------------ adapters


def tone_files(data: dict[str, Any]) -> dict[str, str]:
    """The tone benchmark names its sets ({set: rows}) and `data_dir`; the file names are
    `training/benchmarks/tone.py` `load_sets`'s."""
    names = {"test": "test.jsonl", "olid": "benchmark_olid.jsonl", "ru_toxic_val": "benchmark_ru_toxic_val.jsonl"}
    folder = data.get("data_dir")
    sets = data.get("data") if isinstance(data.get("data"), dict) else {}
    if not isinstance(folder, str):
        return data_files(data)
    return {name: str(Path(folder) / names[name]) for name in sets if name in names}


def busy_machine(data: dict[str, Any]) -> list[str]:
    """A note when the benchmark ran with more runnable work than cores: its latency is inflated."""
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    load, cores = number(machine.get("load_average_1m")), number(machine.get("cpu_count"))
    if load is None or not cores or load <= cores:
        return []
    return [f"latency measured on a busy machine (load average {load:.1f} on {cores:.0f} cores): "
            "expect it lower on an idle one"]


# Sections whose benchmark JSON names its data in its own way; the rest use `data_files`.
DATA_FILES: dict[str, Callable[[dict[str, Any]], dict[str, str]]] = {"tone": tone_files}


def data_files_for(section: str, data: dict[str, Any]) -> dict[str, str]:
    """{name: path} of the data behind a section's benchmark JSON (hashed for provenance)."""
    return DATA_FILES.get(section, data_files)(data)


def model_section(name: str, labels: tuple[str, ...] = (), files: Callable[[dict], dict[str, str]] = data_files,
                  lookup_texts: bool = False) -> Callable[..., ValidatorSection]:
    """The adapter of a model validator: metrics, latency, predictions, provenance.

    `files` names the benchmark's data files (hashed for provenance); `lookup_texts` reads them to
    show error examples whose predictions hold only ids.
    """

    def adapt(data: dict[str, Any], file: Path, section: SectionConfig, config: ReportConfig) -> ValidatorSection:
        notes: list[str] = []
        named = files(data)
        sets, errors, set_notes = scored_sets(data, config, texts_by_id(named) if lookup_texts else None)
        if not sets:
            notes.append("the benchmark JSON has no per-example `predictions`: no curves, calibration or examples")
        for key, value in data.items():  # headline facts a benchmark states at the top level
            if key.startswith("speedup") and number(value) is not None:
                notes.append(f"{key}: {value:.2f}x")
            elif key == "excluded" and isinstance(value, dict):
                notes += [f"excluded from {group}: {why}" for group, why in value.items()]
        notes += busy_machine(data)
        return ValidatorSection(name=name, status="benchmarked",
                                provenance=provenance(data, file, section, notes, named),
                                metrics=metric_rows(data, set(labels)), scored=sets, confusion=confusions(data, sets),
                                latency=latency_rows(data), errors=errors, notes=notes + set_notes)

    return adapt


def adapt_gate(data: dict[str, Any], file: Path, section: SectionConfig, config: ReportConfig) -> ValidatorSection:
    """`benchmark gate`: whole-gate latency, one case per call; on labelled cases friction (good
    answers not ACCEPTed) and misses (bad answers ACCEPTed) per language, task and set."""
    notes: list[str] = []
    groups = (data.get("quality") or {}).get("groups") or {}
    metrics = [MetricRow(scope=scope, group=str(row.get("group")), support=int(row.get("good", 0)) + int(row.get("bad", 0)),
                         extra={"good": row.get("good"), "bad": row.get("bad"), "friction": number(row.get("friction")),
                                "miss": number(row.get("miss"))}, source_key=f"quality.groups.{scope}")
               for scope in ("all", "language", "task", "set") for row in groups.get(scope) or []]
    for language, counts in ((data.get("quality") or {}).get("good_stopped_by") or {}).items():
        notes.append(f"good answers stopped ({language}): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for row in data.get("tone") or []:
        if row.get("dataset") == "all neutral":
            notes.append(f"tone check flags {100 * row['flag_rate']:.1f}% of {row['texts']} neutral {row['language']} texts")
    single = data.get("single_case") or {}
    kinds = ", ".join(f"{n}={v.get('kind')}" for n, v in (data.get("validators") or {}).items())
    rows = [LatencyRow(runtime="gate", setting=f"one case ({kinds})", p50_ms=number(single.get("p50_ms")),
                       p95_ms=number(single.get("p95_ms")), source_key="single_case")] if single else []
    if number(data.get("batch_cases_per_s")) is not None:
        notes.append(f"batch throughput: {data['batch_cases_per_s']:.0f} cases/s (batch_cases_per_s)")
    source = provenance(data, file, section, notes)
    if not source.model_sha256:  # the gate runs several models: name each one's sha256 (or its kind)
        models = "; ".join(f"{n}={v.get('sha256') or v.get('kind')}" for n, v in (data.get("validators") or {}).items())
        source = source.model_copy(update={"model_sha256": models})
    return ValidatorSection(name="gate", status="benchmarked", provenance=source, metrics=metrics, latency=rows,
                            notes=notes)


def adapt_obedience(data: dict[str, Any], file: Path, section: SectionConfig, config: ReportConfig) -> ValidatorSection:
    """`benchmark obedience`: how often each validator sides with the (counterfactual) context."""
    from .obedience import obedience_section

    notes: list[str] = []
    return obedience_section(data, provenance(data, file, section, notes), config, notes)


ADAPTERS: dict[str, Callable[[dict[str, Any], Path, SectionConfig, ReportConfig], ValidatorSection]] = {
    "qa_relevance": model_section("qa_relevance"),
    "tone": model_section("tone", TONE_LABELS, files=DATA_FILES["tone"]),
    "fact_spans": model_section("fact_spans", ("HALLUCINATION", "NOISE", "FACT"), lookup_texts=True),
    "obedience": adapt_obedience,
    "gate": adapt_gate,
}
