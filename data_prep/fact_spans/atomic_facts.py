"""Atomic facts of a context, their alignment to the answer, and token masks for a tokenizer.

A fact is a clause: sentences (from `inference.text.split_sentences`) are cut further at `;` and
at a comma before a coordinating word ("..., and ...", "..., but ...", "..., а ...", "..., но ..."),
as long as both halves keep at least `min_content_tokens` meaningful words. The clauses of a
sentence tile it, so every character of a copied sentence belongs to exactly one fact.

Alignment is lexical: a fact is expressed by an answer clause when they share enough content stems
(`inference.text.content_stems`: stopwords dropped, numbers normalised, en/ru stemmed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from autovalidators.inference.text import content_stems, split_sentences, tokenize
from autovalidators.inference.windowing import plain_tokenizer

from .schema import AtomicFact, CharRange, SpanLabel, SpanRecord

# Where a sentence may be cut into clauses: after ";" or before a coordinating word that follows
# a comma. The cut point is the start of the next clause.
_CLAUSE_CUT = re.compile(
    r"(?<=;)\s+|,\s+(?=(?:and|but|while|whereas|although|which|who|а|но|однако|хотя|причём|который|которая|которое|которые)\b)",
    re.IGNORECASE,
)
# Token labels used in masks; -100 is the usual "ignore in the loss" index.
IGNORE_INDEX = -100


@dataclass(frozen=True)
class FactSpan:
    start: int
    end: int
    text: str


def _content_count(text: str) -> int:
    return sum(1 for t in tokenize(text) if not t.is_stopword)


def split_facts(context: str, *, min_content_tokens: int = 2) -> list[FactSpan]:
    """Clause-level facts with offsets into `context`; clauses too short to stand alone stay joined."""
    facts: list[FactSpan] = []
    for sentence in split_sentences(context):
        cuts = [0]
        for match in _CLAUSE_CUT.finditer(sentence.text):
            # A comma cut keeps the comma with the left clause; a ";" cut keeps the ";".
            cut = match.start() + 1 if match.group(0).startswith(",") else match.end()
            left = sentence.text[cuts[-1]:cut]
            right = sentence.text[cut:]
            if _content_count(left) >= min_content_tokens and _content_count(right) >= min_content_tokens:
                cuts.append(cut)
        cuts.append(len(sentence.text))
        for a, b in zip(cuts, cuts[1:]):
            piece = sentence.text[a:b]
            stripped = piece.strip()
            if not stripped:
                continue
            start = sentence.start + a + piece.index(stripped)
            facts.append(FactSpan(start, start + len(stripped), stripped))
    return facts


def _subtract(ranges: Iterable[tuple[int, int]], holes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """`ranges` minus `holes`, as sorted non-empty ranges."""
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        pieces = [(start, end)]
        for h_start, h_end in holes:
            next_pieces = []
            for a, b in pieces:
                if h_end <= a or h_start >= b:
                    next_pieces.append((a, b))
                    continue
                if a < h_start:
                    next_pieces.append((a, h_start))
                if h_end < b:
                    next_pieces.append((h_end, b))
            pieces = next_pieces
        out.extend(pieces)
    return sorted(out)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and not text[start].isalnum():
        start += 1
    while end > start and not text[end - 1].isalnum():
        end -= 1
    return start, end


def align_facts(
    context: str,
    answer: str,
    *,
    facts: Sequence[FactSpan] | None = None,
    exclude: Sequence[tuple[int, int]] = (),
    min_shared: int = 2,
    min_share: float = 0.5,
) -> list[AtomicFact]:
    """Facts of `context`, each with the answer clauses that express it.

    An answer clause expresses a fact when they share at least `min_shared` content stems (or all
    of the fact's, for a very short fact) and the shared stems are at least `min_share` of the
    fact's or of the clause's content stems. `exclude` (e.g. hallucination and noise spans) is cut
    out of the matched answer stretches.
    """
    facts = split_facts(context) if facts is None else facts
    answer_clauses = [(c, content_stems(c.text)) for c in split_facts(answer, min_content_tokens=2)]
    aligned = []
    for fact in facts:
        fact_stems = content_stems(fact.text)
        matched: list[tuple[int, int]] = []
        if fact_stems:
            for clause, clause_stems in answer_clauses:
                shared = fact_stems & clause_stems
                if not clause_stems or len(shared) < min(min_shared, len(fact_stems)):
                    continue
                if len(shared) / len(fact_stems) >= min_share or len(shared) / len(clause_stems) >= min_share:
                    matched.append((clause.start, clause.end))
        pieces = [_trim(answer, a, b) for a, b in _subtract(matched, sorted(exclude))]
        aligned.append(
            AtomicFact(
                start=fact.start,
                end=fact.end,
                text=fact.text,
                answer_spans=[CharRange(start=a, end=b) for a, b in pieces if b > a],
            )
        )
    return aligned


@dataclass(frozen=True)
class TokenMasks:
    """Per answer token: label ids, one 0/1 mask per fact, and the noise mask.

    `labels[i]` is the index of the token's label in `label_names` or IGNORE_INDEX (ignored text,
    or a token made only of characters with no label).
    """

    offsets: list[tuple[int, int]]
    labels: np.ndarray  # (n_tokens,) int64
    fact_masks: np.ndarray  # (n_facts, n_tokens) bool
    noise_mask: np.ndarray  # (n_tokens,) bool
    label_names: tuple[str, ...]

    @property
    def hallucination_mask(self) -> np.ndarray:
        """Tokens in no fact mask and not noise: by the issue's definition, hallucinated."""
        covered = self.fact_masks.any(axis=0) if len(self.fact_masks) else np.zeros(len(self.offsets), bool)
        return ~covered & ~self.noise_mask


def _encode_offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    # The same tokens as the answer part of a runtime window (`inference.windowing`), one for one:
    # never truncated, never padded; a zero-width token gets IGNORE_INDEX.
    encoding = plain_tokenizer(tokenizer).encode(text, add_special_tokens=False)
    return [tuple(o) for o in encoding.offsets]


def token_label(char_labels: Sequence[SpanLabel | None], start: int, end: int) -> SpanLabel | None:
    """A token is HALLUCINATION if any of its characters is, else NOISE if any is, else FACT."""
    present = {label for label in char_labels[start:end] if label is not None}
    for label in (SpanLabel.HALLUCINATION, SpanLabel.NOISE, SpanLabel.FACT):
        if label in present:
            return label
    return None


def token_masks(
    record: SpanRecord,
    tokenizer: Any,
    label_names: Sequence[str] = ("FACT", "NOISE", "HALLUCINATION"),
) -> TokenMasks:
    """Token-level labels and masks of `record.answer` for `tokenizer` (offsets-capable)."""
    offsets = _encode_offsets(tokenizer, record.answer)
    char_labels = record.char_labels()
    index = {name: i for i, name in enumerate(label_names)}
    labels = np.full(len(offsets), IGNORE_INDEX, dtype=np.int64)
    noise = np.zeros(len(offsets), dtype=bool)
    for t, (start, end) in enumerate(offsets):
        label = token_label(char_labels, start, end)
        if label is not None:
            labels[t] = index[label.value]
        noise[t] = label is SpanLabel.NOISE
    fact_masks = np.zeros((len(record.facts), len(offsets)), dtype=bool)
    for f, fact in enumerate(record.facts):
        for rng in fact.answer_spans:
            for t, (start, end) in enumerate(offsets):
                if start < rng.end and end > rng.start:
                    fact_masks[f, t] = True
    return TokenMasks(offsets, labels, fact_masks, noise, tuple(label_names))
