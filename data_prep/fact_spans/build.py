"""`prepare fact-spans`: read every source, hold out the benchmark, split, synthesise, write.

Order matters for leakage: benchmark data (a source-grouped part of RAGTruth's Summary/Data2txt
rows, its context-less QA rows, FaithBench) is set aside first; any other record whose context
equals a held-out context is dropped; the rest is split by group (union of context hash and
cross-language paragraph keys) *before* synthesis, so borrowed sentences stay inside one split.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from ..data_card import write_data_card
from ..io import DataError, write_jsonl
from ..splits import grouped_split
from .config import FactSpansPrepConfig
from .converters import (Converted, ReadingItem, read_faithbench, read_ragtruth_official,
                         read_ragtruth_subset, read_squad, text_key)
from .schema import SpanRecord
from .synthesis import Synthesizer

logger = logging.getLogger(__name__)
HELDOUT_DIR = "heldout"


@dataclass
class PrepareReport:
    splits: dict[str, list[SpanRecord]]
    errors: list[str] = field(default_factory=list)
    card: dict[str, Any] = field(default_factory=dict)


def _existing(path: str, key: str) -> Path:
    resolved = Path(path)
    if not resolved.exists():
        raise DataError(f"{key}: {path} does not exist (resolved from {Path.cwd()}); fix the path or set it to null")
    return resolved


def _group_components(items: list[ReadingItem]) -> dict[str, str]:
    """Union-find over group keys: items sharing any key end up in one group (its smallest key)."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for item in items:
        roots = [find(k) for k in item.group_keys]
        for root in roots[1:]:
            a, b = sorted((find(roots[0]), find(root)))
            parent[b] = a
    return {k: find(k) for k in parent}


def _hold_out(records: list[SpanRecord], fraction: float, seed: int) -> tuple[list[SpanRecord], list[SpanRecord]]:
    """(held out, rest) by source group."""
    if fraction >= 1.0:
        return records, []
    if fraction <= 0.0 or not records:
        return [], records
    parts = grouped_split(records, lambda r: r.group, {"heldout": fraction, "rest": 1 - fraction},
                          seed=seed, allow_empty=True)
    return parts["heldout"], parts["rest"]


def read_sources(config: FactSpansPrepConfig) -> tuple[dict[str, list[SpanRecord]], list[SpanRecord], list[ReadingItem], list[str]]:
    """(held-out records by dataset, trainable human records, reading items, skipped-row messages)."""
    heldout: dict[str, list[SpanRecord]] = {"ragtruth": [], "faithbench": []}
    human: list[SpanRecord] = []
    errors: list[str] = []
    rt = config.ragtruth
    if rt.subset_path:
        conv = read_ragtruth_subset(_existing(rt.subset_path, "ragtruth.subset_path"),
                                    *(_existing(p, "ragtruth.extra_paths") for p in rt.extra_paths))
        errors += conv.errors
        # A source document with any context-less row is held out whole, so no group straddles.
        unusable_groups = {r.group for r in conv.records if not r.grounding_usable}
        held, rest = _hold_out([r for r in conv.records if r.group not in unusable_groups],
                               rt.heldout_fraction, config.seed)
        heldout["ragtruth"] += [r for r in conv.records if r.group in unusable_groups] + held
        human += rest
    if rt.official_dir:
        conv = read_ragtruth_official(_existing(rt.official_dir, "ragtruth.official_dir"))
        errors += conv.errors
        test_groups = {r.group for r in conv.records if r.meta.get("split") == "test"}
        heldout["ragtruth"] += [r for r in conv.records if r.group in test_groups]
        human += [r for r in conv.records if r.group not in test_groups and r.grounding_usable]
    fb = config.faithbench
    if fb.path:
        conv = read_faithbench(_existing(fb.path, "faithbench.path"), questionable=fb.questionable,
                               min_annotators=fb.min_annotators)
        errors += conv.errors
        held, rest = _hold_out(conv.records, fb.heldout_fraction, config.seed)
        heldout["faithbench"] += held
        human += rest
    reading = Converted()
    for entry in config.reading:
        if entry.language not in config.languages:
            continue
        conv = read_squad(_existing(entry.path, f"reading[{entry.name}]"), source=entry.name,
                          language=entry.language, parallel_key=entry.parallel)
        if entry.max_contexts:
            keep = list(dict.fromkeys(i.context for i in conv.records))[:entry.max_contexts]
            conv.records = [i for i in conv.records if i.context in set(keep)]
        reading.extend(conv)
    errors += reading.errors
    human = [r for r in human if r.language in config.languages]
    return heldout, human, reading.records, errors


