"""Edits of answer pieces whose labels stay exact: value swaps (numbers, dates, names) and citations.

An answer piece is a list of `Segment`s, each with its label and the context facts it expresses;
every edit here returns new segments, so character offsets are computed only once, at assembly.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Sequence

from autovalidators.inference.text import WRITTEN_NUMBER, tokenize

from .schema import SpanLabel


@dataclass(frozen=True)
class Segment:
    text: str
    label: SpanLabel = SpanLabel.FACT
    facts: tuple[int, ...] = ()  # indices of the context facts this text expresses
    kind: str = ""


Piece = list[Segment]  # one sentence (or phrase) of the answer
MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"],
    "ru": ["января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября",
           "октября", "ноября", "декабря"],
}
PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
# Wikipedia citation markers ("[11]", "[citation needed]"): no model answer carries them.
CITATION = re.compile(r"\[(?:\d{1,3}|[^\[\]\d]{1,40})\]")


def _is_year(text: str) -> bool:
    return text.isdigit() and len(text) == 4 and 1000 <= int(text) <= 2099


def proper_names(text: str) -> list[str]:
    """Capitalised words not at a sentence start: a cheap stand-in for names and places."""
    names = []
    for tok in tokenize(text):
        # Only the few characters before the word matter; slicing the whole prefix is quadratic.
        before = text[max(0, tok.start - 20):tok.start].rstrip(" \t\ufeff\"«“(")
        if not tok.is_capitalized or tok.is_stopword or tok.is_number or len(tok.text) < 3:
            continue
        if (not before and tok.start <= 20) or (before and before[-1] in ".!?\n:;"):
            continue
        names.append(text[tok.start:tok.end])
    return names


# ------------------------------------------------------------------------------------ value swaps


@dataclass(frozen=True)
class Target:
    """A stretch of one segment of a piece that an injector can replace."""

    segment: int
    start: int
    end: int


def targets(piece: Piece, kind: str, language: str) -> list[Target]:
    found = []
    names = set(proper_names("".join(seg.text for seg in piece))) if kind == "entity" else set()
    for s, seg in enumerate(piece):
        if seg.label is not SpanLabel.FACT:
            continue
        tokens = tokenize(seg.text)
        for i, tok in enumerate(tokens):
            surface = seg.text[tok.start:tok.end]
            if seg.text[tok.start - 1:tok.start] == "[" and seg.text[tok.end:tok.end + 1] == "]":
                continue  # a citation marker, not a claim
            if tok.is_number and (seg.text[tok.end:tok.end + 1].isalpha() or seg.text[tok.start - 1:tok.start].isalpha()):
                continue  # "20th", "1970s": a subword tokenizer would mix the swapped and kept characters
            # Only digits can be rewritten: a number token may be spelt out ("five") or carry its
            # scale word ("7 million"), whose digits alone are the target.
            digits = WRITTEN_NUMBER.match(surface)
            if kind == "number" and tok.is_number and digits and not _is_year(digits.group(0)):
                found.append(Target(s, tok.start, tok.start + digits.end()))
            elif kind == "date" and (_is_year(surface) or surface in MONTHS[language]
                                     or surface.lower() in MONTHS[language]):
                found.append(Target(s, tok.start, tok.end))
            elif kind == "entity" and surface in names and not (s == 0 and i == 0) \
                    and surface not in MONTHS[language]:
                found.append(Target(s, tok.start, tok.end))
    return found


def new_number(text: str, rng: random.Random) -> str:
    if re.fullmatch(r"\d{1,3}(,\d{3})+", text):
        value = int(text.replace(",", ""))
        return f"{max(1, value + rng.choice([-1, 1]) * max(1, value // rng.choice([2, 3, 4, 10]))):,}"
    if re.fullmatch(r"\d+", text):
        value = int(text)
        new = value + rng.choice([1, 2, 3, 5, 10, value or 1]) * (1 if value < 2 or rng.random() < 0.6 else -1)
        return str(new if new != value and new >= 0 else value + 1)
    # A decimal "3.5" / "3,5": change the last digit.
    last = int(text[-1])
    return text[:-1] + str((last + rng.randint(1, 9)) % 10)


def new_value(kind: str, surface: str, language: str, rng: random.Random, names: Sequence[str]) -> str | None:
    if kind == "number":
        return new_number(surface, rng)
    if kind == "date":
        if _is_year(surface):
            return str(int(surface) + rng.choice([-1, 1]) * rng.randint(1, 15))
        months = MONTHS[language]
        index = next(i for i, m in enumerate(months) if m.lower() == surface.lower())
        new = months[(index + rng.randint(1, 11)) % 12]
        return new if surface[0].islower() else new[0].upper() + new[1:]
    candidates = [n for n in names if n != surface]
    return rng.choice(candidates) if candidates else None


def swap(piece: Piece, target: Target, new_text: str, label: SpanLabel, kind: str) -> Piece:
    """`piece` with the target text replaced by `new_text`, which gets `label` and no facts."""
    seg = piece[target.segment]
    parts = [Segment(seg.text[:target.start], seg.label, seg.facts, seg.kind),
             Segment(new_text, label, seg.facts if label is SpanLabel.FACT else (), kind),
             Segment(seg.text[target.end:], seg.label, seg.facts, seg.kind)]
    return piece[:target.segment] + [p for p in parts if p.text] + piece[target.segment + 1:]



def strip_citations(piece: Piece) -> Piece:
    stripped = [replace(seg, text=CITATION.sub("", seg.text)) for seg in piece]
    return [seg for seg in stripped if seg.text]
