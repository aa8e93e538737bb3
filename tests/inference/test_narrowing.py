"""Token-level narrowing (issue 12): word features of a flagged sentence and the marked ranges."""

from __future__ import annotations

import numpy as np
import pytest

from autovalidators.inference.grounding import ContextIndex, sentence_signals
from autovalidators.inference.narrowing import TOKEN_FEATURE_NAMES, marked_ranges, token_features

CONTEXT = "The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall."
COLUMN = {name: i for i, name in enumerate(TOKEN_FEATURE_NAMES)}


def _claim(answer: str):
    index = ContextIndex.build(CONTEXT)
    return sentence_signals(answer, index)[0], index


def test_one_row_per_word_with_its_support_and_neighbourhood():
    signal, index = _claim("The Eiffel Tower was completed in 1925 in Berlin.")
    rows = token_features(signal, index, 0.8)
    words = [t.text for t in signal.tokens]
    assert rows.shape == (len(words), len(TOKEN_FEATURE_NAMES)) and rows.dtype == np.float32
    by_word = dict(zip(words, rows))
    assert by_word["1925"][COLUMN["unsupported_number"]] == 1 and by_word["1925"][COLUMN["supported"]] == 0
    assert by_word["berlin"][COLUMN["unsupported_name"]] == 1 and by_word["berlin"][COLUMN["in_phrase"]] == 1
    assert by_word["eiffel"][COLUMN["supported"]] == 1 and by_word["eiffel"][COLUMN["in_evidence"]] == 1
    assert by_word["tower"][COLUMN["bigram_before"]] == 1  # "eiffel tower" occurs in the context
    assert by_word["the"][COLUMN["stopword"]] == 1 and by_word["the"][COLUMN["bigram_before"]] == 0.5
    assert by_word["1925"][COLUMN["distance_to_unsupported"]] == 0
    assert by_word["eiffel"][COLUMN["distance_to_unsupported"]] > 0
    # the sentence's P(unsupported) enters as a logit, the same for every word
    assert np.allclose(rows[:, COLUMN["sentence_logit"]], np.log(0.8 / 0.2), atol=1e-5)


def test_a_sentence_without_words_has_no_rows():
    signal, index = _claim("...")
    assert token_features(signal, index, 0.5).shape == (0, len(TOKEN_FEATURE_NAMES))


def test_marked_ranges_merge_runs_across_the_gap_and_fall_back_to_the_best_word():
    answer = "It was completed in 1925 in Berlin by engineers."
    signal, _ = _claim(answer)
    words = [t.text for t in signal.tokens]
    scores = np.zeros(len(words))
    scores[words.index("1925")] = scores[words.index("berlin")] = 0.9
    text = lambda ranges: [answer[a:b] for a, b in ranges]  # noqa: E731
    assert text(marked_ranges(signal, scores, 0.5, gap=0)) == ["1925", "Berlin"]
    assert text(marked_ranges(signal, scores, 0.5, gap=1)) == ["1925 in Berlin"]
    low = np.full(len(words), 0.1)
    low[words.index("engineers")] = 0.3
    assert text(marked_ranges(signal, low, 0.5, gap=1)) == ["engineers"]  # flagged: never empty


@pytest.mark.parametrize("cut", [0.0, 0.2])
def test_marked_ranges_cover_the_sentence_when_every_word_is_marked(cut):
    answer = "Built in 1925 in Berlin."
    signal, _ = _claim(answer)
    ranges = marked_ranges(signal, np.full(len(signal.tokens), 0.5), cut, gap=0)
    assert [answer[a:b] for a, b in ranges] == ["Built in 1925 in Berlin"]
