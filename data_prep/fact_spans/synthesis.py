"""Synthetic labelled answers from reading-comprehension contexts.

An answer is assembled from pieces whose labels are known by construction, so every character
offset is exact: sentences copied (or lightly paraphrased: parentheticals dropped) from the
context are FACT and map to the context's atomic facts; injected hallucinations of the kinds real
models produce are HALLUCINATION; filler phrases around the content are NOISE.

Hallucination kinds (see `INJECTORS`): `number` (a changed number), `date` (a shifted year or
another month), `entity` (a capitalised name/place swapped for one from another context),
`negation` (a copied sentence negated: the whole sentence is HALLUCINATION), `borrowed` (a
sentence from another context), `extra` (an unsupported templated sentence). A swap labels only
the changed word; a negated, borrowed or extra sentence is labelled whole.

Counterfactual pairs: one value of the context is changed; the answer that follows the changed
context is FACT, the answer that repeats the original (world) value is HALLUCINATION there.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Sequence

from autovalidators.inference.text import NEGATIONS, content_stems, split_sentences, tokenize

from .atomic_facts import FactSpan, split_facts
from .converters import ReadingItem
from .noise import CLOSERS, OPENERS
from .perturb import (CITATION, PARENTHETICAL, Piece, Segment, new_value, proper_names, strip_citations, swap,
                      targets)
from .schema import AtomicFact, CharRange, Origin, SpanLabel, SpanRecord, TaskType, fill_spans

EXTRA_TEMPLATES = {
    "en": ["{entity} was later awarded a national prize for this work in {year}.",
           "The project cost about {number} million dollars.",
           "Critics at the time called it the most important event of the decade.",
           "This was confirmed by an official report published in {year}.",
           "Around {number} people took part in it."],
    "ru": ["В {year} году {entity} получил за это национальную премию.",
           "Проект обошёлся примерно в {number} миллионов долларов.",
           "Современники называли это важнейшим событием десятилетия.",
           "Это подтвердил официальный доклад, опубликованный в {year} году.",
           "В этом участвовало около {number} человек."],
}
_AUX_EN = re.compile(r"\b(is|was|are|were|has|have|had|can|could|will|would|did|does)\b(?! not\b)")
_VERB_RU = re.compile(r"(?<![\w-])(?:является|являлся|являлась|был|была|было|были|[а-яё]{3,}(?:ал|ял|ил|ла|ли|ло|ет|ит|ют|ят))\b")


# ------------------------------------------------------------------------------------ the synthesiser


@dataclass(frozen=True)
class SynthesisSettings:
    hallucination_rate: float = 0.5  # share of answers with at least one injected hallucination
    second_hallucination_rate: float = 0.25  # of those, share that get a second one
    kind_weights: tuple[tuple[str, float], ...] = (("number", 1.0), ("date", 1.0), ("entity", 1.0),
                                                   ("negation", 1.0), ("borrowed", 1.0), ("extra", 1.0))
    opener_rate: float = 0.3
    closer_rate: float = 0.2
    paraphrase_rate: float = 0.3
    short_answer_rate: float = 0.15
    max_extra_sentences: int = 2
    max_answer_words: int = 100  # keeps answer + context inside a 512-token window


class Synthesizer:
    """Builds labelled answers for the reading items of one split (borrowing stays in the split)."""

    def __init__(self, items: Sequence[ReadingItem], settings: SynthesisSettings, seed: int) -> None:
        self.settings = settings
        self.rng = random.Random(seed)
        self.items = list(items)
        self._facts: dict[str, list[FactSpan]] = {}
        # Proper names and other contexts' sentences, per language, for entity swaps and borrowing.
        self.names: dict[str, list[str]] = {"en": [], "ru": []}
        self.sentences: dict[str, list[tuple[str, str]]] = {"en": [], "ru": []}
        seen: set[str] = set()
        for item in self.items:
            if item.context in seen:
                continue
            seen.add(item.context)
            for sentence in split_sentences(item.context):
                if 4 <= len(sentence.text.split()) <= 40:
                    self.sentences[item.language].append((item.context, sentence.text))
            self.names[item.language].extend(proper_names(item.context))
        self.names = {lang: sorted(set(n)) for lang, n in self.names.items()}

    def facts(self, context: str) -> list[FactSpan]:
        if context not in self._facts:
            self._facts[context] = split_facts(context)
        return self._facts[context]

    @staticmethod
    def context_names(context: str) -> set[str]:
        return set(proper_names(context))

    def other_names(self, context: str, language: str, count: int = 20) -> list[str]:
        """A few proper names from other contexts of the split that this context does not use."""
        pool, own = self.names[language], self.context_names(context)
        picks = [pool[self.rng.randrange(len(pool))] for _ in range(count)] if pool else []
        return [n for n in picks if n not in own and n not in context]

    # -- pieces copied from the context

    def sentence_piece(self, context: str, start: int, end: int) -> Piece:
        """The context text [start, end) as segments, one per fact it overlaps."""
        piece: Piece = []
        cursor = start
        for f, fact in enumerate(self.facts(context)):
            if fact.end <= start or fact.start >= end:
                continue
            a, b = max(fact.start, start), min(fact.end, end)
            if a > cursor:
                piece.append(Segment(context[cursor:a]))
            piece.append(Segment(context[a:b], facts=(f,)))
            cursor = b
        if cursor < end:
            piece.append(Segment(context[cursor:end]))
        return piece

    def _paraphrase(self, piece: Piece, keep: str) -> Piece:
        out = [replace(seg, text=PARENTHETICAL.sub("", seg.text)) for seg in piece]
        text = "".join(seg.text for seg in out)
        # Dropping a parenthetical must not drop the gold answer or leave a sentence without words.
        if keep and keep not in text or not content_stems(text):
            return piece
        return [seg for seg in out if seg.text]

    # -- injections: each returns the new pieces, or None when the kind does not apply

    def _inject(self, kind: str, pieces: list[Piece], item: ReadingItem) -> list[Piece] | None:
        rng, lang = self.rng, item.language
        if kind in ("number", "date", "entity"):
            options = [(p, t) for p, piece in enumerate(pieces) for t in targets(piece, kind, lang)]
            names = self.other_names(item.context, lang)
            rng.shuffle(options)
            for p, target in options[:5]:
                seg = pieces[p][target.segment]
                new = new_value(kind, seg.text[target.start:target.end], lang, rng, names)
                if new and new not in item.context.split():
                    return pieces[:p] + [swap(pieces[p], target, new, SpanLabel.HALLUCINATION, kind)] + pieces[p + 1:]
            return None
        if kind == "negation":
            order = list(range(len(pieces)))
            rng.shuffle(order)
            for p in order:
                text = "".join(s.text for s in pieces[p])
                if any(t.text in NEGATIONS for t in tokenize(text)):
                    continue
                match = (_AUX_EN if lang == "en" else _VERB_RU).search(text)
                if match is None:
                    continue
                negated = text[:match.end()] + " not" + text[match.end():] if lang == "en" \
                    else text[:match.start()] + "не " + text[match.start():]
                return pieces[:p] + [[Segment(negated, SpanLabel.HALLUCINATION, (), "negation")]] + pieces[p + 1:]
            return None
        if kind == "borrowed":
            context_stems = content_stems(item.context)
            for _ in range(10):
                other, sentence = rng.choice(self.sentences[lang]) if self.sentences[lang] else (item.context, "")
                stems = content_stems(sentence)
                if other != item.context and stems and len(stems & context_stems) / len(stems) < 0.3:
                    new = [Segment(CITATION.sub("", sentence), SpanLabel.HALLUCINATION, (), "borrowed")]
                    at = rng.randint(1, len(pieces))
                    return pieces[:at] + [new] + pieces[at:]
            return None
        if kind == "extra":
            entities = sorted(self.context_names(item.context)) or ["It"]
            template = rng.choice(EXTRA_TEMPLATES[lang])
            sentence = template.format(entity=rng.choice(entities), year=rng.randint(1900, 2020),
                                       number=rng.choice([12, 40, 75, 150, 300, 2500]))
            return pieces + [[Segment(sentence, SpanLabel.HALLUCINATION, (), "extra")]]
        raise ValueError(f"unknown hallucination kind {kind!r}")

    # -- assembly

    def content_pieces(self, item: ReadingItem, context: str) -> list[Piece]:
        """Copied sentences: the one holding the gold answer first, then up to N others in order."""
        rng, s = self.rng, self.settings
        sentences = split_sentences(context)
        gold = next((x for x in sentences if x.start <= item.answer_start < x.end), sentences[0])
        # A gold sentence longer than the answer budget (run-on Wikipedia markup) gives the short form.
        if rng.random() < s.short_answer_rate or len(gold.text.split()) > s.max_answer_words:
            fact = next((f for f, x in enumerate(self.facts(context))
                         if x.start <= item.answer_start < x.end), None)
            return [[Segment(item.answer.strip(" .") + ".", facts=(fact,) if fact is not None else ())]]
        others = [x for x in sentences if x is not gold and len(x.text.split()) >= 3]
        chosen = sorted(rng.sample(others, min(len(others), rng.randint(0, s.max_extra_sentences))),
                        key=lambda x: x.start)
        budget, kept = s.max_answer_words - len(gold.text.split()), []
        for sentence in chosen:
            if len(sentence.text.split()) <= budget:
                kept.append(sentence)
                budget -= len(sentence.text.split())
        chosen = kept
        pieces = []
        for sentence in [gold] + chosen:
            piece = strip_citations(self.sentence_piece(context, sentence.start, sentence.end))
            if rng.random() < s.paraphrase_rate:
                piece = self._paraphrase(piece, item.answer if sentence is gold else "")
            pieces.append(piece)
        return pieces

    def _wrap_noise(self, pieces: list[Piece], language: str) -> list[Piece]:
        rng, s = self.rng, self.settings
        if rng.random() < s.opener_rate:
            pieces = [[Segment(rng.choice(OPENERS[language]), SpanLabel.NOISE, (), "opener")]] + pieces
        if rng.random() < s.closer_rate:
            pieces = pieces + [[Segment(rng.choice(CLOSERS[language]), SpanLabel.NOISE, (), "closer")]]
        return pieces

    def _pick_kinds(self) -> list[str]:
        rng, s = self.rng, self.settings
        if rng.random() >= s.hallucination_rate:
            return []
        kinds, weights = zip(*s.kind_weights)
        count = 2 if rng.random() < s.second_hallucination_rate else 1
        return rng.choices(list(kinds), weights=list(weights), k=count)

    def answer(self, item: ReadingItem, index: int) -> SpanRecord:
        """One synthetic answer for `item`; `index` tells apart several answers per item."""
        pieces = self.content_pieces(item, item.context)
        for kind in self._pick_kinds():
            # A kind that does not apply (no number in the answer, ...) falls back to the others in
            # random order; "extra" always applies, so it comes last.
            others = [k for k in INJECTORS if k not in (kind, "extra")]
            self.rng.shuffle(others)
            for candidate in [kind] + others + ["extra"]:
                injected = self._inject(candidate, pieces, item)
                if injected is not None:
                    pieces = injected
                    break
        return self.record(item, item.context, self._wrap_noise(pieces, item.language),
                           f"{item.id}-a{index}", Origin.SYNTHETIC)

    def counterfactual(self, item: ReadingItem, index: int) -> list[SpanRecord]:
        """Two answers over a context with one value changed: one follows it, one follows the world."""
        rng, lang = self.rng, item.language
        sentences = split_sentences(item.context)
        gold = next((x for x in sentences if x.start <= item.answer_start < x.end), sentences[0])
        if len(gold.text.split()) > self.settings.max_answer_words:
            return []
        piece = self.sentence_piece(item.context, gold.start, gold.end)
        names = self.other_names(item.context, lang)
        # A changed number or date reads like a real counterfactual; a swapped name is the fallback.
        for kind in rng.sample(["number", "date"], 2) + ["entity"]:
            found = targets(piece, kind, lang)
            if not found:
                continue
            target = rng.choice(found)
            seg = piece[target.segment]
            original = seg.text[target.start:target.end]
            new = new_value(kind, original, lang, rng, names)
            if not new or new == original:
                continue
            # The target's offset in the context: the piece copies the context from gold.start on.
            at = gold.start + sum(len(s.text) for s in piece[:target.segment]) + target.start
            changed = item.context[:at] + new + item.context[at + len(original):]
            cf_piece = self.sentence_piece(changed, gold.start, gold.end + len(new) - len(original))
            cf_target = next((t for t in targets(cf_piece, kind, lang)
                              if gold.start + sum(len(s.text) for s in cf_piece[:t.segment]) + t.start == at), None)
            if cf_target is None:  # the new value tokenises differently; try another kind
                continue
            world = swap(cf_piece, cf_target, original, SpanLabel.HALLUCINATION, f"counterfactual_{kind}")
            base = f"{item.id}-cf{index}"
            meta = {"changed": f"{original} -> {new}"}
            return [self.record(item, changed, self._wrap_noise([strip_citations(cf_piece)], lang),
                                f"{base}-context", Origin.COUNTERFACTUAL, meta),
                    self.record(item, changed, self._wrap_noise([strip_citations(world)], lang),
                                f"{base}-world", Origin.COUNTERFACTUAL, meta)]
        return []

    def record(self, item: ReadingItem, context: str, pieces: list[Piece], record_id: str,
               origin: Origin, meta: dict[str, str] | None = None) -> SpanRecord:
        """Joins pieces with spaces and turns segment labels and facts into exact offsets."""
        answer, labelled, fact_ranges = "", [], {}
        for p, piece in enumerate(pieces):
            if p:
                answer += " "
            for seg in piece:
                start, answer = len(answer), answer + seg.text
                labelled.append((start, len(answer), seg.label, seg.kind))
                for f in seg.facts:
                    fact_ranges.setdefault(f, []).append((start, len(answer)))
        facts = []
        for f, fact in enumerate(self.facts(context)):
            ranges = [CharRange(start=a, end=b) for a, b in _merge(fact_ranges.get(f, []), answer)]
            facts.append(AtomicFact(start=fact.start, end=fact.end, text=fact.text, answer_spans=ranges))
        return SpanRecord(
            id=record_id, context=context, question=item.question, answer=answer,
            spans=fill_spans(answer, labelled, default=SpanLabel.FACT), facts=facts, source=item.source,
            group=item.group_keys[0], language=item.language, task_type=TaskType.QA, origin=origin,
            provenance=item.provenance, meta={"gold_answer": item.answer, **(meta or {})},
        )


def _merge(ranges: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """Adjacent ranges (gap of whitespace only) merged; edges trimmed of whitespace."""
    merged: list[list[int]] = []
    for a, b in sorted(ranges):
        if merged and not text[merged[-1][1]:a].strip():
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = []
    for a, b in merged:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


INJECTORS: tuple[str, ...] = ("number", "date", "entity", "negation", "borrowed", "extra")
