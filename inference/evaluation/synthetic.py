"""Two "systems" with a known winner, built from reading-comprehension data, to prove the judges.

System A answers each question with the context sentence that holds the gold answer (grounded).
System B gives the same answers, except that in a seeded share of cases (default 30%) one fact is
changed: a number shifted, a name swapped for one from another article, or the gold answer replaced
by another question's. A good judge must prefer A; the same system against itself must be a draw.

Categories (`meta.category`, used by test-set quotas) are assigned by documented, deterministic
proxies, not by hand:
- adversarial: out of scope, the question is paired with another article's context; the right answer
  abstains, and a hallucinating B answers from the real article instead;
- factual: the gold answer contains a digit (dates, counts, amounts);
- ambiguous: the context covers under 60% of the question's content words, so the question is
  loosely specified relative to the passage;
- common: everything else.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import heuristics
from ..case import Case
from ..text import split_sentences, tokenize

ABSTENTION = "The context does not say; I cannot answer this from the documents provided."
_NUMBER = re.compile(r"\d+")
_NAME = re.compile(r"(?<=\s)[A-Z][a-z]{2,}")


@dataclass(frozen=True)
class QARecord:
    """One reading-comprehension item: a question, its context and a gold answer span."""

    id: str
    title: str
    question: str
    context: str
    answer: str
    answer_start: int


def read_squad(path: str | Path) -> list[QARecord]:
    """SQuAD-format JSON (XQuAD, TyDi GoldP, SQuAD) or JSONL of QARecord fields; first answer only."""
    path = Path(path)
    if path.suffix == ".jsonl":
        records = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    records.append(QARecord(**json.loads(line)))
                except (json.JSONDecodeError, TypeError) as exc:
                    raise ValueError(f"{path}:{number}: not a QA record ({exc})") from None
        return records
    from autovalidators.data_prep.squad import iter_squad

    return [QARecord(q.id, q.title, q.question, q.context, q.answers[0]["text"], int(q.answers[0]["answer_start"]))
            for q in iter_squad(path) if q.answers]


def answer_sentence(record: QARecord) -> str | None:
    """The context sentence that contains the gold answer, or None when offsets do not line up."""
    for sentence in split_sentences(record.context):
        if sentence.start <= record.answer_start < sentence.end and record.answer in sentence.text:
            return sentence.text.strip()
    return None


def categorize(record: QARecord) -> str:
    if any(ch.isdigit() for ch in record.answer):
        return "factual"
    if heuristics.context_quality(record.question, record.context) < 0.6:
        return "ambiguous"
    return "common"


def _inject(answer: str, record: QARecord, others: list[QARecord],
            rng: random.Random) -> tuple[str, dict[str, str]] | None:
    """Changes one checkable fact in `answer` to something the context does not hold."""
    context_words = {t.stem for t in tokenize(record.context)}
    numbers = list(_NUMBER.finditer(answer))
    if numbers:
        match = rng.choice(numbers)
        old = match.group(0)
        shift = rng.choice([-3, -2, 2, 3, 7, 11]) if len(old) < 4 else rng.choice([-40, -17, 13, 29])
        new = str(abs(int(old) + shift))
        if new != old:
            changed = answer[: match.start()] + new + answer[match.end():]
            return changed, {"kind": "number", "from": old, "to": new}
    names = [m.group(0) for m in _NAME.finditer(answer)]
    if names:
        old = rng.choice(names)
        pool = [m.group(0) for other in others for m in _NAME.finditer(other.context)]
        pool = [n for n in pool if tokenize(n)[0].stem not in context_words]
        if pool:
            new = rng.choice(pool)
            return answer.replace(old, new, 1), {"kind": "name", "from": old, "to": new}
    if record.answer in answer:
        donors = [o.answer for o in others if o.answer.strip() and o.answer not in record.context]
        if donors:
            new = rng.choice(donors)
            return answer.replace(record.answer, new, 1), {"kind": "answer", "from": record.answer, "to": new}
    return None


def build_systems(records: Iterable[QARecord], *, hallucinate: float = 0.3, out_of_scope: float = 0.1,
                  seed: int = 13, limit: int | None = None) -> tuple[list[Case], list[Case]]:
    """(system A, system B) cases with the same ids, questions and contexts; see the module docstring."""
    usable = [(r, s) for r in records if (s := answer_sentence(r))]
    if limit:
        usable = usable[:limit]
    if len(usable) < 2:
        raise ValueError(f"need at least 2 records whose gold answer lies inside one sentence, got {len(usable)}")
    rng = random.Random(seed)
    ids = [r.id for r, _ in usable]
    oos_ids = set(rng.sample(ids, round(out_of_scope * len(ids))))
    bad_ids = set(rng.sample(ids, round(hallucinate * len(ids))))
    all_records = [r for r, _ in usable]
    system_a, system_b = [], []
    for index, (record, sentence) in enumerate(usable):
        others = [o for o in all_records if o.title != record.title] or all_records
        meta: dict[str, Any] = {"category": categorize(record), "source_id": record.id, "title": record.title,
                                "gold": record.answer}
        context = record.context
        answer_a = answer_b = sentence
        injected = None
        if record.id in oos_ids:
            # Another article's context: the honest answer abstains; a hallucinating one answers anyway.
            donor = others[(index * 7919) % len(others)]
            context, meta["category"] = donor.context, "adversarial"
            answer_a = answer_b = ABSTENTION
            if record.id in bad_ids:
                answer_b, injected = sentence, {"kind": "out_of_scope_answer"}
        elif record.id in bad_ids:
            changed = _inject(sentence, record, others, rng)
            if changed:
                answer_b, injected = changed
        case_a = Case(id=record.id, question=record.question, context=[context], answer=answer_a,
                      meta={**meta, "system": "grounded"})
        case_b = Case(id=record.id, question=record.question, context=[context], answer=answer_b,
                      meta={**meta, "system": "hallucinated-30", "injected": injected})
        system_a.append(case_a)
        system_b.append(case_b)
    return system_a, system_b
