"""The one span-annotated record every fact-span source is converted to.

A record is a (context, question, answer) triple whose answer is labelled character by character:
`spans` cover every non-whitespace character of the answer with FACT (supported by the context),
NOISE (stylistic filler) or HALLUCINATION (neither); `ignored` marks stretches whose label is
unknown (e.g. FaithBench "Questionable") so a trainer can leave them out of the loss. `facts` are
the context's atomic facts, each with the answer stretches that express it, so recall (share of
facts the answer mentions) is computable.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autovalidators.inference.results import SpanLabel

__all__ = ["SpanLabel", "TaskType", "Origin", "CharSpan", "CharRange", "AtomicFact", "Provenance", "SpanRecord", "fill_spans"]


class TaskType(str, Enum):
    """What the answer was asked to do; RAGTruth's three tasks plus our reading-comprehension QA."""

    QA = "QA"
    SUMMARY = "Summary"
    DATA2TXT = "Data2txt"


class Origin(str, Enum):
    HUMAN = "human"  # labels from human annotators (RAGTruth, FaithBench)
    SYNTHETIC = "synthetic"  # answer and labels built by `synthesis`
    COUNTERFACTUAL = "counterfactual"  # synthetic, over a context whose fact was changed


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CharRange(_Frozen):
    start: int = Field(ge=0)
    end: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> "CharRange":
        if self.end <= self.start:
            raise ValueError(f"empty or reversed range [{self.start}, {self.end})")
        return self


class CharSpan(CharRange):
    """A labelled stretch of the answer, character offsets [start, end)."""

    label: SpanLabel
    # Finer type, free text: RAGTruth's "Evident Conflict", a synthetic "number" swap, ...
    kind: str = ""


class AtomicFact(_Frozen):
    """A clause-level fact of the context and the answer stretches that express it."""

    start: int = Field(ge=0, description="offset into the context")
    end: int = Field(ge=0)
    text: str
    answer_spans: list[CharRange] = Field(default_factory=list, description="offsets into the answer")


class Provenance(_Frozen):
    dataset: str
    file: str
    row: str  # line number, sample id or question id in the source file
    licence: str


class SpanRecord(_Frozen):
    id: str
    context: str
    question: str
    answer: str
    spans: list[CharSpan]
    ignored: list[CharRange] = Field(default_factory=list, description="leave out of loss and metrics")
    facts: list[AtomicFact] = Field(default_factory=list)
    source: str = Field(description="dataset name, e.g. ragtruth, faithbench, xquad")
    group: str = Field(description="source document / context key; never split across splits")
    language: Literal["en", "ru"]
    task_type: TaskType
    origin: Origin
    provenance: Provenance
    # False when the context is missing (RAGTruth subset QA rows): labels cannot be checked against it.
    grounding_usable: bool = True
    meta: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _spans_are_consistent(self) -> "SpanRecord":
        previous_end = 0
        for span in self.spans:
            if span.end > len(self.answer):
                raise ValueError(f"span [{span.start}, {span.end}) ends past the answer ({len(self.answer)} chars)")
            if span.start < previous_end:
                raise ValueError(f"span [{span.start}, {span.end}) overlaps or precedes the one before")
            previous_end = span.end
        for rng in self.ignored:
            if rng.end > len(self.answer):
                raise ValueError(f"ignored range [{rng.start}, {rng.end}) ends past the answer")
        for fact in self.facts:
            if fact.end > len(self.context) or self.context[fact.start:fact.end] != fact.text:
                raise ValueError(f"fact [{fact.start}, {fact.end}) does not match the context text")
            for rng in fact.answer_spans:
                if rng.end > len(self.answer):
                    raise ValueError(f"fact answer span [{rng.start}, {rng.end}) ends past the answer")
        return self

    @property
    def hallucinated(self) -> bool:
        return any(s.label is SpanLabel.HALLUCINATION for s in self.spans)

    def char_labels(self) -> list[SpanLabel | None]:
        """The label of every answer character; None for whitespace gaps and ignored characters."""
        labels: list[SpanLabel | None] = [None] * len(self.answer)
        for span in self.spans:
            labels[span.start:span.end] = [span.label] * (span.end - span.start)
        for rng in self.ignored:
            labels[rng.start:rng.end] = [None] * (rng.end - rng.start)
        return labels

    def recall(self) -> float:
        """Share of the context's atomic facts that the answer expresses (0.0 without facts)."""
        if not self.facts:
            return 0.0
        return sum(1 for f in self.facts if f.answer_spans) / len(self.facts)


def fill_spans(answer: str, labelled: list[tuple[int, int, SpanLabel, str]], default: SpanLabel) -> list[CharSpan]:
    """Turns possibly overlapping labelled stretches into a sorted partition of the answer.

    Characters no stretch covers get `default`; where stretches overlap, HALLUCINATION beats NOISE
    beats FACT (a phrase one annotator calls fabricated is not made safe by another's label).
    Whitespace at span edges is trimmed and whitespace-only pieces are dropped.
    """
    rank = {SpanLabel.FACT: 0, SpanLabel.NOISE: 1, SpanLabel.HALLUCINATION: 2}
    per_char: list[tuple[SpanLabel, str]] = [(default, "")] * len(answer)
    for start, end, label, kind in labelled:
        for i in range(max(0, start), min(end, len(answer))):
            if rank[label] >= rank[per_char[i][0]] and (rank[label] > rank[per_char[i][0]] or not per_char[i][1]):
                per_char[i] = (label, kind)
    spans: list[CharSpan] = []
    i = 0
    while i < len(answer):
        j = i
        while j < len(answer) and per_char[j] == per_char[i]:
            j += 1
        start, end = i, j
        while start < end and answer[start].isspace():
            start += 1
        while end > start and answer[end - 1].isspace():
            end -= 1
        if start < end:
            spans.append(CharSpan(start=start, end=end, label=per_char[i][0], kind=per_char[i][1]))
        i = j
    return spans
