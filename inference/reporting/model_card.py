"""Model cards (`models/<name>/README.md`, Hugging Face shape) rendered from the model's own files.

Every number in a card comes from `manifest.json` (what export and `benchmark --update-manifest`
recorded) or `benchmark.json` (the shipped benchmark run). Prose the JSON cannot hold (intended
use, misuse, limitations, data licences, variants tried) lives in an optional hand-written
`card.yaml` beside them, which holds no numbers: where its text needs one it names the manifest
value, `{{training.config.max_steps}}` (or `{{benchmark:command}}` for benchmark.json), and the
renderer fills it in. `card.yaml` also picks which metric subtrees become tables (`tables`,
drawn by `card_tables.py`) and which values are the headline ones (`headline`, also written as
`model-index` metadata). Without a `card.yaml` the card holds what the JSON says, and no prose.

Rendering is deterministic: sorted keys, fixed float formats, no dates or machine state, so
`autovalidators card --check` can tell a stale card from a fresh one byte for byte.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterable, Literal, Optional, Sequence

import yaml
from pydantic import BaseModel, ConfigDict

from ..config import load_config
from ..manifest import BENCHMARK_NAME, CARD_FILES, MANIFEST_NAME, load_manifest
from .card_tables import bullets, cell, collect_rows, fmt, is_empty, is_number, markdown_table, plain, render_rows

logger = logging.getLogger(__name__)

CARD_NAME, CARD_TEXT_NAME = CARD_FILES  # the generated card and the prose it is generated with
Source = Literal["manifest", "benchmark"]
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


class CardError(ValueError):
    """A model folder whose card cannot be rendered; the message names the file and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Headline(_Strict):
    """One headline value: a dotted path to a number in the manifest (or benchmark.json)."""

    name: str  # e.g. "macro-F1"
    metric: str  # model-index metric type, e.g. "f1", "roc_auc", "map"
    dataset: str  # e.g. "OLID level-A"
    dataset_type: Optional[str] = None  # model-index dataset type; default: the name, slugged
    split: str = "test"
    path: str
    source: Source = "manifest"


class TableSpec(_Strict):
    """A metric subtree shown as one table: each object with numbers in it becomes a row."""

    title: str
    path: str  # dotted path from the top of the JSON ("metrics.benchmark.quality.test")
    source: Source = "manifest"
    section: Literal["held_out", "comparison", "dev"] = "held_out"
    keys: Optional[list[str]] = None  # only these children of `path` (default: all)
    note: str = ""


class DataSource(_Strict):
    name: str
    licence: str
    use: str = ""


class CardText(_Strict):
    """`card.yaml`: the prose of a card. No numbers here: name manifest values with `{{path}}`."""

    title: str = ""
    summary: str = ""
    language: list[str] = []
    license: str = "other"
    license_name: Optional[str] = None
    license_note: str = ""
    pipeline_tag: Optional[str] = None
    base_model: Optional[str] = None
    tags: list[str] = []
    intended_use: list[str] = []
    out_of_scope: list[str] = []
    languages_note: str = ""
    training_data: list[DataSource] = []
    training_note: str = ""
    recipe: list[str] = []
    recipe_note: str = ""
    headline: list[Headline] = []
    tables: list[TableSpec] = []
    limitations: list[str] = []
    variants: list[str] = []


# --- reading ---------------------------------------------------------------------------------------


def _read_benchmark(folder: Path) -> Optional[dict[str, Any]]:
    path = folder / BENCHMARK_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CardError(f"{path}: not valid JSON ({exc}); re-run the benchmark with --update-manifest") from None
    if not isinstance(data, dict):
        raise CardError(f"{path}: expected a JSON object at the top level")
    return data


def _read_card_text(folder: Path) -> CardText:
    path = folder / CARD_TEXT_NAME
    if not path.is_file():
        logger.info("%s: no card.yaml; the card holds only what the JSON says", folder)
        return CardText()
    return load_config(path, CardText)  # ConfigError (a ValueError) names the file and every bad key


