"""Token-level narrowing: which words of a flagged sentence carry its unsupported claim.

A sentence flagged by the combiner is rarely wrong from its first word to its last: RAGTruth's
hallucination spans cover a few words ("in 2019", "the CDC"), XSumFaith's often most of a
one-sentence summary. A small learned token model (`narrower.onnx`, trained by
`training/grounding/narrower.py` on the span-labelled judged sets) scores every word of a flagged sentence
from the features below; words at or above the dev-chosen cut become HALLUCINATION, runs of them
merged across at most `gap` unmarked words. The sentence's own P(unsupported) is a feature, so a
confidently wrong sentence is marked broadly and a borderline one narrowly.

Shared, unchanged, by training and the runtime validator (no torch, no model here).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .grounding import FEATURE_NAMES, ContextIndex, SentenceSignals, logit

TOKEN_FEATURE_NAMES = (
    "sentence_logit", "nli", "stopword", "supported", "in_evidence", "number", "name", "unsupported_number",
    "unsupported_name", "window_unsupported", "bigram_before", "bigram_after", "position", "sentence_support",
    "log_chars", "distance_to_unsupported", "in_phrase",
)
WINDOW = 3  # content words either side whose support describes a word's neighbourhood
MAX_DISTANCE = 6  # words; farther from any unsupported content word counts the same
_NLI, _SUPPORT = FEATURE_NAMES.index("nli"), FEATURE_NAMES.index("support")


def token_features(signal: SentenceSignals, context: ContextIndex, unsupported: float) -> np.ndarray:
    """One row per word of the sentence (`signal.tokens`), TOKEN_FEATURE_NAMES order."""
    tokens, supported = signal.tokens, signal.supported
    if not tokens:
        return np.zeros((0, len(TOKEN_FEATURE_NAMES)), dtype=np.float32)
    content = [i for i, t in enumerate(tokens) if not t.is_stopword]
    unsupported_content = [i for i in content if not supported[i]]
    offset = signal.sentence.start
    phrases = signal.phrases(1)
    previous_content: list[int | None] = []
    last = None
    for i, token in enumerate(tokens):
        previous_content.append(last)
        last = i if not token.is_stopword else last
    next_content: list[int | None] = [None] * len(tokens)
    last = None
    for i in range(len(tokens) - 1, -1, -1):
        next_content[i] = last
        last = i if not tokens[i].is_stopword else last
    sentence_logit, nli = float(logit(unsupported)), float(signal.features[_NLI])
    sentence_support = float(signal.features[_SUPPORT])
    rows = []
    for i, token in enumerate(tokens):
        window = [j for j in content if j != i and abs(j - i) <= WINDOW]
        window_unsupported = sum(not supported[j] for j in window) / len(window) if window else 0.0
        before, after = previous_content[i], next_content[i]
        if token.is_stopword:  # a stopword's bigrams are not tracked: neither evidence for nor against
            bigram_before = bigram_after = 0.5
        else:
            bigram_before = float(before is not None and (tokens[before].stem, token.stem) in context.bigrams)
            bigram_after = float(after is not None and (token.stem, tokens[after].stem) in context.bigrams)
        distance = min((abs(j - i) for j in unsupported_content), default=MAX_DISTANCE)
        name = token.is_capitalized and not token.is_number and token.start != 0
        start, end = token.start + offset, token.end + offset
        rows.append([
            sentence_logit, nli, float(token.is_stopword), float(supported[i]), float(token.stem in signal.evidence_stems),
            float(token.is_number), float(name), float(token.is_number and not supported[i]),
            float(name and not supported[i]), window_unsupported, bigram_before, bigram_after,
            i / max(1, len(tokens) - 1), sentence_support, math.log1p(token.end - token.start),
            min(distance, MAX_DISTANCE) / MAX_DISTANCE, float(any(a <= start and end <= b for a, b in phrases)),
        ])
    return np.asarray(rows, dtype=np.float32)


def marked_ranges(signal: SentenceSignals, scores: Sequence[float], cut: float, gap: int) -> list[tuple[int, int]]:
    """Answer character ranges of the words scoring at least `cut`, runs merged across at most
    `gap` unmarked words; when no word reaches the cut, the best-scoring word (the sentence is
    flagged, so something in it is unsupported)."""
    if not signal.tokens:
        return [(signal.sentence.start, signal.sentence.end)]
    scores = np.asarray(scores, dtype=np.float64)
    marked = np.flatnonzero(scores >= cut)
    if not len(marked):
        marked = np.flatnonzero(scores >= scores.max())
    offset = signal.sentence.start
    ranges: list[tuple[int, int]] = []
    first = last = int(marked[0])
    for index in [*map(int, marked[1:]), None]:
        if index is not None and index - last - 1 <= gap:
            last = index
            continue
        ranges.append((signal.tokens[first].start + offset, signal.tokens[last].end + offset))
        if index is not None:
            first = last = index
    return ranges
