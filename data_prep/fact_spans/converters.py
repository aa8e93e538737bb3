"""Converters from public data to `SpanRecord`s (RAGTruth, FaithBench) and reading-comprehension
triples (SQuAD format: XQuAD, TyDi GoldP, SQuAD2) for the synthesiser.

Every converter reads what it can: a bad row becomes one message in `Converted.errors` (file, row,
what was wrong) and the rest are still converted.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import ValidationError

from autovalidators.inference.text import language_of

from ..io import DataError, read_jsonl
from ..squad import iter_squad
from .atomic_facts import align_facts
from .noise import find_noise
from .schema import Origin, Provenance, SpanLabel, SpanRecord, TaskType, fill_spans

logger = logging.getLogger(__name__)

QuestionablePolicy = Literal["ignore", "hallucination", "noise", "fact"]
# RAGTruth's Summary and Data2txt rows carry no question; the task's instruction stands in for it.
TASK_QUESTIONS = {
    TaskType.SUMMARY: "Summarize the following text.",
    TaskType.DATA2TXT: "Write an objective overview of the business from the structured data.",
}
LICENCES = {"ragtruth": "MIT", "faithbench": "CC BY-NC-SA 4.0", "xquad": "CC BY-SA 4.0",
            "tydiqa_goldp": "Apache-2.0", "squad2": "CC BY-SA 4.0"}


@dataclass
class Converted:
    """What a converter produced and the rows it had to skip, each with the reason."""

    records: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def extend(self, other: "Converted") -> None:
        self.records.extend(other.records)
        self.errors.extend(other.errors)


def text_key(text: str) -> str:
    """A short stable hash of whitespace-normalised text: the group key of a context."""
    normalised = " ".join(text.split()).lower()
    return hashlib.sha1(normalised.encode("utf-8")).hexdigest()[:16]


def _context_text(reference: Any) -> str:
    # Data2txt references are JSON objects; one key per line keeps each field a separate fact.
    if isinstance(reference, (dict, list)):
        return json.dumps(reference, ensure_ascii=False, indent=1)
    return str(reference or "")


def _language(text: str) -> Literal["en", "ru"]:
    return "ru" if language_of(text) == "ru" else "en"


def _guarded(converted: Converted, where: str, build: Callable[[], Any]) -> None:
    try:
        converted.records.append(build())
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else repr(exc)
        converted.errors.append(f"{where}: skipped ({detail})")


# --------------------------------------------------------------------------------------------- RAGTruth


def ragtruth_record(row: dict[str, Any], *, context: str, question: str, task_type: str,
                    provenance: Provenance, source_id: str) -> SpanRecord:
    """One RAGTruth response: annotated spans -> HALLUCINATION, filler -> NOISE, the rest FACT."""
    answer = row["response"]
    task = TaskType(task_type)
    labelled = []
    for label in row.get("labels") or []:
        start, end = int(label["start"]), int(label["end"])
        if not 0 <= start < end <= len(answer):
            raise ValueError(f"label [{start}, {end}) outside the {len(answer)}-char response")
        labelled.append((start, end, SpanLabel.HALLUCINATION, str(label.get("label_type", ""))))
    hallucinated = [(a, b) for a, b, _, _ in labelled]
    noise = [(a, b) for a, b in find_noise(answer) if not any(a < h_end and b > h_start for h_start, h_end in hallucinated)]
    labelled += [(a, b, SpanLabel.NOISE, "filler") for a, b in noise]
    spans = fill_spans(answer, labelled, default=SpanLabel.FACT)
    usable = bool(context.strip())
    facts = align_facts(context, answer, exclude=hallucinated + noise) if usable else []
    return SpanRecord(
        id=f"ragtruth-{row['id']}", context=context, question=question or TASK_QUESTIONS.get(task, ""),
        answer=answer, spans=spans, facts=facts, source="ragtruth", group=f"ragtruth:{source_id}",
        language="en", task_type=task, origin=Origin.HUMAN, provenance=provenance,
        grounding_usable=usable,
        meta={"model": str(row.get("model", "")), "split": str(row.get("split", "")),
              "quality": str(row.get("quality", "")), "source_dataset": str(row.get("source", ""))},
    )


def read_ragtruth_subset(path: str | Path, *extra: str | Path) -> Converted:
    """Single-file subsets (`ragtruth_600.jsonl`, and `ragtruth_extra_423.jsonl` after it): `reference`
    is the context, inline.

    With several files, a response that occurs in more than one (same source, same text) becomes one record (the first file
    with its context wins), and a row without context borrows it from any row of the same source
    (`source_id` and task type): RAGTruth's QA passages belong to the question, not the response, and the 600
    file lost them where the extra file has them. Rows still without context are kept with
    `grounding_usable=False`.
    """
    paths = [Path(p) for p in (path, *extra)]
    rows: list[tuple[Path, int, dict[str, Any]]] = [(p, number, row) for p in paths
                                                     for number, row in enumerate(read_jsonl(p), start=1)]
    def source(row: dict[str, Any]) -> tuple[str, str]:  # a source is one task's input (question, article, business)
        return str(row.get("source_id")), str(row.get("task_type"))

    contexts: dict[tuple[str, str], tuple[Any, str]] = {}
    for _, _, row in rows:
        if _context_text(row.get("reference")).strip():
            contexts.setdefault(source(row), (row.get("reference"), row.get("question") or ""))
    # A response seen in an earlier file is the same response (the 132 rows the two files share);
    # within one file, two rows with equal text are two responses (two models can write the same).
    chosen: list[tuple[Path, int, dict[str, Any]]] = []
    first_seen: dict[str, tuple[Path, int]] = {}  # key -> (its file, its index in chosen)
    for where in rows:
        key = f"{where[2].get('source_id')}\x00{where[2].get('response', '')}"
        if key in first_seen and first_seen[key][0] != where[0]:
            earlier = first_seen[key][1]
            if not _context_text(chosen[earlier][2].get("reference")).strip() and \
                    _context_text(where[2].get("reference")).strip():
                chosen[earlier] = where
            continue
        first_seen.setdefault(key, (where[0], len(chosen)))
        chosen.append(where)
    out = Converted()
    for file, number, row in chosen:
        prov = Provenance(dataset="ragtruth", file=str(file), row=str(number), licence=LICENCES["ragtruth"])
        reference, question = row.get("reference"), row.get("question") or ""
        if not _context_text(reference).strip() and source(row) in contexts:
            reference, borrowed_question = contexts[source(row)]
            question = question or borrowed_question
        _guarded(out, f"{file}:{number}", lambda: ragtruth_record(
            row, context=_context_text(reference), question=question,
            task_type=row["task_type"], provenance=prov, source_id=str(row["source_id"])))
    return out


def read_ragtruth_official(folder: str | Path) -> Converted:
    """The official layout: `response.jsonl` joined to `source_info.jsonl` by `source_id`."""
    folder = Path(folder)
    sources: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(folder / "source_info.jsonl"):
        sources[str(row["source_id"])] = row
    out = Converted()
    responses = folder / "response.jsonl"
    for number, row in enumerate(read_jsonl(responses), start=1):
        source = sources.get(str(row.get("source_id")))
        if source is None:
            out.errors.append(f"{responses}:{number}: source_id {row.get('source_id')!r} not in source_info.jsonl")
            continue
        info = source.get("source_info")
        question = ""
        if source.get("task_type") == "QA" and isinstance(info, dict):
            question, info = str(info.get("question", "")), info.get("passages", "")
        prov = Provenance(dataset="ragtruth", file=str(responses), row=str(number), licence=LICENCES["ragtruth"])
        _guarded(out, f"{responses}:{number}", lambda: ragtruth_record(
            row, context=_context_text(info), question=question, task_type=source["task_type"],
            provenance=prov, source_id=str(row["source_id"])))
    return out


# --------------------------------------------------------------------------------------------- FaithBench

_FAITHBENCH_RANK = {"hallucination": 3, "questionable": 2, "noise": 1}


def _faithbench_class(labels: Iterable[str]) -> str | None:
    """The worst class an annotation names: Unwanted* > Questionable > Benign."""
    names = list(labels)
    if any(n.startswith("Unwanted") for n in names):
        return "hallucination"
    if "Questionable" in names:
        return "questionable"
    if "Benign" in names:
        return "noise"
    return None


def faithbench_record(sample: dict[str, Any], *, path: Path, questionable: QuestionablePolicy,
                      min_annotators: int) -> SpanRecord:
    """One FaithBench summary with its annotators' spans merged.

    Merge rule: a character gets a class when at least `min_annotators` distinct annotators put it
    in that class or a worse one (so with the default 1, any annotator's Unwanted span counts).
    Questionable follows `questionable`: "ignore" leaves it out of loss and metrics.
    """
    answer, context = sample["summary"], sample["source"]
    votes: dict[str, list[set[str]]] = {c: [set() for _ in answer] for c in _FAITHBENCH_RANK}
    for annotation in sample.get("annotations") or []:
        cls = _faithbench_class(annotation.get("label") or [])
        start, end = annotation.get("summary_start"), annotation.get("summary_end")
        if cls is None or start is None or end is None:
            continue
        if not 0 <= start < end <= len(answer):
            raise ValueError(f"annotation {annotation.get('annot_id')} [{start}, {end}) outside the summary")
        for c, rank in _FAITHBENCH_RANK.items():
            if _FAITHBENCH_RANK[cls] >= rank:  # a worse class also counts as a vote for milder ones
                for i in range(start, end):
                    votes[c][i].add(str(annotation.get("annotator_id") or annotation.get("annotator_name")))
    per_char = []
    for i in range(len(answer)):
        per_char.append(next((c for c in _FAITHBENCH_RANK if len(votes[c][i]) >= min_annotators), None))
    target = {"hallucination": SpanLabel.HALLUCINATION, "noise": SpanLabel.NOISE, "fact": SpanLabel.FACT}
    labelled, ignored, i = [], [], 0
    while i < len(answer):
        j = i
        while j < len(answer) and per_char[j] == per_char[i]:
            j += 1
        cls = per_char[i]
        if cls == "questionable":
            cls = questionable if questionable != "ignore" else "ignore"
        if cls == "ignore":
            ignored.append({"start": i, "end": j})
        elif cls is not None:
            labelled.append((i, j, target[cls], "faithbench:" + (per_char[i] or "")))
        i = j
    # Filler the annotators had no reason to mark ("Here is a summary:") is NOISE, as in RAGTruth.
    taken = [(a, b) for a, b, _, _ in labelled] + [(r["start"], r["end"]) for r in ignored]
    labelled += [(a, b, SpanLabel.NOISE, "filler") for a, b in find_noise(answer)
                 if not any(a < t_end and b > t_start for t_start, t_end in taken)]
    spans = fill_spans(answer, labelled, default=SpanLabel.FACT)
    exclude = [(a, b) for a, b, label, _ in labelled if label is not SpanLabel.FACT]
    row = str(sample.get("sample_id"))
    return SpanRecord(
        id=f"faithbench-{path.stem}-{row}", context=context, question=TASK_QUESTIONS[TaskType.SUMMARY],
        answer=answer, spans=spans, ignored=ignored, facts=align_facts(context, answer, exclude=exclude),
        source="faithbench", group=f"faithbench:{text_key(context)}", language=_language(answer),
        task_type=TaskType.SUMMARY, origin=Origin.HUMAN,
        provenance=Provenance(dataset="faithbench", file=str(path), row=row, licence=LICENCES["faithbench"]),
        meta={"model": str((sample.get("metadata") or {}).get("summarizer", "")),
              "annotated": str(bool(sample.get("annotations")))},
    )


def read_faithbench(folder: str | Path, *, questionable: QuestionablePolicy = "ignore",
                    min_annotators: int = 1) -> Converted:
    """Every `batch_*.json` in `folder` (FaithBench `data_for_release/`)."""
    out = Converted()
    files = sorted(Path(folder).glob("batch_*.json"), key=lambda p: int(p.stem.split("_")[-1]))
    if not files:
        raise DataError(f"{folder}: no batch_*.json files (expected FaithBench data_for_release/)")
    for path in files:
        try:
            samples = json.loads(path.read_text(encoding="utf-8"))["samples"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            out.errors.append(f"{path}: not a FaithBench batch ({exc!r}); file skipped")
            continue
        for sample in samples:
            _guarded(out, f"{path}:sample {sample.get('sample_id')}", lambda: faithbench_record(
                sample, path=path, questionable=questionable, min_annotators=min_annotators))
    return out


# --------------------------------------------------------------------------------------------- SQuAD format


@dataclass(frozen=True)
class ReadingItem:
    """A context-question-gold answer triple from a reading-comprehension set."""

    id: str
    context: str
    question: str
    answer: str
    answer_start: int
    language: Literal["en", "ru"]
    source: str
    provenance: Provenance
    # Keys that must share a split: the context hash, plus e.g. XQuAD's cross-language paragraph.
    group_keys: tuple[str, ...]


def read_squad(path: str | Path, *, source: str, language: Literal["en", "ru"] | None = None,
               parallel_key: bool = False) -> Converted:
    """A SQuAD-format file; unanswerable questions (SQuAD2 `is_impossible`) are skipped.

    Args:
        parallel_key: the file is one language of a parallel set (XQuAD): paragraph position is
            added as a group key, so translations of one paragraph land in the same split.
    """
    path = Path(path)
    out = Converted()
    for q in iter_squad(path):
        where = f"{path}:{q.id}"
        if q.is_impossible or not q.answers:
            continue
        gold = q.answers[0]
        start, text = int(gold.get("answer_start", -1)), str(gold.get("text", ""))
        if not text or q.context[start:start + len(text)] != text:
            out.errors.append(f"{where}: answer_start does not point at the answer text; skipped")
            continue
        language_of_row = language or _language(q.context)
        keys = (f"ctx:{text_key(q.context)}",) + ((f"{source}:{q.article}:{q.paragraph}",) if parallel_key else ())
        out.records.append(ReadingItem(
            id=f"{source}-{language_of_row}-{q.id}", context=q.context, question=q.question, answer=text,
            answer_start=start, language=language_of_row, source=source,
            provenance=Provenance(dataset=source, file=str(path), row=q.id,
                                  licence=LICENCES.get(source, "see source")),
            group_keys=keys))
    if out.errors:
        logger.warning("%s: %d question(s) skipped", path, len(out.errors))
    return out