def lookup(doc: Any, path: str, where: str) -> Any:
    """The value at a dotted `path` in `doc`; CardError naming `where` and the missing key."""
    value = doc
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise CardError(f"{where}: no value at '{path}' (missing key '{part}'); fix the path in {CARD_TEXT_NAME}")
        value = value[part]
    return value


class _Docs:
    """The manifest and benchmark JSON of one folder, with placeholder filling."""

    def __init__(self, folder: Path) -> None:
        manifest = load_manifest(folder, verify=False)  # ManifestError names the file
        self.folder = folder
        self.manifest = manifest.model_dump()
        self.model_sha256 = manifest.model_sha256
        self.benchmark = _read_benchmark(folder)

    def get(self, path: str, source: Source = "manifest") -> Any:
        if source == "benchmark":
            if self.benchmark is None:
                raise CardError(f"{self.folder / CARD_TEXT_NAME}: '{path}' reads {BENCHMARK_NAME}, which is missing")
            return lookup(self.benchmark, path, str(self.folder / BENCHMARK_NAME))
        return lookup(self.manifest, path, str(self.folder / MANIFEST_NAME))

    def fill(self, text: str) -> str:
        def value(match: re.Match) -> str:
            ref = match.group(1)
            source, _, path = ref.partition(":") if ref.startswith("benchmark:") else ("manifest", "", ref)
            found = self.get(path, source)  # type: ignore[arg-type]
            if isinstance(found, (dict, list)):
                raise CardError(f"{self.folder / CARD_TEXT_NAME}: '{{{{{ref}}}}}' is not a single value")
            return plain(found)

        return PLACEHOLDER.sub(value, text)


def _table_section(docs: _Docs, spec: TableSpec, labels: Sequence[str]) -> list[str]:
    node = docs.get(spec.path, spec.source)
    if not isinstance(node, dict):
        raise CardError(f"{docs.folder / CARD_TEXT_NAME}: table '{spec.title}' path '{spec.path}' is not an object")
    if spec.keys is not None:
        missing = [k for k in spec.keys if k not in node]
        if missing:
            raise CardError(f"{docs.folder / CARD_TEXT_NAME}: table '{spec.title}': no {missing} under '{spec.path}'")
        node = {k: node[k] for k in spec.keys}
    rows, notes = collect_rows(node, labels)
    kept = [(name, row) for name, row in rows if not is_empty(row)]
    origin = BENCHMARK_NAME if spec.source == "benchmark" else MANIFEST_NAME
    lines = [f"#### {spec.title}", "", f"`{origin}`: `{spec.path}`" + (f" ({', '.join(spec.keys)})" if spec.keys else "")]
    if spec.note:
        lines += ["", docs.fill(spec.note).strip()]
    if kept:
        lines += [""] + render_rows(kept)
    if len(kept) < len(rows):
        lines += ["", f"{len(rows) - len(kept)} row(s) with no score (no examples of that kind in the set) left out."]
    if notes:
        lines += [""] + bullets(notes)
    return lines + [""]


# --- sections ------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _headline_values(docs: _Docs, text: CardText) -> list[tuple[Headline, Any]]:
    values = []
    for item in text.headline:
        value = docs.get(item.path, item.source)
        if not is_number(value):
            raise CardError(f"{docs.folder / CARD_TEXT_NAME}: headline '{item.path}' is not a number")
        values.append((item, value))
    return values


