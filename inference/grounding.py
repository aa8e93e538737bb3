"""Sentence-level grounding signals: context chunks, per-sentence features, unsupported tokens.

Shared, unchanged, by data preparation (training pairs for the cross-encoder), the combiner's
training and the runtime `GroundingFactSpans` validator, so all three see the same numbers. No
torch, no model: the cross-encoder's entailment score enters as one more feature, filled in by
the caller (`NO_NLI` when no cross-encoder is used). The question is deliberately not a feature:
none of the judged training sets has one, so the combiner could not learn what it means.

- **Chunks**: the context cut at sentence boundaries into pieces of at most `CHUNK_WORDS` words
  (a longer sentence is cut at words), so a chunk plus one answer sentence fits a 128-token
  cross-encoder window. A sentence's evidence is its best chunk by shared content stems.
- **Features** (`FEATURE_NAMES`): the heuristic's lexical signals (weighted shared stems, numbers
  and names missing from the context, negation mismatch) plus best-chunk and bigram overlap,
  length, position, hedging, noise, language and the answer's mean support.
- **Unsupported tokens**: content tokens of a sentence whose stem the context never uses, merged
  into phrases; they narrow a flagged sentence to the words that carry the unsupported claim.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from . import heuristics
from .text import (NEGATIONS, Sentence, Token, is_known, language_of, plain_spelling, split_sentences, stems_of,
                   tokenize, unsupported_phrases)

if TYPE_CHECKING:
    from .case import Case

CHUNK_WORDS = 70  # ~90 WordPiece tokens: a chunk and a 30-token sentence fit 128 tokens
MAX_CHUNKS = 2000  # a 200k-character context has ~500 chunks; more are cut (stated in the output)
FEATURE_NAMES = (
    "support", "weighted_share", "content_share", "best_chunk_share", "bigram_share", "log_content_tokens",
    "unsupported_tokens", "numbers", "unsupported_numbers", "names", "unsupported_names", "negated",
    "negation_mismatch", "is_noise", "hedges", "position", "answer_sentences", "log_context_tokens",
    "is_russian", "longest_supported_run", "answer_mean_support", "nli",
)
NLI_FEATURE = FEATURE_NAMES.index("nli")
NO_NLI = -1.0  # the nli feature's value until a cross-encoder scores the sentence (trees split on it)
TASKS = ("QA", "Summary", "Data2txt")  # RAGTruth's task types; thresholds may differ per task
_SUMMARY_REQUEST = re.compile(r"\b(summar|overview|tl;?dr)|резюм|кратко|перескаж|обзор", re.IGNORECASE)
_KEY_VALUE_LINE = re.compile(r'^\s*"?[\w .\-]+"?\s*:\s*(\S.*)$')
# A structured record's values are short ("rating: 4.5"); a longer value is prose under a header
# ("passage 1: When, how much and how often Indianapolis has snow ...", "Speaker: ..." turns).
MAX_VALUE_WORDS = 8
_HEDGE = re.compile("|".join(heuristics.HEDGE_PATTERNS), re.IGNORECASE)
_WORD = re.compile(r"\S+")


def logit(p):
    """log(p / (1 - p)), p clipped to [1e-4, 1 - 1e-4] so a certain 0 or 1 stays finite (scalars or arrays)."""
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def task_of(question: str, context: str, declared: str | None = None) -> str:
    """The case's task type: `declared` (a case's `meta.task`) when it names one of TASKS, else
    Data2txt for structured context (JSON, or mostly "key: value" lines with short values; RAG
    passages under "passage 1:" headers are prose), Summary when the
    question asks for a summary or is empty, QA otherwise."""
    if declared in TASKS:
        return declared
    stripped = context.strip()
    lines = [line for line in stripped.splitlines() if line.strip()]
    if stripped[:1] in ("{", "[") or (lines and sum(_is_key_value(x) for x in lines) >= 0.6 * len(lines)):
        return "Data2txt"
    if not question.strip() or _SUMMARY_REQUEST.search(question):
        return "Summary"
    return "QA"


def task_of_case(case: "Case") -> str:
    """`task_of` for a case: its declared `meta.task`, else what its question and context say."""
    return task_of(case.question, case.context_text, str(case.meta.get("task", "")) or None)


def _is_key_value(line: str) -> bool:
    match = _KEY_VALUE_LINE.match(line)
    return bool(match) and len(match.group(1).split()) <= MAX_VALUE_WORDS


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str
    stems: frozenset[str]


@dataclass
class ContextIndex:
    """Everything about a context that every answer sentence is compared with; built once."""

    text: str
    stems: set[str]
    numbers: set[str]
    bigrams: set[tuple[str, str]]
    negated: bool
    chunks: list[Chunk]
    tokens: int
    truncated_chunks: int = 0
    fact_stems: list[frozenset[str]] = field(default_factory=list)  # per atomic fact (`heuristics.atomic_facts`)

    @classmethod
    def build(cls, context: str) -> "ContextIndex":
        # One tokenisation (Snowball stemming is the cost) serves stems, chunks and atomic facts.
        tokens = tokenize(context)
        content = [t.stem for t in tokens if not t.is_stopword]
        chunks = context_chunks(context, tokens=tokens)
        starts = [t.start for t in tokens]
        facts = [_content_stems_between(tokens, starts, f.start, f.end) for f in heuristics.atomic_facts(context)]
        return cls(text=context, stems=stems_of(tokens), numbers={t.stem for t in tokens if t.is_number},
                   bigrams=set(zip(content, content[1:])), negated=bool(NEGATIONS & {t.text for t in tokens}),
                   chunks=chunks[:MAX_CHUNKS], tokens=len(tokens), truncated_chunks=max(0, len(chunks) - MAX_CHUNKS),
                   fact_stems=facts)

    def best_chunks(self, stems: set[str], k: int = 1) -> list[Chunk]:
        """The `k` chunks sharing most of `stems` (earlier first on ties)."""
        if not self.chunks:
            return []
        scored = sorted(range(len(self.chunks)), key=lambda i: (-len(stems & self.chunks[i].stems), i))
        return [self.chunks[i] for i in scored[:k]]


def _content_stems_between(tokens: Sequence[Token], starts: Sequence[int], start: int, end: int) -> frozenset[str]:
    """Content stems of the tokens (sorted by offset, `starts` their offsets) that lie in [start, end)."""
    first, last = bisect_left(starts, start), bisect_left(starts, end)
    return frozenset(t.stem for t in tokens[first:last] if not t.is_stopword)


def context_chunks(context: str, max_words: int = CHUNK_WORDS, tokens: Sequence[Token] | None = None) -> list[Chunk]:
    """Consecutive sentences packed into chunks of at most `max_words` words (character offsets).

    `tokens`: the context's `tokenize` output when the caller has it (chunks end at whitespace, so
    a chunk's tokens are the context's tokens inside it)."""
    pieces: list[tuple[int, int]] = []
    for sentence in split_sentences(context):
        words = [(m.start() + sentence.start, m.end() + sentence.start) for m in _WORD.finditer(sentence.text)]
        for i in range(0, len(words), max_words):
            part = words[i:i + max_words]
            pieces.append((part[0][0], part[-1][1]))
    chunks, start, end, count = [], None, None, 0
    for piece_start, piece_end in pieces:
        words = len(_WORD.findall(context[piece_start:piece_end]))
        if start is not None and count + words > max_words:
            chunks.append((start, end))
            start, count = None, 0
        if start is None:
            start = piece_start
        end, count = piece_end, count + words
    if start is not None:
        chunks.append((start, end))
    tokens = tokenize(context) if tokens is None else tokens
    starts = [t.start for t in tokens]
    return [Chunk(s, e, context[s:e], _content_stems_between(tokens, starts, s, e)) for s, e in chunks]


def _is_name(token: Token) -> bool:
    """Capitalised inside its sentence (offsets are sentence-relative: 0 is the sentence start)."""
    return token.is_capitalized and not token.is_number and token.start != 0


@dataclass
class SentenceSignals:
    """One answer sentence, its features and its evidence chunk."""

    sentence: Sentence
    features: np.ndarray  # float32, FEATURE_NAMES order; nli = NO_NLI until a cross-encoder fills it
    evidence: str  # the best chunk's text ("" without context)
    is_noise: bool
    evidence_stems: frozenset[str] = frozenset()  # the best chunk's content stems
    tokens: list[Token] = field(default_factory=list)
    supported: list[bool] = field(default_factory=list)  # per token: its stem (number) occurs in the context

    @property
    def unsupported(self) -> list[tuple[int, int]]:
        """Unsupported phrases (answer offsets) at the default gap of one stopword."""
        return self.phrases()

    def phrases(self, max_gap: int = 1) -> list[tuple[int, int]]:
        """Unsupported phrases merged across up to `max_gap` stopwords (answer offsets)."""
        return unsupported_phrases(self.tokens, self.supported, self.sentence.start, max_gap)


def sentence_signals(answer: str, context: ContextIndex) -> list[SentenceSignals]:
    """Features of every answer sentence against the context (noise sentences included, flagged)."""
    sentences = split_sentences(answer)
    is_russian = float(language_of(answer) == "ru")
    signals: list[SentenceSignals] = []
    for index, sentence in enumerate(sentences):
        tokens = tokenize(sentence.text)
        content = [t for t in tokens if not t.is_stopword]
        stems = {t.stem for t in content}
        supported = [t.stem in context.numbers if t.is_number else is_known(t, context.stems) for t in tokens]
        content_supported = [ok for t, ok in zip(tokens, supported) if not t.is_stopword]
        total = sum(heuristics.claim_weight(t) for t in content)
        found = sum(heuristics.claim_weight(t) for t, ok in zip(content, content_supported) if ok)
        weighted = found / total if total else 1.0
        best = context.best_chunks(stems, 1)
        best_share = len(stems & best[0].stems) / len(stems) if best and stems else 0.0
        pairs = list(zip([t.stem for t in content], [t.stem for t in content][1:]))
        bigram_share = sum(p in context.bigrams for p in pairs) / len(pairs) if pairs else weighted
        names = [t for t in content if _is_name(t)]
        numbers = [t for t in content if t.is_number]
        negated = bool(NEGATIONS & {t.text for t in tokens})
        run = longest = 0
        for ok in content_supported:
            run = run + 1 if ok else 0
            longest = max(longest, run)
        is_noise = heuristics.is_noise_sentence(sentence)
        missing_number = any(t.is_number and not ok for t, ok in zip(content, content_supported))
        support = 1.0 if is_noise else heuristics.capped_support(weighted, missing_number,
                                                                  negated and not context.negated)
        features = [
            support, weighted, sum(content_supported) / len(content) if content else 1.0, best_share, bigram_share,
            math.log1p(len(content)), float(len(content) - sum(content_supported)), float(len(numbers)),
            float(sum(1 for t, ok in zip(content, content_supported) if t.is_number and not ok)),
            float(len(names)), float(sum(1 for t, ok in zip(content, content_supported) if _is_name(t) and not ok)),
            float(negated), float(negated and not context.negated), float(is_noise),
            float(len(_HEDGE.findall(plain_spelling(sentence.text)))), index / max(1, len(sentences) - 1),
            float(len(sentences)),
            math.log1p(context.tokens), is_russian, longest / len(content) if content else 1.0, 0.0, NO_NLI,
        ]
        signals.append(SentenceSignals(
            sentence=sentence, features=np.asarray(features, dtype=np.float32),
            evidence=best[0].text if best else "", is_noise=is_noise,
            evidence_stems=best[0].stems if best else frozenset(),
            tokens=tokens, supported=supported))
    claims = [s for s in signals if not s.is_noise]
    mean_support = float(np.mean([s.features[0] for s in claims])) if claims else 1.0
    for s in signals:
        s.features[FEATURE_NAMES.index("answer_mean_support")] = mean_support
    return signals
