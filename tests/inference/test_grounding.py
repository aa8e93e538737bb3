"""Sentence-level grounding signals (`inference.grounding`, issue 12): context chunks, the context
index, per-sentence features by name, unsupported phrases, task types, and long contexts."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from autovalidators.inference import grounding
from autovalidators.inference.case import Case
from autovalidators.inference.grounding import (CHUNK_WORDS, FEATURE_NAMES, MAX_CHUNKS, NLI_FEATURE, NO_NLI, TASKS,
                                                ContextIndex, context_chunks, sentence_signals, task_of,
                                                unsupported_phrases)
from autovalidators.inference.text import content_stems, tokenize

CONTEXT = ("The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall, and it was designed by the "
           "engineer Gustave Eiffel. About 7 million people visit the tower every year.")
RU_CONTEXT = "Московский метрополитен открыт в 1935 году. Его длина составляет 450 километров."
F = {name: i for i, name in enumerate(FEATURE_NAMES)}


def _features(answer: str, context: str = CONTEXT) -> list[dict[str, float]]:
    return [dict(zip(FEATURE_NAMES, s.features.tolist())) for s in sentence_signals(answer, ContextIndex.build(context))]


def _long_context(sentences: int) -> str:
    return " ".join(f"Station {i} in the district of Town{i} opened in {1000 + i} with {i % 7 + 2} platforms."
                    for i in range(sentences))


# ---------------------------------------------------------------------------------------------- chunks

def _assert_chunks_cover(context: str, chunks, max_words: int) -> None:
    assert chunks == sorted(chunks, key=lambda c: c.start)
    for previous, chunk in zip(chunks, chunks[1:]):
        assert previous.end <= chunk.start
    for chunk in chunks:
        assert chunk.text == context[chunk.start:chunk.end] and chunk.text == chunk.text.strip()
        assert 1 <= len(chunk.text.split()) <= max_words
        # A token belongs to the chunk it starts in: a number and its scale word cut apart by a
        # chunk boundary ("7 | million") are one claim, kept whole in the first chunk.
        tokens = tokenize(context)
        starting_here = [t for t in tokens if chunk.start <= t.start < chunk.end]
        assert chunk.stems == frozenset(t.stem for t in starting_here if not t.is_stopword)
        if not any(t.start < chunk.end and t.end > chunk.start and not chunk.start <= t.start < t.end <= chunk.end
                   for t in tokens):  # no token cut by this chunk's edges
            assert chunk.stems == frozenset(content_stems(chunk.text))
    # Every word of the context lies inside exactly one chunk.
    for word in re.finditer(r"\S+", context):
        inside = [c for c in chunks if c.start <= word.start() and word.end() <= c.end]
        assert len(inside) == 1, word.group(0)


def test_a_number_cut_from_its_scale_word_by_a_chunk_boundary_counts_once_in_the_first_chunk():
    context = "Sales reached 7 million units."
    first, second = context_chunks(context, 3)
    assert (first.text, second.text) == ("Sales reached 7", "million units.")
    assert "7000000" in first.stems and "7" not in first.stems
    assert second.stems == frozenset({"unit"})


@pytest.mark.parametrize("max_words", [CHUNK_WORDS, 12, 5, 1])
def test_context_chunks_cover_the_context_within_the_word_limit(max_words):
    context = CONTEXT + "\n\nSecond passage here. " + " ".join(f"word{i}" for i in range(150)) + ". Last one."
    chunks = context_chunks(context, max_words)
    _assert_chunks_cover(context, chunks, max_words)
    if max_words == CHUNK_WORDS:
        assert len(chunks) >= 3  # the 150-word sentence alone needs three


def test_context_chunks_pack_sentences_and_handle_empty_text():
    assert context_chunks("") == [] and context_chunks("   \n\n ") == []
    one, = context_chunks(CONTEXT)  # 33 words: three sentences in one chunk
    assert (one.start, one.end) == (0, len(CONTEXT))
    pieces = context_chunks(CONTEXT, 12)
    assert len(pieces) > 1 and pieces[0].text.startswith("The Eiffel Tower was completed in 1889 in Paris.")


def test_context_index_build_and_best_chunks():
    context = "Alpha beta gamma. " * 2 + "Cats eat fish daily. " + "Dogs bark at 1889 night."
    index = ContextIndex.build(context)
    assert index.text == context and index.tokens == len(tokenize(context))
    assert index.numbers == {"1889"} and not index.negated
    assert ContextIndex.build("He did not go.").negated
    small = ContextIndex(text=context, stems=index.stems, numbers=index.numbers, bigrams=index.bigrams,
                         negated=False, chunks=context_chunks(context, 5), tokens=index.tokens)
    best, = small.best_chunks(content_stems("fish cats"), 1)
    assert best.text == "Cats eat fish daily."
    assert [c.text for c in small.best_chunks(content_stems("dogs 1889"), 2)][0] == "Dogs bark at 1889 night."
    # Ties go to the earlier chunk; k bounds the answer.
    assert small.best_chunks(set(), 2) == small.chunks[:2]
    assert len(small.best_chunks(content_stems("cats"), 10)) == len(small.chunks)
    assert ContextIndex.build("").best_chunks({"cat"}, 3) == []


# ------------------------------------------------------------------------------------------ features

def test_feature_vector_layout():
    signals = sentence_signals("The Eiffel Tower is in Paris. It is 330 metres tall.", ContextIndex.build(CONTEXT))
    assert len(signals) == 2
    for s in signals:
        assert s.features.dtype == np.float32 and s.features.shape == (len(FEATURE_NAMES),)
        assert s.features[NLI_FEATURE] == NO_NLI and FEATURE_NAMES[NLI_FEATURE] == "nli"
    assert [s.features[F["position"]] for s in signals] == [0.0, 1.0]
    assert all(s.features[F["answer_sentences"]] == 2 for s in signals)
    assert signals[0].evidence == CONTEXT


def test_copied_sentence_is_fully_supported():
    copied, = _features("The Eiffel Tower was completed in 1889 in Paris.")
    assert copied["support"] == 1.0 and copied["weighted_share"] == 1.0 and copied["bigram_share"] == 1.0
    assert copied["unsupported_tokens"] == 0 and copied["unsupported_numbers"] == 0 and copied["numbers"] == 1
    assert copied["longest_supported_run"] == 1.0 and copied["is_noise"] == 0 and copied["is_russian"] == 0


def test_swapped_number_is_an_unsupported_number_with_lower_support():
    copied, = _features("The Eiffel Tower was completed in 1889 in Paris.")
    answer = "The Eiffel Tower was completed in 1895 in Paris."
    swapped, = _features(answer)
    assert swapped["unsupported_numbers"] == 1 and swapped["numbers"] == 1
    assert swapped["support"] < copied["support"] and swapped["support"] <= 0.3 + 1e-6
    assert swapped["bigram_share"] < 1.0
    signal, = sentence_signals(answer, ContextIndex.build(CONTEXT))
    assert [answer[a:b] for a, b in signal.unsupported] == ["1895"]


def test_unknown_names_are_counted_and_merged_into_one_phrase():
    answer = "The tower was designed by Frank Lloyd Wright in Chicago."
    features, = _features(answer)
    assert features["unsupported_names"] == 4 and features["support"] < 0.5
    signal, = sentence_signals(answer, ContextIndex.build(CONTEXT))
    assert [answer[a:b] for a, b in signal.unsupported] == ["Frank Lloyd Wright in Chicago"]


def test_filler_sentence_is_noise_and_left_out_of_the_mean_support():
    answer = "Thank you for your question! The Eiffel Tower was completed in 1895 in Paris."
    signals = sentence_signals(answer, ContextIndex.build(CONTEXT))
    assert [s.is_noise for s in signals] == [True, False]
    noise, claim = (dict(zip(FEATURE_NAMES, s.features.tolist())) for s in signals)
    assert noise["is_noise"] == 1.0 and noise["support"] == 1.0 and claim["is_noise"] == 0.0
    assert noise["answer_mean_support"] == claim["answer_mean_support"] == pytest.approx(claim["support"])


def test_negation_mismatch():
    negated, = _features("The Eiffel Tower was not completed in 1889 in Paris.")
    assert negated["negated"] == 1 and negated["negation_mismatch"] == 1 and negated["support"] <= 0.4 + 1e-6
    both, = _features("The tower was not completed.", "The tower was not completed in 1889.")
    assert both["negated"] == 1 and both["negation_mismatch"] == 0 and both["support"] == 1.0
    plain, = _features("The Eiffel Tower was completed in 1889 in Paris.")
    assert plain["negated"] == 0 and plain["negation_mismatch"] == 0


def test_hedges_are_counted():
    hedged, = _features("The tower is probably about 330 metres tall and may be visited.")
    assert hedged["hedges"] == 2


def test_russian_answer():
    answer = "Московский метрополитен открыт в 1935 году. Его длина составляет 900 километров."
    signals = sentence_signals(answer, ContextIndex.build(RU_CONTEXT))
    copied, swapped = (dict(zip(FEATURE_NAMES, s.features.tolist())) for s in signals)
    assert copied["is_russian"] == swapped["is_russian"] == 1.0
    assert copied["support"] == 1.0 and copied["unsupported_tokens"] == 0  # Cyrillic stems match
    assert swapped["unsupported_numbers"] == 1 and swapped["support"] < copied["support"]
    assert [answer[a:b] for a, b in signals[1].unsupported] == ["900"]
    # Inflected forms share a stem: "метрополитена" is the context's "метрополитен".
    inflected, = _features("Длина метрополитена составляет 450 километров.", RU_CONTEXT)
    assert inflected["unsupported_tokens"] == 0


def test_empty_answer_and_empty_context():
    assert sentence_signals("", ContextIndex.build(CONTEXT)) == []
    assert sentence_signals("   \n ", ContextIndex.build(CONTEXT)) == []
    signal, = sentence_signals("The tower is in Paris.", ContextIndex.build(""))
    assert signal.evidence == "" and signal.features[F["support"]] < 1.0 and signal.features[F["best_chunk_share"]] == 0


# ----------------------------------------------------------------------------------- unsupported phrases

def _phrases(text: str, unsupported_words: set[str], offset: int = 0, max_gap: int = 1) -> list[str]:
    tokens = tokenize(text)
    supported = [t.text not in unsupported_words for t in tokens]
    return [(" " * offset + text)[a:b] for a, b in unsupported_phrases(tokens, supported, offset, max_gap)]


def test_unsupported_phrases_merge_across_a_stopword_gap():
    assert _phrases("He was born in 1998 in Berlin.", {"1998", "berlin"}) == ["1998 in Berlin"]
    # Two stopwords are too wide a gap for max_gap=1, not for 2.
    assert _phrases("Smith of the Berlin club.", {"smith", "berlin"}) == ["Smith", "Berlin"]
    assert _phrases("Smith of the Berlin club.", {"smith", "berlin"}, max_gap=2) == ["Smith of the Berlin"]
    # A supported content word ends a phrase.
    assert _phrases("Smith visited Berlin.", {"smith", "berlin"}) == ["Smith", "Berlin"]
    # Offsets shift the ranges into the answer; stopwords alone are never a phrase.
    assert _phrases("He was born in 1998 in Berlin.", {"1998", "berlin"}, offset=7) == ["1998 in Berlin"]
    assert _phrases("It was in the.", {"it", "was", "in", "the"}) == []


# ----------------------------------------------------------------------------------------------- tasks

@pytest.mark.parametrize("question, context, declared, expected", [
    ("When was it built?", CONTEXT, None, "QA"),
    ("Summarize the article.", CONTEXT, None, "Summary"),
    ("Give me an overview of this text", CONTEXT, None, "Summary"),
    ("", CONTEXT, None, "Summary"),
    ("   ", CONTEXT, None, "Summary"),
    ("Write about this business.", '{"name": "Cafe", "city": "Paris"}', None, "Data2txt"),
    ("Write about this business.", '[{"name": "Cafe"}]', None, "Data2txt"),
    ("Describe it.", "name: Cafe Blue\ncity: Paris\nrating: 4.5\nopen: yes", None, "Data2txt"),
    ("Summarize it.", "name: Cafe Blue\ncity: Paris", None, "Data2txt"),
    # RAG passages under headers, and dialogue turns, are prose, not records (RAGTruth's QA contexts).
    ("typical weather in indiana", "passage 1:When, how much and how often Indianapolis, Indiana has snow, with "
     "monthly averages.\n\npassage 2:Average Weather in Indianapolis Indiana, United States. The summers are long.",
     None, "QA"),
    ("", "A: I love going to the beach on a sunny summer afternoon.\nB: Me too, the sea is so calm and warm then.",
     None, "Summary"),
    ("When was it built?", CONTEXT, "Summary", "Summary"),
    ("Summarize it.", '{"a": 1}', "QA", "QA"),
    ("When was it built?", CONTEXT, "Translation", "QA"),  # not one of TASKS: ignored
    ("Кратко перескажи текст.", RU_CONTEXT, None, "Summary"),
    ("Когда открыт метрополитен?", RU_CONTEXT, None, "QA"),
])
def test_task_of(question, context, declared, expected):
    assert expected in TASKS
    assert task_of(question, context, declared) == expected


# ------------------------------------------------------------------------------------------ long inputs

def test_long_context_finishes_quickly_and_states_truncation():
    context = _long_context(3000)[:200_000]
    assert len(context) == 200_000
    answer = ("Station 17 in the district of Town17 opened in 1017 with 5 platforms. It was built by the "
              "Romans in 55 BC. Station 2999 opened in 3999. ") * 3
    started = time.perf_counter()
    index = ContextIndex.build(context)
    signals = sentence_signals(answer, index)
    assert time.perf_counter() - started < 10
    assert len(signals) == 9
    all_chunks = context_chunks(context)
    assert len(index.chunks) == min(len(all_chunks), MAX_CHUNKS)
    assert index.truncated_chunks == max(0, len(all_chunks) - MAX_CHUNKS)
    assert "Station 17 in the district of Town17 opened in 1017" in signals[0].evidence
    assert signals[0].features[F["support"]] == 1.0 and signals[1].features[F["support"]] < 1.0


def test_many_short_passages_finish_quickly():
    case = Case(id="p", question="q", answer="Station 250 opened in 1250. It has 9 platforms.",
                context=[f"Station {i} opened in {1000 + i}." for i in range(500)])
    started = time.perf_counter()
    index = ContextIndex.build(case.context_text)
    signals = sentence_signals(case.answer, index)
    assert time.perf_counter() - started < 10
    assert 500 * 4 // CHUNK_WORDS <= len(index.chunks) <= 500 and index.truncated_chunks == 0
    assert "Station 250 opened in 1250." in signals[0].evidence
    assert signals[0].features[F["unsupported_numbers"]] == 0


def test_chunks_beyond_max_chunks_are_cut_and_counted(monkeypatch):
    monkeypatch.setattr(grounding, "MAX_CHUNKS", 10)
    context = _long_context(200)
    total = len(context_chunks(context))
    assert total > 10
    index = ContextIndex.build(context)
    assert len(index.chunks) == 10 and index.truncated_chunks == total - 10
    assert index.chunks == context_chunks(context)[:10]