def front_matter(docs: _Docs, text: CardText, headlines: list[tuple[Headline, Any]]) -> str:
    """The YAML metadata block of a Hugging Face card, keys sorted."""
    name = docs.manifest["name"]
    meta: dict[str, Any] = {"library_name": "onnxruntime", "license": text.license,
                            "tags": sorted({"autovalidators", "onnx", *text.tags})}
    if text.language:
        meta["language"] = list(text.language)
    for key in ("license_name", "pipeline_tag", "base_model"):
        if getattr(text, key):
            meta[key] = getattr(text, key)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for item, value in headlines:
        if isinstance(value, float) and math.isnan(value):
            continue
        dataset = {"name": item.dataset, "type": item.dataset_type or _slug(item.dataset), "split": item.split}
        entry = results.setdefault((item.dataset, item.split), {
            "task": {"type": text.pipeline_tag or "text-classification", "name": text.title or docs.manifest["task"]},
            "dataset": dataset, "metrics": []})
        entry["metrics"].append({"type": item.metric, "name": item.name, "value": round(float(value), 4)})
    if results:
        meta["model-index"] = [{"name": f"autovalidators-{name}", "results": list(results.values())}]
    return yaml.safe_dump(meta, sort_keys=True, allow_unicode=True, default_flow_style=False, width=1000)


def _overview(docs: _Docs, text: CardText, headlines: list[tuple[Headline, Any]]) -> list[str]:
    m = docs.manifest
    rows = [("name", f"`{m['name']}`"), ("task", f"`{m['task']}`"), ("version", f"`{m['version']}`"),
            ("base model", f"`{m['base_model']}`" + (f" ({text.base_model})" if text.base_model else "")),
            ("labels", ", ".join(f"`{label}`" for label in m["labels"])),
            ("languages", ", ".join(text.language) or "not stated"),
            ("runtime", "onnxruntime on CPU (no torch)"),
            ("model file", f"`{m['model_file']}`, sha256 `{docs.model_sha256}`")]
    lines = markdown_table(["", ""], [(k, v) for k, v in rows])
    if headlines:
        lines += ["", "Headline numbers (held out unless the split says otherwise):", ""]
        lines += markdown_table(["dataset", "split", "metric", "value"],
                                 [(cell(h.dataset), h.split, cell(h.name), fmt(h.metric, v)) for h, v in headlines])
    return lines


def _predicts(docs: _Docs) -> list[str]:
    m = docs.manifest
    window = m["window"]
    lines = ["## What it predicts", ""]
    by_language = m.get("thresholds_by_language") or {}
    if m["thresholds"] and by_language:
        languages = sorted(by_language)
        lines += markdown_table(["output", "threshold", *(f"threshold ({language})" for language in languages)],
                                [(f"`{k}`", fmt("threshold", v),
                                  *(fmt("threshold", by_language[language].get(k, v)) for language in languages))
                                 for k, v in sorted(m["thresholds"].items())])
        lines += ["", f"Texts in {', '.join(languages)} (`text.language_of`) are cut at their own column "
                  "(manifest `thresholds_by_language`); every other text at `threshold`.", ""]
    elif m["thresholds"]:
        lines += markdown_table(["output", "threshold"], [(f"`{k}`", fmt("threshold", v))
                                                           for k, v in sorted(m["thresholds"].items())]) + [""]
    lines.append(f"Input window (manifest `window`): `max_length` {window['max_length']}, `stride` {window['stride']}, "
                 f"`aggregation` `{window['aggregation']}`.")
    task = m["training"].get("task") or (m["training"].get("cross_encoder") or {}).get("task")
    if isinstance(task, dict):
        lines += [""] + bullets(f"{key}: {cell(plain(value))}" for key, value in sorted(task.items()))
    for key, what in (("fallback_languages", "Languages handed to the lexical heuristic instead of the model"),
                      ("lexicon_labels", "Labels the lexicon raises on top of the model")):
        if m.get(key):
            lines += ["", f"{what} (manifest `{key}`): {', '.join(m[key])}."]
    if m.get("lexicon_required"):
        rules = "; ".join(f"`{label}` in {', '.join(languages)}" for label, languages in sorted(m["lexicon_required"].items()))
        lines += ["", f"Labels that stand only on a lexicon match (manifest `lexicon_required`): {rules}."]
    return lines + [""]


