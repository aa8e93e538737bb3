"""`label tone`: gold sources + automatic labellers -> merged records -> splits, JSONL and a data card.

Order of work:
1. read every source (gold votes per the config's column rules);
2. collapse identical texts (same `group`): the first source in config order keeps the record,
   later duplicates only fill labels it lacks, and conflicting gold values are counted;
3. run the enabled automatic labellers (lexicon, LLM) over the texts and merge votes by the
   configured priority;
4. carve the benchmark sets first (sources with role `benchmark`, and `holdout_fraction` of the
   others, by group hash), so no benchmark text is ever trained on; drop the other texts that are
   near copies of a benchmark text (`benchmark_overlap`: ParaDetox's sentences were cut from
   Russian toxic comment sets), then split the rest train/dev/test with `grouped_split` on the
   same group key;
5. write `<split>.jsonl`, `benchmark_<source>.jsonl`, `labelling_report.json` and the data card.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..data_card import write_data_card
from ..io import write_jsonl
from ..splits import grouped_split
from .config import ToneConfig, load_tone_prompt
from .records import ToneRecord, add_votes, merge
from .sources import read_source

logger = logging.getLogger(__name__)


def collect(config: ToneConfig, data_root: str | Path | None = None,
            sources: list[str] | None = None) -> tuple[list[ToneRecord], dict[str, Any], list[str]]:
    """Reads the sources and collapses duplicate texts; returns records, dedup statistics, bad rows."""
    names = sources or list(config.sources)
    unknown = sorted(set(names) - set(config.sources))
    if unknown:
        raise ValueError(f"unknown source(s) {unknown}; the config has {', '.join(config.sources)}")
    by_group: dict[str, ToneRecord] = {}
    stats: Counter = Counter()
    bad_rows: list[str] = []
    for name in names:
        records, errors = read_source(name, config, data_root)
        bad_rows += errors
        for record in records:
            stats[f"rows_read.{name}"] += 1
            kept = by_group.get(record.group)
            if kept is None:
                by_group[record.group] = record
                continue
            stats[f"duplicates_collapsed.{name}"] += 1
            kept.duplicates.append(record.id)
            _fold_gold(kept, record, stats)
            if config.sources[name].role == "benchmark":
                # A text in a benchmark set is benchmark, whichever source listed it first.
                kept.split = f"benchmark_{name}"
    return list(by_group.values()), dict(sorted(stats.items())), bad_rows


def _fold_gold(kept: ToneRecord, other: ToneRecord, stats: Counter) -> None:
    for label, value in other.votes.get("gold", {}).items():
        mine = kept.votes.get("gold", {}).get(label)
        if mine is None:
            add_votes(kept, "gold", {label: value}, {label: f"{other.id}: " + other.vote_details["gold"].get(label, "")})
        elif mine != value:
            stats[f"gold_conflicts.{label}"] += 1


def run_labellers(records: list[ToneRecord], config: ToneConfig, *, use_llm: bool | None = None) -> dict[str, Any]:
    """Adds lexicon/LLM votes and merges; returns per-labeller statistics and disagreement counts."""
    report: dict[str, Any] = {}
    texts = [r.text for r in records]
    if config.lexicon.enabled:
        from .lexicon import LexiconLabeller

        lexicon = LexiconLabeller(config.lexicon, list(config.labels))
        for record, (votes, details) in zip(records, lexicon.label(texts)):
            add_votes(record, "lexicon", votes, details)
        report["lexicon"] = {"labels": lexicon.labels, "en_words": len(lexicon.en_words), "ru_stems": len(lexicon.ru_stems)}
    if config.llm.enabled if use_llm is None else use_llm:
        from .llm import LLMLabeller

        llm = LLMLabeller(config.llm, load_tone_prompt(config.llm.prompt), config.labels)
        for record, (votes, details) in zip(records, llm.label(texts)):
            add_votes(record, "llm", votes, details)
        report["llm"] = {"prompt": llm.prompt.version, "model": config.llm.model, **llm.stats}
    disagreements: Counter = Counter()
    for record in records:
        disagreements.update(merge(record, config.merge.priority))
    report["disagreements"] = dict(disagreements.most_common())
    return report


def assign_splits(records: list[ToneRecord], config: ToneConfig) -> dict[str, list[ToneRecord]]:
    """Benchmark sets first (never trained on), then train/dev/test by group hash."""
    splits: dict[str, list[ToneRecord]] = {}
    pool: list[ToneRecord] = []
    by_source: dict[str, list[ToneRecord]] = {}
    for record in records:
        if record.split and record.split.startswith("benchmark_"):
            splits.setdefault(record.split, []).append(record)
        elif config.sources[record.source].role == "benchmark":
            record.split = f"benchmark_{record.source}"
            splits.setdefault(record.split, []).append(record)
        else:
            by_source.setdefault(record.source, []).append(record)
    for source, members in by_source.items():
        fraction = config.sources[source].holdout_fraction
        if fraction > 0:
            parts = grouped_split(members, lambda r: r.group, {"keep": 1 - fraction, "holdout": fraction},
                                  seed=config.splits.seed)
            for record in parts["holdout"]:
                record.split = f"benchmark_{source}"
            splits.setdefault(f"benchmark_{source}", []).extend(parts["holdout"])
            members = parts["keep"]
        pool.extend(members)
    pool, dropped = benchmark_overlap(pool, [r for members in splits.values() for r in members])
    for record in dropped:  # written out like a split: dropped, not lost
        record.split = "dropped_benchmark_overlap"
    splits["dropped_benchmark_overlap"] = dropped
    for name, members in grouped_split(pool, lambda r: r.group, config.splits.fractions, seed=config.splits.seed).items():
        for record in members:
            record.split = name
        splits[name] = members
    return splits


# A text is a near copy of a benchmark text when this share of its word 5-grams occurs in
# benchmark texts of its language (a sentence cut from a benchmark comment, a retweet with a
# different @mention). Texts under 5 words only match exactly, which the group key already does.
OVERLAP_NGRAM, OVERLAP_SHARE = 5, 0.8


def _word_ngrams(text: str, n: int = OVERLAP_NGRAM) -> list[tuple[str, ...]]:
    words = re.findall(r"\w+", re.sub(r"https?://\S+|@\w+", " ", text.lower()))
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def benchmark_overlap(pool: list[ToneRecord], benchmark: list[ToneRecord]) -> tuple[list[ToneRecord], list[ToneRecord]]:
    """(kept, dropped): drops pool texts that are near copies of a benchmark text, and the paired
    rewrites (row `<original row>:<column>`) of a dropped original, which restate its content."""
    seen: dict[str, set[tuple[str, ...]]] = {}
    for record in benchmark:
        seen.setdefault(record.language, set()).update(_word_ngrams(record.text))
    dropped_rows: set[tuple[str, str]] = set()
    for record in pool:
        grams = _word_ngrams(record.text)
        known = seen.get(record.language, set())
        if grams and sum(g in known for g in grams) >= OVERLAP_SHARE * len(grams):
            dropped_rows.add((record.source, record.row))
    kept, dropped = [], []
    for record in pool:
        original = (record.source, record.row.rsplit(":", 1)[0])
        is_dropped = (record.source, record.row) in dropped_rows or original in dropped_rows
        (dropped if is_dropped else kept).append(record)
    if dropped:
        logger.info("dropped %d texts that are near copies of benchmark texts (or their rewrites)", len(dropped))
    return kept, dropped


def build(config: ToneConfig, out: str | Path, *, data_root: str | Path | None = None,
          sources: list[str] | None = None, use_llm: bool | None = None) -> dict[str, Any]:
    """Runs the whole labelling pipeline into `out`; returns the labelling report."""
    out = Path(out)
    records, dedup, bad_rows = collect(config, data_root, sources)
    if not records:
        raise ValueError("no records read; check data_root and the source paths")
    report = {"config_version": config.version, "dedup": dedup, "bad_rows": bad_rows,
              **run_labellers(records, config, use_llm=use_llm)}
    splits = assign_splits(records, config)
    for name, members in splits.items():
        write_jsonl(out / f"{name}.jsonl", members)
    report["splits"] = {name: len(members) for name, members in splits.items()}
    (out / "labelling_report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    breakdowns = {"source": lambda r: r.source, "language": lambda r: r.language}
    for label in config.labels:
        breakdowns[f"{label} (value)"] = lambda r, label=label: r.labels[label]
        breakdowns[f"{label} (decided by)"] = lambda r, label=label: (r.provenance[label].labeller
                                                                     if r.provenance[label] else "missing")
    used = {r.source for r in records}
    write_data_card(
        out, task="tone", splits=splits, breakdowns=breakdowns,
        sources={name: f"{', '.join(config.sources[name].paths)} ({config.sources[name].licence})"
                 for name in config.sources if name in used},
        config=config.model_dump(mode="json"),
        notes=[
            "Labels are 1, 0 or None (missing: the source and labellers said nothing); training masks None.",
            f"Merge rule: first labeller with a value in {config.merge.priority} decides; see labelling_report.json.",
            "benchmark_* files are never trained on (role: benchmark, or holdout_fraction of a source).",
            "Identical texts (after case/space/@mention/URL normalisation) are one record and one group.",
            "CC BY-NC-SA sources (ru_sensitive) are for training/benchmarks only; never commit these files.",
        ],
    )
    return report
