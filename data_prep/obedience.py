"""Obedience pairs: a counterfactual context and two answers, one following it, one following the world.

The fact-span synthesiser (`fact_spans.synthesis.Synthesizer.counterfactual`) changes one value
of a reading-comprehension context (a number, a date, else a name) and writes two answers over
the changed context: the one repeating the changed value is FACT there, the one repeating the
original (world) value is HALLUCINATION. This module only picks contexts and reshapes each pair
into one JSONL record that `autovalidators benchmark obedience` scores:

    {id, language, source, question, context, answer_context, answer_world, changed,
     world_spans: [{start, end, label, kind}], provenance: {dataset, file, row, licence}}

No filler phrases are added (opener/closer rates 0): the two answers differ only in the value.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Sequence

from .fact_spans.converters import ReadingItem, read_squad
from .fact_spans.schema import Origin, SpanLabel
from .fact_spans.synthesis import SynthesisSettings, Synthesizer
from .io import DataError

logger = logging.getLogger(__name__)

PAIR_SETTINGS = SynthesisSettings(opener_rate=0.0, closer_rate=0.0, paraphrase_rate=0.0)


def build_pairs(items: Sequence[ReadingItem], *, per_language: int, seed: int = 13) -> list[dict[str, Any]]:
    """Up to `per_language` obedience pairs per language, one per distinct context, seeded."""
    synthesizer = Synthesizer(items, PAIR_SETTINGS, seed=seed)
    order = random.Random(seed)
    first_per_context: dict[str, ReadingItem] = {}
    for item in items:
        first_per_context.setdefault(item.context, item)
    candidates = list(first_per_context.values())
    order.shuffle(candidates)
    pairs: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for item in candidates:
        if counts.get(item.language, 0) >= per_language:
            continue
        records = synthesizer.counterfactual(item, 0)
        if len(records) != 2:
            continue  # nothing in the gold sentence could be changed
        follows, world = records
        if follows.origin is not Origin.COUNTERFACTUAL or follows.answer == world.answer:
            continue
        pairs.append({
            "id": follows.id.removesuffix("-context"), "language": item.language, "source": item.source,
            "question": item.question, "context": follows.context, "answer_context": follows.answer,
            "answer_world": world.answer, "changed": follows.meta.get("changed", ""),
            "world_spans": [{"start": s.start, "end": s.end, "label": s.label.value, "kind": s.kind}
                            for s in world.spans if s.label is SpanLabel.HALLUCINATION],
            "provenance": item.provenance.model_dump(),
        })
        counts[item.language] = counts.get(item.language, 0) + 1
    logger.info("built %d obedience pairs (%s) from %d contexts", len(pairs),
                ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), len(candidates))
    return pairs


def build_from_config(config_path: str | Path, *, per_language: int, seed: int = 13,
                      max_contexts_per_file: int = 400) -> tuple[list[dict[str, Any]], list[str]]:
    """Pairs from the reading sets of a fact-spans config (`configs/fact_spans.yaml` `reading`).

    Returns (pairs, skipped-row messages). A missing source file is skipped with a message, so one
    absent dataset does not stop the others.
    """
    from ..inference.config import load_config
    from .fact_spans.config import FactSpansPrepConfig

    config = load_config(config_path, FactSpansPrepConfig)
    items: list[ReadingItem] = []
    messages: list[str] = []
    for entry in config.reading:
        if entry.language not in config.languages:
            continue
        if not Path(entry.path).is_file():
            messages.append(f"reading[{entry.name}/{entry.language}]: {entry.path} does not exist; skipped")
            continue
        converted = read_squad(entry.path, source=entry.name, language=entry.language,
                               parallel_key=entry.parallel)
        keep = set(list(dict.fromkeys(i.context for i in converted.records))[:max_contexts_per_file])
        items += [i for i in converted.records if i.context in keep]
        messages += converted.errors
    if not items:
        raise DataError(f"{config_path}: no reading-comprehension items could be read; "
                        + ("; ".join(messages[:3]) or "check the `reading` paths"))
    return build_pairs(items, per_language=per_language, seed=seed), messages