def _training_data(docs: _Docs, text: CardText) -> list[str]:
    lines = ["## Training data and licences", ""]
    if text.training_data:
        lines += markdown_table(["source", "licence", "used for"],
                                 [(cell(docs.fill(d.name)), cell(docs.fill(d.licence)), cell(docs.fill(d.use)))
                                  for d in text.training_data]) + [""]
    if text.training_note:
        lines += [docs.fill(text.training_note).strip(), ""]
    files, facts = [], []

    def visit(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, value in sorted(node.items()):
            where = f"{path}.{key}"
            if key == "data" and isinstance(value, str):
                facts.append(f"`{where}`: {cell(value)}")
            elif key == "data" and isinstance(value, dict):
                for name, item in sorted(value.items()):
                    if isinstance(item, dict) and "file" in item:
                        files.append((f"`{where}.{name}`", f"`{item['file']}`", plain(item.get("examples")),
                                      f"`{item.get('sha256', '')}`"))
                    elif not isinstance(item, dict):
                        facts.append(f"`{where}.{name}`: {cell(plain(item))}")
            else:
                visit(value, where)

    visit(docs.manifest["training"], "training")
    if files:
        lines += ["Recorded training files (manifest):", ""]
        lines += markdown_table(["role", "file", "examples", "sha256"], files) + [""]
    if facts:
        lines += bullets(facts) + [""]
    source = docs.manifest["training"].get("base_model_source")
    if isinstance(source, dict) and source.get("model"):
        lines.append(f"Base weights: {cell(str(source['model']))}.")
        packages = (source.get("vocabulary") or {}).get("word_lists") or {}
        if packages.get("package"):
            lines.append(f"Vocabulary word lists: {cell(str(packages['package']))}.")
        lines.append("")
    if text.license_note:
        lines += [f"Licence of the weights: {docs.fill(text.license_note).strip()}", ""]
    return lines


def _flatten(node: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict) and node:
        out = []
        for key, value in sorted(node.items()):
            out += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    return [(prefix, plain(node))]


def _recipe(docs: _Docs, text: CardText) -> list[str]:
    m = docs.manifest
    training = m["training"]
    commands = [docs.fill(c).strip() for c in text.recipe]
    if not commands and training.get("config_source"):  # no card.yaml recipe: the four stages on the recorded config
        cli_task, config = m["name"].replace("_", "-"), training["config_source"]
        commands = [f"autovalidators {verb} {cli_task} --config {config}" for verb in ("prepare", "train", "export")]
        bench = (m["metrics"].get("benchmark") or {}).get("command") or (docs.benchmark or {}).get("command")
        if isinstance(bench, str):
            commands.append(bench + " --update-manifest")
    lines = ["## Training recipe", ""]
    if text.recipe_note:
        lines += [docs.fill(text.recipe_note).strip(), ""]
    if commands:
        lines += ["```bash"] + commands + ["```", ""]
    recorded = [(k, training[k]) for k in ("config_source", "combiner_config_source", "run_dir", "best_step")
                if training.get(k) is not None]
    if recorded:
        lines += bullets(f"`training.{k}`: `{plain(v)}`" for k, v in recorded) + [""]
    flat = _flatten(training)
    lines += ["<details><summary>Everything the manifest records about training</summary>", ""]
    lines += markdown_table(["key", "value"], [(f"`{k}`", cell(v)) for k, v in flat])
    return lines + ["", "</details>", ""]


def _metrics(docs: _Docs, text: CardText) -> list[str]:
    m = docs.manifest
    labels = m["labels"]
    specs = text.tables or [TableSpec(title=key, path=f"metrics.{key}", section="dev" if "dev" in key else "held_out")
                            for key, value in m["metrics"].items() if isinstance(value, dict) and key != "benchmark"]
    lines = ["## Metrics", ""]
    bench = docs.benchmark or {}
    command = (m["metrics"].get("benchmark") or {}).get("command") or bench.get("command")
    if command:
        lines += ["Held-out numbers come from one benchmark run; to reproduce them:", "", "```bash",
                  command if isinstance(command, str) else " ".join(map(str, command)), "```", ""]
    if bench.get("model_sha256") and bench["model_sha256"] != docs.model_sha256:
        lines += [f"**Warning:** `{BENCHMARK_NAME}` was measured on model sha256 `{bench['model_sha256']}`, "
                  f"not this `{m['model_file']}`; re-run the benchmark.", ""]
    data, hashes = bench.get("data"), bench.get("data_sha256") or {}
    if isinstance(data, dict) and data:
        lines += ["Held-out data of that run (`benchmark.json` `data`, `data_sha256`):", ""]
        lines += markdown_table(["set", "file or rows", "sha256"],
                                 [(f"`{k}`", f"`{plain(v)}`", f"`{hashes.get(k, '')}`") for k, v in sorted(data.items())])
        lines.append("")
    elif isinstance(data, str):
        lines += [f"Held-out data of that run: `{data}` (`benchmark.json` `data`).", ""]
    titles = {"held_out": "Held-out sets", "comparison": "Against baselines and earlier models",
              "dev": "Development split (thresholds and checkpoints are chosen here; not held out)"}
    for section, title in titles.items():
        chosen = [s for s in specs if s.section == section]
        if chosen:
            lines += [f"### {title}", ""]
            for spec in chosen:
                lines += _table_section(docs, spec, labels)
    return lines


def _find(node: Any, key: str, path: str = "metrics") -> Iterable[tuple[str, Any]]:
    """(dotted path, value) of every number stored under `key` in a subtree, sorted."""
    if isinstance(node, dict):
        for name, value in sorted(node.items()):
            if name == key and is_number(value):
                yield f"{path}.{name}", value
            else:
                yield from _find(value, key, f"{path}.{name}")


def _latency_rows(docs: _Docs) -> tuple[list[tuple[str, dict]], str, dict[str, Any]]:
    bench, recorded = docs.benchmark or {}, docs.manifest["metrics"].get("benchmark") or {}
    if isinstance(bench.get("latency"), dict):
        rows, _ = collect_rows(bench["latency"])
        return rows, "`benchmark.json` `latency`", bench
    if isinstance(recorded.get("latency"), dict):
        rows, _ = collect_rows(recorded["latency"])
        return rows, "manifest `metrics.benchmark.latency`", recorded
    flat = {k: v for k, v in recorded.items() if k.endswith("_ms") and is_number(v)}
    return ([("per answer", flat)] if flat else []), "manifest `metrics.benchmark`", recorded


def _latency_and_size(docs: _Docs) -> list[str]:
    lines = ["## Latency and size", ""]
    rows, origin, run = _latency_rows(docs)
    if rows:
        lines += [f"Latency ({origin}):", ""] + render_rows(rows, first="setting") + [""]
        machine = run.get("machine") or {}
        facts = [f"{run['threads']} thread(s)" if run.get("threads") is not None else "",
                 f"{machine['cpu_count']} CPU(s)" if machine.get("cpu_count") is not None else "",
                 f"load average {machine['load_average_1m']:.2f} over the minute before"
                 if machine.get("load_average_1m") is not None else "",
                 f"`{machine['platform']}`" if machine.get("platform") else ""]
        if any(facts):
            lines += ["Measured with " + ", ".join(f for f in facts if f) + ".", ""]
    sizes = [(f"manifest `{path}`", fmt("model_mb", value)) for path, value in _find(docs.manifest["metrics"], "model_mb")]
    if docs.benchmark and is_number(docs.benchmark.get("model_mb")):
        sizes.append(("`benchmark.json` `model_mb`", fmt("model_mb", docs.benchmark["model_mb"])))
    if sizes:
        lines += markdown_table(["size recorded in", "MB"], sizes) + [""]
    precision = docs.manifest["metrics"].get("precision")
    if precision:
        lines += [f"Shipped precision: `{precision}` (manifest `metrics.precision`).", ""]
    lines += ["Files (sha256 from the manifest; checked on every load):", ""]
    lines += markdown_table(["file", "sha256"], [(f"`{k}`", f"`{v}`") for k, v in sorted(docs.manifest["files"].items())])
    return lines + [""]


def render_card(folder: Path) -> str:
    """Renders the Hugging Face model card (`README.md`) of one model folder.

    Args:
        folder: `models/<name>/` with `manifest.json`, optionally `benchmark.json` and `card.yaml`.

    Returns:
        The card's text: YAML front matter, then markdown. The same files give the same bytes.

    Raises:
        ValueError: a missing or invalid manifest (`ManifestError`), benchmark or card.yaml
            (`CardError`, `ConfigError`), with the file named in the message.
    """
    folder = Path(folder)
    docs = _Docs(folder)
    text = _read_card_text(folder)
    headlines = _headline_values(docs, text)
    name = docs.manifest["name"]
    lines = ["---", front_matter(docs, text, headlines).rstrip("\n"), "---", "",
             f"# {name}: {docs.fill(text.title)}" if text.title else f"# {name}", "",
             f"<!-- Generated by `autovalidators card {name}` from manifest.json, benchmark.json and card.yaml. "
             "Edit those and regenerate; do not edit this file. -->", ""]
    if text.summary:
        lines += [docs.fill(text.summary).strip(), ""]
    lines += _overview(docs, text, headlines) + [""]
    lines += ["## Intended use", ""] + (bullets(docs.fill(t) for t in text.intended_use) or ["Not stated."]) + [""]
    lines += ["## Out of scope and misuse", ""] + (bullets(docs.fill(t) for t in text.out_of_scope) or ["Not stated."])
    lines += ["", "## Languages", "", ", ".join(text.language) or "Not stated."]
    if text.languages_note:
        lines += ["", docs.fill(text.languages_note).strip()]
    lines += [""] + _predicts(docs) + _training_data(docs, text) + _recipe(docs, text)
    lines += _metrics(docs, text) + _latency_and_size(docs)
    lines += ["## Limitations and known failure cases", ""]
    lines += (bullets(docs.fill(t) for t in text.limitations) or ["Not stated."]) + [""]
    lines += ["## Variants tried", ""] + (bullets(docs.fill(t) for t in text.variants) or ["Not recorded."])
    return "\n".join(lines).rstrip("\n") + "\n"


# --- the command's work --------------------------------------------------------------------------------


def model_folders(models_dir: Path, names: Optional[Sequence[str]] = None) -> list[Path]:
    """The model folders to card.

    Args:
        models_dir: the folder holding `<name>/manifest.json` folders.
        names: folder names (a hyphen reads as an underscore); default every folder with a manifest.

    Raises:
        CardError: the models folder, or a named model's manifest, is missing.
    """
    models_dir = Path(models_dir)
    if not models_dir.is_dir():
        raise CardError(f"{models_dir}: no such models folder; pass --models-dir")
    if names:
        folders = [models_dir / name.replace("-", "_") for name in names]
        missing = [str(f / MANIFEST_NAME) for f in folders if not (f / MANIFEST_NAME).is_file()]
        if missing:
            raise CardError(f"{', '.join(missing)}: missing; export the model first or check the name")
        return folders
    folders = sorted(p for p in models_dir.iterdir() if (p / MANIFEST_NAME).is_file())
    if not folders:
        raise CardError(f"{models_dir}: no folder with a {MANIFEST_NAME}")
    return folders


def stale_cards(folders: Sequence[Path]) -> list[Path]:
    """Cards that are missing or differ from a fresh render."""
    stale = []
    for folder in folders:
        card, text = folder / CARD_NAME, render_card(folder)  # render first: a broken manifest is an error
        if not card.is_file() or card.read_text(encoding="utf-8") != text:
            stale.append(card)
    return stale


def write_card(folder: Path) -> bool:
    """Writes `folder/README.md`; returns whether its text changed."""
    card, text = folder / CARD_NAME, render_card(folder)
    changed = not card.is_file() or card.read_text(encoding="utf-8") != text
    if changed:
        card.write_text(text, encoding="utf-8")
        logger.info("wrote %s", card)
    return changed
