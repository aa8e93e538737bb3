"""Validators built from the lexical heuristics: no model, milliseconds per case.

They return the same output types as the trained validators, so the gate cannot tell them apart
except through `source` and `meta.models`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Sequence

from .. import heuristics
from ..case import Case
from ..grounding import task_of_case
from ..text import language_of, plain_spelling
from ..results import FactSpansOutput, QARelevanceOutput, Span, SpanLabel, ToneOutput
from .base import ValidatorInfo, asks_a_question

if TYPE_CHECKING:
    from ..embeddings import SentenceEmbedder

HEURISTIC_VERSION = "heuristic-1"
# Sentence support below this marks the sentence a hallucination.
SUPPORTED_AT = 0.6
# Per task type (`grounding.task_of_case`), the support that replaces SUPPORTED_AT. Data-to-text:
# an answer restates a record's attributes in its own words ("offers a cozy atmosphere" for
# "ambience: cozy"), so a sentence sharing half its weighted words with the record is still mostly
# a paraphrase. Chosen on dev (`benchmark heuristic-spans --split dev`, support thresholds 0.45 to
# 0.8, each above the caps of `heuristics.capped_support`, which must keep flagging): 0.45 had the
# best mean of example and character F1 on RAGTruth Data2txt (0.817 / 0.286; 0.810 / 0.211 at 0.6).
# QA and summaries keep 0.6, as their judged sets disagree on which way to move it (XSumFaith and
# WiCE gain above it, RAGTruth and FaithBench below).
TASK_SUPPORTED_AT: dict[str, float] = {"Data2txt": 0.45}
SPAN_MODES = ("sentence", "phrases", "named_phrases")
# Per answer language, the span mode and phrase gap that replace the default. Russian: the only
# Russian spans this repository has (entity and number swaps over XQuAD-ru and TyDi-ru contexts,
# the kind of Russian error issue 24 measures) are a few words inside a long sentence, and marking
# the unsupported phrases found them far better than marking the sentence (dev character F1
# 0.777 at a gap of four stopwords vs 0.201; `benchmark heuristic-spans --split dev`). English keeps
# the whole sentence: its judged sets are real answers, where phrases lost (README, fact spans).
LANGUAGE_SPAN_MODES: dict[str, tuple[str, int]] = {"ru": ("phrases", 4)}
# Answer languages in which a sentence that only says what the passage lacks ("В отрывке точная дата
# выпуска не указана.", `heuristics.says_what_the_source_lacks`) is noise, not an unsupported claim.
# Russian: on the written answers' dev half it stopped 5 of 14 flags on faithful answers and served no
# wrong one (`benchmark heuristic-spans --split dev`, written/ru). English keeps reading such
# sentences as claims: the same reading was scored held out there and did not carry (FaithBench
# summaries that say what an article lacks are hallucinations; training/README.md, fact spans).
SOURCE_LACKS_LANGUAGES: frozenset[str] = frozenset({"ru"})


class HeuristicFactSpans:
    """Sentence-level grounding from shared content stems, exact numbers and negations.

    A sentence is flagged when its support is below `supported_at`, or its task type's value in
    `task_supported_at` (default TASK_SUPPORTED_AT; pass {} for one value everywhere); the
    threshold moves which answers are flagged and their worst span's score, not their precision.
    `span_mode` says which of a flagged sentence's characters become HALLUCINATION: all of them
    ("sentence"), or only its unsupported phrases, content words the context lacks merged across
    up to `phrase_gap` stopwords ("phrases"), or only those of them holding an unsupported number
    or name ("named_phrases"); the whole sentence when no phrase qualifies (every word in the
    context, e.g. a negation the context never makes).
    `language_modes` overrides the mode and gap per answer language (`language_of`); pass {} for
    one mode in every language. A span mode changes no score, and so no gate decision.
    """

    info = ValidatorInfo("fact_spans", "heuristic", HEURISTIC_VERSION)

    def __init__(self, span_mode: str = "sentence", phrase_gap: int = 1,
                 language_modes: dict[str, tuple[str, int]] | None = None,
                 supported_at: float = SUPPORTED_AT, task_supported_at: dict[str, float] | None = None,
                 source_lacks_languages: frozenset[str] = SOURCE_LACKS_LANGUAGES):
        self.source_lacks_languages = frozenset(source_lacks_languages)
        self.language_modes = dict(LANGUAGE_SPAN_MODES if language_modes is None else language_modes)
        self.supported_at = supported_at
        self.task_supported_at = dict(TASK_SUPPORTED_AT if task_supported_at is None else task_supported_at)
        strongest_cap = max(heuristics.MISSING_CLAIM_CAP, heuristics.NEGATION_CAP)
        for value in [supported_at, *self.task_supported_at.values()]:
            if not strongest_cap < value <= 1.0:
                raise ValueError(f"supported_at {value}: must lie in ({strongest_cap}, 1], or a number, name or "
                                 "negation the context lacks would no longer flag its sentence")
        for mode in [span_mode, *(m for m, _ in self.language_modes.values())]:
            if mode not in SPAN_MODES:
                raise ValueError(f"span_mode {mode!r}: choose from {', '.join(SPAN_MODES)}")
        self.span_mode, self.phrase_gap = span_mode, phrase_gap

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        return [self._one(case) for case in cases]

    def _one(self, case: Case) -> FactSpansOutput:
        context = case.context_text
        if not context.strip():
            # Nothing to ground against: grounding does not apply, abstention rules decide.
            return FactSpansOutput(applies=False)
        supports = heuristics.sentence_support(case.answer, context, case.question, self.source_lacks_languages)
        mode, gap = self.span_mode, self.phrase_gap
        if self.language_modes:
            mode, gap = self.language_modes.get(language_of(case.answer), (mode, gap))
        supported_at = self.supported_at
        if self.task_supported_at:
            supported_at = self.task_supported_at.get(task_of_case(case), supported_at)
        spans = []
        weighted_support = weighted_total = 0.0
        for item in supports:
            s = item.sentence
            if item.is_noise:
                spans.append(Span(s.start, s.end, SpanLabel.NOISE, 0.9, s.text))
                continue
            length = float(s.end - s.start)
            weighted_total += length
            weighted_support += length * item.support
            if item.support >= supported_at:
                spans.append(Span(s.start, s.end, SpanLabel.FACT, item.support, s.text))
            else:
                spans.extend(self._flagged(case.answer, item, mode, gap))
        precision = weighted_support / weighted_total if weighted_total else 1.0
        hallucination_score = max(
            (sp.score for sp in spans if sp.label is SpanLabel.HALLUCINATION), default=0.0
        )
        return FactSpansOutput(
            applies=True,
            hallucinated=any(sp.label is SpanLabel.HALLUCINATION for sp in spans),
            hallucination_score=hallucination_score,
            precision=precision,
            recall=heuristics.fact_recall(case.answer, context),
            spans=tuple(spans),
        )

    @staticmethod
    def _flagged(answer: str, item: heuristics.SentenceSupport, mode: str, gap: int) -> list[Span]:
        s = item.sentence
        ranges = item.unsupported_phrases(gap, named_only=mode == "named_phrases") if mode != "sentence" else []
        return flagged_spans(answer, s.start, s.end, ranges or [(s.start, s.end)], 1.0 - item.support)


def flagged_spans(answer: str, start: int, end: int, ranges: Sequence[tuple[int, int]], p: float) -> list[Span]:
    """A flagged sentence `answer[start:end]` as HALLUCINATION over `ranges` (P(unsupported) `p`)
    and FACT over the text between them."""
    spans, position = [], start
    for first, last in ranges:
        if answer[position:first].strip():
            spans.append(_trimmed(answer, position, first, SpanLabel.FACT, 1.0 - p))
        spans.append(Span(first, last, SpanLabel.HALLUCINATION, p, answer[first:last]))
        position = last
    if answer[position:end].strip():
        spans.append(_trimmed(answer, position, end, SpanLabel.FACT, 1.0 - p))
    return spans


def _trimmed(answer: str, start: int, end: int, label: SpanLabel, score: float) -> Span:
    piece = answer[start:end]
    left = len(piece) - len(piece.lstrip())
    return Span(start + left, start + len(piece.rstrip()), label, score, piece.strip())


class HeuristicQARelevance:
    """Lexical question–answer overlap, or the larger of it and an embedding similarity.

    Answers too short to judge lexically score a neutral 0.5.
    """

    threshold = 0.5

    def __init__(self, embedder: "SentenceEmbedder | None" = None):
        self.embedder = embedder
        version = HEURISTIC_VERSION + ("+minilm-embeddings" if embedder else "")
        self.info = ValidatorInfo("qa_relevance", "heuristic", version)

    def predict(self, cases: Sequence[Case]) -> list[QARelevanceOutput]:
        scores = [heuristics.lexical_relevance(c.question, c.answer) for c in cases]
        if self.embedder is not None and cases:
            semantic = self.embedder.relevance([c.question for c in cases], [c.answer for c in cases])
            scores = [max(lexical, float(s)) for lexical, s in zip(scores, semantic)]
        return [QARelevanceOutput(applies=asks_a_question(c), score=score, relevant=score >= self.threshold)
                for c, score in zip(cases, scores)]


_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "@": "a", "$": "s", "ё": "е"})


# Latin letters that look Cyrillic: "xуйня" typed with a Latin x is still мат.
_LATIN_TO_CYRILLIC = str.maketrans("aceopxykmthb", "асеорхукмтнв")
_MIXED_WORD = re.compile(r"\w*[\u0400-\u04FF]\w*")


def _cyrillic_lookalikes(match: re.Match) -> str:
    word = match.group(0)
    return word.translate(_LATIN_TO_CYRILLIC) if re.search(r"[a-z]", word) else word


def normalize_for_lexicon(text: str) -> str:
    """Lower-case, drop stress marks and invisible characters ("ху́й", "ху\u00adй"), read a typographic
    apostrophe as one ("I’ll"), undo leetspeak and Latin look-alikes in Cyrillic words, drop masking
    symbols, collapse stretched letters."""
    text = plain_spelling(text).lower().replace("’", "'")
    text = _MIXED_WORD.sub(_cyrillic_lookalikes, text).translate(_LEET)
    text = re.sub(r"(?<=\w)[*#]+(?=\w)", "", text)  # f**k -> fk, handled by patterns below
    return re.sub(r"(\w)\1{2,}", r"\1", text)  # fuuuuck -> fuck


@lru_cache(maxsize=1)
def tone_lexicon() -> dict[str, re.Pattern]:
    """label -> one compiled pattern, from `lexicons/tone.txt` (label<TAB>regex per line)."""
    patterns: dict[str, list[str]] = {}
    text = resources.files("autovalidators.inference").joinpath("lexicons/tone.txt").read_text("utf-8")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, pattern = line.split("\t", 1)
        patterns.setdefault(label.strip(), []).append(pattern.strip())
    return {label: re.compile("|".join(f"(?:{p})" for p in ps)) for label, ps in patterns.items()}


class HeuristicTone:
    """Lexicon matches per label (en and ru, leetspeak and transliteration normalised)."""

    info = ValidatorInfo("tone", "heuristic", HEURISTIC_VERSION)
    labels = ("toxicity", "obscenity", "insult", "threat", "identity_hate", "politics")
    hit_score, miss_score, threshold = 0.9, 0.05, 0.5

    def predict(self, cases: Sequence[Case]) -> list[ToneOutput]:
        lexicon = tone_lexicon()
        outputs = []
        for case in cases:
            text = normalize_for_lexicon(case.answer)
            scores = {
                label: self.hit_score if label in lexicon and lexicon[label].search(text) else self.miss_score
                for label in self.labels
            }
            # Toxicity is the umbrella: any abusive label makes the text toxic.
            abusive = ("obscenity", "insult", "threat", "identity_hate")
            scores["toxicity"] = max(scores["toxicity"], *(scores[label] for label in abusive))
            flagged = tuple(label for label, p in scores.items() if p >= self.threshold)
            outputs.append(ToneOutput(applies=bool(case.answer.strip()), scores=scores, flagged=flagged,
                                      thresholds={label: self.threshold for label in self.labels}))
        return outputs
