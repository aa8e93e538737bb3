"""Synthetic answers: deterministic, every span labelled exactly, masks agree with labels."""

from __future__ import annotations

import re

import numpy as np
import pytest

from autovalidators.data_prep.fact_spans.atomic_facts import IGNORE_INDEX, token_masks
from autovalidators.data_prep.fact_spans.noise import CLOSERS, OPENERS
from autovalidators.data_prep.fact_spans.schema import Origin, SpanLabel, SpanRecord
from autovalidators.data_prep.fact_spans.synthesis import INJECTORS, SynthesisSettings, Synthesizer
from autovalidators.inference.text import split_sentences

ALWAYS = SynthesisSettings(hallucination_rate=1.0, second_hallucination_rate=0.5, opener_rate=0.5,
                           closer_rate=0.5, paraphrase_rate=0.3, short_answer_rate=0.1)


def generate(items, settings=ALWAYS, seed=0, rounds=8) -> list[SpanRecord]:
    synth = Synthesizer(items, settings, seed=seed)
    records = []
    for r in range(rounds):
        for item in items:
            records.append(synth.answer(item, r))
            records += synth.counterfactual(item, r)
    return records


def _copies(context: str) -> list[str]:
    """The context as copied: verbatim, citations dropped, parentheticals dropped too."""
    no_citations = re.sub(r"\[[^\[\]]{1,40}\]", "", context)
    return [context, no_citations, re.sub(r"\s*\([^()]*\)", "", no_citations)]


def test_same_seed_same_records_other_seed_other_records(items):
    first = [r.model_dump() for r in generate(items, seed=7)]
    assert first == [r.model_dump() for r in generate(items, seed=7)]
    assert first != [r.model_dump() for r in generate(items, seed=8)]


def test_every_span_is_labelled_exactly(items):
    records = generate(items, seed=1)
    assert any(r.hallucinated for r in records) and any(not r.hallucinated for r in records)
    for rec in records:
        covered = set()
        for span in rec.spans:
            text = rec.answer[span.start:span.end]
            covered.update(range(span.start, span.end))
            assert text == text.strip() and text
            if span.label is SpanLabel.NOISE:
                assert text in OPENERS[rec.language] + CLOSERS[rec.language]
            elif span.label is SpanLabel.FACT:
                # Copied text: each sentence of a FACT span is in the context (parentheticals may be dropped).
                for sentence in split_sentences(text):
                    assert any(sentence.text in copy or sentence.text.rstrip(".") in copy
                               for copy in _copies(rec.context)), (rec.id, sentence.text)
            elif span.kind in ("number", "date", "entity"):
                assert not re.search(rf"(?<!\w){re.escape(text)}(?!\w)", rec.context), (rec.id, text)
            elif span.kind in ("borrowed", "extra", "negation"):
                assert text not in rec.context
        assert "[2]" not in rec.answer  # citation markers are not copied
        # Every non-whitespace character has exactly one label.
        assert all(i in covered for i, ch in enumerate(rec.answer) if not ch.isspace())


def test_fact_and_noise_masks_define_the_token_labels(items, tiny_tokenizer):
    for rec in generate(items, seed=2, rounds=4):
        masks = token_masks(rec, tiny_tokenizer)
        in_fact = masks.fact_masks.any(axis=0)
        labelled = masks.labels != IGNORE_INDEX
        assert labelled.all()
        fact, noise, hallucination = (masks.labels == i for i in range(3))
        assert np.array_equal(fact, in_fact & ~noise), rec.id
        assert np.array_equal(noise, masks.noise_mask)
        assert np.array_equal(hallucination, masks.hallucination_mask), rec.id


def test_recall_counts_the_copied_facts(items):
    synth = Synthesizer(items, SynthesisSettings(hallucination_rate=0.0, opener_rate=0.0, closer_rate=0.0,
                                                 paraphrase_rate=0.0, short_answer_rate=0.0,
                                                 max_extra_sentences=0), seed=3)
    rec = synth.answer(items[0], 0)
    # Only the sentence holding the gold answer: "The Eiffel Tower was completed in 1889 in Paris."
    assert rec.answer == "The Eiffel Tower was completed in 1889 in Paris."
    assert rec.recall() == pytest.approx(1 / len(rec.facts))
    assert not rec.hallucinated and rec.origin is Origin.SYNTHETIC


@pytest.mark.parametrize("kind", INJECTORS)
def test_each_hallucination_kind_is_injected(items, kind):
    settings = SynthesisSettings(hallucination_rate=1.0, second_hallucination_rate=0.0, kind_weights=((kind, 1.0),),
                                 short_answer_rate=0.0, max_extra_sentences=2)
    records = generate(items, settings, seed=4, rounds=3)
    kinds = {s.kind for r in records if r.origin is Origin.SYNTHETIC for s in r.spans}
    assert kind in kinds


def test_counterfactual_pair_follows_the_changed_context(items):
    synth = Synthesizer(items, ALWAYS, seed=5)
    pairs = [synth.counterfactual(item, 0) for item in items]
    assert any(pairs)
    for pair in filter(None, pairs):
        follows, world = pair
        item = next(i for i in items if follows.id.startswith(i.id))
        assert follows.context == world.context != item.context
        assert not follows.hallucinated
        wrong = [s for s in world.spans if s.label is SpanLabel.HALLUCINATION]
        assert len(wrong) == 1 and wrong[0].kind.startswith("counterfactual_")
        original, new = follows.meta["changed"].split(" -> ")
        assert world.answer[wrong[0].start:wrong[0].end] == original
        assert new in follows.answer and original in item.context


def test_answers_keep_to_the_word_budget(items):
    settings = SynthesisSettings(hallucination_rate=0.0, opener_rate=0.0, closer_rate=0.0, short_answer_rate=0.0,
                                 max_extra_sentences=3, max_answer_words=12)
    records = generate(items, settings, seed=6, rounds=3)
    synthetic = [r for r in records if r.origin is Origin.SYNTHETIC]
    assert all(len(r.answer.split()) <= 12 for r in synthetic)
    # Gold sentences over the budget fall back to the short form: just the gold phrase.
    assert any(r.answer == r.meta["gold_answer"] + "." for r in synthetic)


def test_a_number_swap_targets_digits_not_numbers_spelt_out():
    # "five" and "7 million" read as numbers (inference/number_words.py), but only digits can be rewritten.
    import random

    from autovalidators.data_prep.fact_spans.perturb import Segment, new_number, targets

    text = "The plan costs 40 dollars for five users, 7 million in all."
    found = targets((Segment(text, SpanLabel.FACT),), "number", "en")
    assert [text[t.start:t.end] for t in found] == ["40", "7"]
    assert new_number("40", random.Random(0)).isdigit()
