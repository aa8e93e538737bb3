"""Builds atomic-fact QA triples (id, context, question, answers, language, source) from
permissively licensed SQuAD-format reading-comprehension sets: XQuAD en/ru (CC BY-SA 4.0) and
TyDi QA GoldP en/ru (Apache-2.0).

Sampling is deterministic and parallel-aware: questions are ranked by a seeded hash of their
question id alone (not the language), so the XQuAD English and Russian samples pick the same
questions over the same paragraphs and per-language scores compare like with like. At most
`max_per_context` questions are taken from one paragraph, so a sample covers many contexts.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .io import DataError
from .squad import iter_squad

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceFile:
    source: str
    language: str
    path: str  # relative to the datasets folder
    licence: str


# The permissively licensed SQuAD-format sets in the shared datasets folder (see its README).
SOURCES: tuple[SourceFile, ...] = (
    SourceFile("xquad", "en", "xquad/xquad.en.json", "CC BY-SA 4.0"),
    SourceFile("xquad", "ru", "xquad/xquad.ru.json", "CC BY-SA 4.0"),
    SourceFile("tydiqa_goldp", "en", "tydiqa_goldp/language_data/english/english_tydiqa_dev.json", "Apache-2.0"),
    SourceFile("tydiqa_goldp", "ru", "tydiqa_goldp/language_data/russian/russian_tydiqa_dev.json", "Apache-2.0"),
)


def _clean(text: str) -> str:
    # XQuAD's Russian contexts start with a byte-order mark; it is not part of the text.
    return text.replace("\ufeff", "").strip()


def read_squad_triples(path: str | Path, *, source: str, language: str) -> Iterator[dict[str, Any]]:
    """Yields one triple per answerable question of a SQuAD-format file, in file order.

    `context_key` (title + paragraph index) groups the questions of one paragraph; it is kept for
    sampling and removed before writing.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file; pass --datasets-dir pointing at the shared datasets")
    for qa in iter_squad(path):
        context = _clean(qa.context)
        texts = (_clean(a["text"]) for a in qa.answers if a.get("text", "").strip())
        answers = list(dict.fromkeys(texts))  # annotators often agree: keep each answer once
        if qa.is_impossible or not answers or not context:
            continue
        yield {
            "id": f"{source}-{language}-{qa.id}",
            "context": context,
            "question": _clean(qa.question),
            "answers": answers,
            "language": language,
            "source": source,
            "_rank_key": qa.id,
            "_context_key": f"{qa.article}:{qa.paragraph}",
        }


def _rank(key: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode("utf-8")).digest()[:8], "big")


def sample_triples(
    rows: list[dict[str, Any]], *, limit: int | None, max_per_context: int, seed: int
) -> list[dict[str, Any]]:
    """Up to `limit` rows (None = all) with at most `max_per_context` per paragraph, by seeded rank."""
    per_context: dict[str, int] = defaultdict(int)
    chosen = []
    for row in sorted(rows, key=lambda r: _rank(r["_rank_key"], seed)):
        if limit is not None and len(chosen) >= limit:
            break
        if per_context[row["_context_key"]] >= max_per_context:
            continue
        per_context[row["_context_key"]] += 1
        chosen.append(row)
    return chosen


def build_atomic_qa(
    datasets_dir: str | Path,
    *,
    per_source: int | None = 60,
    max_per_context: int = 1,
    seed: int = 13,
    sources: tuple[SourceFile, ...] = SOURCES,
) -> list[dict[str, Any]]:
    """Triples from every (source, language) file, `per_source` from each, in a stable order."""
    triples = []
    for spec in sources:
        rows = list(read_squad_triples(Path(datasets_dir) / spec.path, source=spec.source, language=spec.language))
        chosen = sample_triples(rows, limit=per_source, max_per_context=max_per_context, seed=seed)
        if per_source is not None and len(chosen) < per_source:
            logger.warning("%s/%s: only %d triples available, asked for %d", spec.source, spec.language,
                           len(chosen), per_source)
        logger.info("%s/%s: %d of %d answerable questions", spec.source, spec.language, len(chosen), len(rows))
        triples.extend({k: v for k, v in row.items() if not k.startswith("_")} for row in chosen)
    return triples
