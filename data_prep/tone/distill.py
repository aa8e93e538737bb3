"""Soft tone targets from trained models (knowledge distillation): `autovalidators label distill`.

Every known label of a training record becomes `(1 - weight) * gold + weight * teacher`, where
`teacher` is the mean score of the teacher models that read the record's language. A teacher's
manifest `fallback_languages` are the languages it leaves to the lexicon (the English MiniLM model
spells Cyrillic letter by letter), so it does not teach there; a record no teacher reads keeps its
gold targets. A missing label stays missing: a teacher never invents a label the gold data lacks.

Why: two tone models that err on different tweets average to a better one (OLID level-A macro-F1
of the mean of the MiniLM and 12-layer e5 scores is above either alone), and a student trained
towards that mean can carry part of the gain in one model's cost. The gold share keeps every
target on its side of 0.5 whenever `weight` <= 0.5, so positives stay positives for `pos_weight`.

`sources` limits the teaching to records of those sources (`source` field): a further pass that must learn
new neutral texts while keeping the shipped model's reading of the abusive sources (learning without
forgetting) distils only those, and the new texts keep their gold targets.

Teachers are the shipped ONNX models run as at serving time (`ToneValidator.scores`: the same windows
and int8 weights, the model's own scores without the lexicon's `lexicon_labels`), never torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.text import language_of
from autovalidators.inference.validators.tone import ToneValidator

from ..io import DataError, iter_jsonl, write_jsonl


@dataclass
class Teacher:
    name: str
    labels: tuple[str, ...]
    skips_languages: frozenset[str]
    validator: Any  # anything with .scores(texts) -> (n, len(labels)) array

    def reads(self, language: str) -> bool:
        return language not in self.skips_languages


@dataclass
class DistillReport:
    records: int = 0
    softened: int = 0
    gold_only: int = 0
    other_sources: int = 0  # records outside `sources`: not scored, gold kept
    bad_lines: list[str] = field(default_factory=list)
    teachers: dict[str, int] = field(default_factory=dict)  # teacher name -> records it scored


def load_teacher(folder: str | Path, threads: int | None = None) -> Teacher:
    manifest = load_manifest(folder)
    if manifest.task != "tone":
        raise ValueError(f"{folder}: a {manifest.task!r} model, not a tone model")
    validator = ToneValidator(folder, manifest, threads=threads)
    return Teacher(str(folder), tuple(manifest.labels), frozenset(manifest.fallback_languages), validator)


def soften(record: dict, teacher_scores: dict[str, float], weight: float,
           only: Sequence[str] | None = None) -> dict:
    """The record with each known label (of `only`, when given) mixed towards the teachers' mean score."""
    labels = dict(record.get("labels") or {})
    for label, gold in labels.items():
        if gold is None or label not in teacher_scores or (only is not None and label not in only):
            continue
        labels[label] = round((1.0 - weight) * float(gold) + weight * teacher_scores[label], 5)
    return {**record, "labels": labels}


def distill_records(records: Sequence[dict], teachers: Sequence[Teacher], weight: float,
                    batch: int = 256, labels: Sequence[str] | None = None,
                    sources: Sequence[str] | None = None) -> tuple[list[dict], DistillReport]:
    """Soft targets for `records` (each with `text` and `labels`); see the module docstring.
    `labels` limits the softening to those labels (the others keep their gold targets), `sources` to
    the records of those sources."""
    if not 0.0 < weight <= 0.5:
        raise ValueError(f"weight {weight}: must be in (0, 0.5] so that gold decides which side of 0.5 a target is on")
    report = DistillReport(records=len(records))
    sums: list[dict[str, float]] = [{} for _ in records]
    counts: list[dict[str, int]] = [{} for _ in records]
    languages = [language_of(r["text"]) for r in records]
    taught = [sources is None or r.get("source") in sources for r in records]
    report.other_sources = taught.count(False)
    for teacher in teachers:
        read = [i for i, language in enumerate(languages) if taught[i] and teacher.reads(language)]
        report.teachers[teacher.name] = len(read)
        for start in range(0, len(read), batch):
            chunk = read[start:start + batch]
            scores = np.asarray(teacher.validator.scores([records[i]["text"] for i in chunk]))
            for row, index in enumerate(chunk):
                for column, label in enumerate(teacher.labels):
                    sums[index][label] = sums[index].get(label, 0.0) + float(scores[row, column])
                    counts[index][label] = counts[index].get(label, 0) + 1
    out = []
    for record, total, count, is_taught in zip(records, sums, counts, taught):
        if not count:
            out.append(record)
            report.gold_only += is_taught
            continue
        out.append(soften(record, {label: total[label] / count[label] for label in total}, weight, labels))
        # Counted when a target moved: under --labels a record may hold none of the softened labels.
        report.softened += out[-1]["labels"] != record["labels"]
    return out, report


def read_training_records(path: Path) -> tuple[list[dict], list[str]]:
    """(records with a text and a labels object, 'file:line: problem' for each line skipped)."""
    records, bad_lines = [], []
    for number, record, problem in iter_jsonl(path):
        if problem is None and not isinstance(record.get("text"), str):
            problem = "field 'text' missing or not a string"
        if problem is None and not isinstance(record.get("labels"), dict):
            problem = "field 'labels' missing or not an object"
        if problem is not None:
            bad_lines.append(f"{path}:{number}: {problem}")
            continue
        records.append(record)
    return records, bad_lines


def distill_file(input_path: Path, output_path: Path, teacher_folders: Sequence[Path], weight: float,
                 threads: int | None = None, labels: Sequence[str] | None = None,
                 sources: Sequence[str] | None = None) -> DistillReport:
    if not input_path.is_file():
        raise DataError(f"{input_path}: no such file")
    if not teacher_folders:
        raise ValueError("no teacher: give at least one --teacher model folder")
    teachers = [load_teacher(folder, threads) for folder in teacher_folders]
    scored = {label for t in teachers for label in t.labels}
    unknown = sorted(set(labels or ()) - scored)
    if unknown:
        raise ValueError(f"--labels {unknown}: no teacher scores them (theirs: {sorted(scored)})")
    records, bad_lines = read_training_records(input_path)
    absent = sorted(set(sources or ()) - {r.get("source") for r in records})
    if absent:
        raise ValueError(f"--sources {absent}: no record of {input_path} comes from them")
    distilled, report = distill_records(records, teachers, weight, labels=labels, sources=sources)
    report.bad_lines = bad_lines
    write_jsonl(output_path, distilled)
    return report