def _split_seed(seed: int, split: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{split}".encode()).digest()[:4], "big")


def synthesise(items: list[ReadingItem], config: FactSpansPrepConfig, split: str) -> list[SpanRecord]:
    """Synthetic and counterfactual answers for the reading items of one split."""
    settings = config.synthesis
    synthesizer = Synthesizer(items, settings.settings(), seed=_split_seed(config.seed, split))
    by_context: dict[str, list[ReadingItem]] = {}
    for item in items:
        by_context.setdefault(item.context, []).append(item)
    records: list[SpanRecord] = []
    for questions in by_context.values():
        for index in range(settings.answers_per_context):
            records.append(synthesizer.answer(questions[index % len(questions)], index))
        if synthesizer.rng.random() < settings.counterfactual_rate:
            records += synthesizer.counterfactual(questions[0], 0)
    return records


def _sources(splits: dict[str, list[SpanRecord]]) -> dict[str, str]:
    files: dict[str, set[str]] = {}
    licences: dict[str, str] = {}
    for records in splits.values():
        for r in records:
            files.setdefault(r.provenance.dataset, set()).add(r.provenance.file)
            licences[r.provenance.dataset] = r.provenance.licence
    return {name: f"licence {licences[name]}; files: {', '.join(sorted(paths))}" for name, paths in sorted(files.items())}


def _label_counts(records: Iterable[SpanRecord]) -> str:
    spans = Counter(s.label.value for r in records for s in r.spans)
    return ", ".join(f"{k} {v}" for k, v in sorted(spans.items()))


def prepare(config: FactSpansPrepConfig, out_dir: str | Path) -> PrepareReport:
    """Builds and writes `<out>/<split>.jsonl`, `<out>/heldout/<dataset>.jsonl` and the data card."""
    out = Path(out_dir)
    heldout, human, reading, errors = read_sources(config)
    held_keys = {text_key(r.context) for rs in heldout.values() for r in rs if r.context.strip()}
    before = len(human) + len(reading)
    human = [r for r in human if text_key(r.context) not in held_keys]
    reading = [i for i in reading if text_key(i.context) not in held_keys]
    if dropped := before - len(human) - len(reading):
        logger.warning("%d record(s) dropped: their context is in the held-out benchmark data", dropped)
    components = _group_components(reading)
    reading = [replace(i, group_keys=(components[i.group_keys[0]],) + i.group_keys) for i in reading]
    item_splits = grouped_split(reading, lambda i: i.group_keys[0], config.splits, seed=config.seed) if reading \
        else {name: [] for name in config.splits}
    human_splits = grouped_split(human, lambda r: r.group, config.splits, seed=config.seed, allow_empty=True) \
        if human else {name: [] for name in config.splits}
    splits: dict[str, list[SpanRecord]] = {}
    for name in config.splits:
        splits[name] = human_splits[name] + synthesise(item_splits[name], config, name)
        write_jsonl(out / f"{name}.jsonl", splits[name])
    for dataset, records in heldout.items():
        if records:
            splits[f"{HELDOUT_DIR}/{dataset}"] = records
            write_jsonl(out / HELDOUT_DIR / f"{dataset}.jsonl", records)
    notes = [f"spans per label in {name}: {_label_counts(rs)}" for name, rs in splits.items()]
    notes += [
        "heldout/* is benchmark data: never train on it. RAGTruth QA rows there have no reference "
        "(grounding_usable=false) and cannot be scored for grounding.",
        f"FaithBench Questionable policy: {config.faithbench.questionable}; a character takes a class "
        f"when >= {config.faithbench.min_annotators} annotator(s) gave it that class or a worse one.",
        f"{len(errors)} source row(s) skipped" + (f"; first: {errors[0]}" if errors else ""),
    ]
    card = write_data_card(
        out, task="fact_spans", splits=splits,
        breakdowns={"hallucinated": lambda r: r.hallucinated, "source": lambda r: r.source,
                    "language": lambda r: r.language, "origin": lambda r: r.origin.value,
                    "task_type": lambda r: r.task_type.value},
        sources=_sources(splits),
        config=config.model_dump(mode="json"), notes=notes)
    return PrepareReport(splits=splits, errors=errors, card=card)
