"""`models/<validator>/manifest.json`: the only thing inference trusts about a trained model.

Written by export, verified on load: format version, labels, thresholds, max length, window rule,
training data/config, metrics and the sha256 of every file in the folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MANIFEST_NAME = "manifest.json"
# The benchmark results shipped beside a model (`benchmark <task> --update-manifest` writes them):
# a description of the model, not part of it, so it is not in `files` and not verified on load;
# the report checks its `model_sha256` against the manifest instead.
BENCHMARK_NAME = "benchmark.json"
# The model card (`autovalidators card`): generated from the manifest and benchmark, and the prose
# it is generated with. Not part of what the runtime verifies, and kept across re-exports.
CARD_FILES = ("README.md", "card.yaml")
UNHASHED = (MANIFEST_NAME, BENCHMARK_NAME, *CARD_FILES)
FORMAT_VERSION = 1


class ManifestError(ValueError):
    """A model folder that cannot be trusted: missing files, wrong hashes, bad manifest."""


class WindowRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_length: int = Field(gt=8)
    stride: int = Field(0, ge=0, description="tokens of overlap between context windows")
    aggregation: str = "max"  # how per-window predictions combine; documented per task


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int
    name: str  # validator name: fact_spans, qa_relevance, tone
    task: str
    version: str
    base_model: str
    labels: list[str]
    thresholds: dict[str, float] = {}
    # Per-language overrides of `thresholds` (`text.language_of`; a label a language leaves out keeps
    # `thresholds`): one encoder's scores sit differently on Russian and English text, so a single
    # cut trades one language's false flags against the other's catches. Honoured by tone.
    thresholds_by_language: dict[str, dict[str, float]] = {}
    window: WindowRule
    model_file: str = "model.onnx"
    tokenizer_file: str = "tokenizer.json"
    files: dict[str, str]  # file name -> sha256
    metrics: dict[str, Any] = {}
    training: dict[str, Any] = {}  # data, config, what was subsampled/frozen: reproducibility
    # Languages (`text.language_of`) whose texts the validator hands to its heuristic fallback
    # because the encoder cannot read them (an English WordPiece vocabulary spells Cyrillic out
    # letter by letter). Measured per language by the task's benchmark; honoured by tone.
    fallback_languages: list[str] = []
    # Labels the training data could not teach (tone's `threat`: 2 positives among 36k rows): a
    # lexicon match raises the label, and the toxicity umbrella, to its threshold. Honoured by tone.
    lexicon_labels: list[str] = []
    # The reverse, per language: label -> languages where the label stands only on a lexicon match
    # (elsewhere its score is capped just below its threshold). Russian obscenity (мат) is a closed
    # set of roots, and the encoder's piece "▁ху" fires on loanwords (Хуан, хунхузы). Honoured by tone.
    lexicon_required: dict[str, list[str]] = {}

    @property
    def model_sha256(self) -> str:
        return self.files[self.model_file]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(folder: str | Path, *, verify: bool = True) -> Manifest:
    """Reads and (by default) verifies a model folder; raises ManifestError saying what is wrong."""
    folder = Path(folder)
    path = folder / MANIFEST_NAME
    try:
        manifest = Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ManifestError(f"{path}: missing; export the model with `autovalidators export`") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) + f" ({e['msg']})" for e in exc.errors())
        raise ManifestError(f"{path}: invalid manifest: {fields}") from None
    if manifest.format_version != FORMAT_VERSION:
        raise ManifestError(
            f"{path}: format_version {manifest.format_version}, this runtime reads {FORMAT_VERSION}; re-export"
        )
    for required in (manifest.model_file, manifest.tokenizer_file):
        if required not in manifest.files:
            raise ManifestError(f"{path}: 'files' has no sha256 for {required}")
    if verify:
        for name, expected in manifest.files.items():
            file = folder / name
            if not file.is_file():
                raise ManifestError(f"{folder}: {name} is listed in the manifest but missing")
            actual = sha256_of(file)
            if actual != expected:
                raise ManifestError(
                    f"{file}: sha256 {actual[:12]}… does not match the manifest's {expected[:12]}…; "
                    "the file changed after export"
                )
    return manifest


def write_manifest(folder: str | Path, manifest_fields: dict[str, Any]) -> Manifest:
    """Hashes every file in `folder` (but the manifest and the benchmark results) and writes a
    validated manifest.json."""
    folder = Path(folder)
    files = {
        p.name: sha256_of(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name not in UNHASHED
    }
    manifest = Manifest.model_validate({"format_version": FORMAT_VERSION, **manifest_fields, "files": files})
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest.model_dump(), indent=2, ensure_ascii=False) + "\n")
    return manifest


def update_manifest(folder: str | Path, **changes: Any) -> Manifest:
    """Rewrites a verified folder's manifest with `changes` (top-level fields), files re-hashed."""
    fields = load_manifest(folder).model_dump(exclude={"format_version", "files"})
    return write_manifest(folder, {**fields, **changes})
