"""Atomic facts, their alignment to answers, token masks, and the record's own checks."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from autovalidators.data_prep.fact_spans.atomic_facts import IGNORE_INDEX, align_facts, split_facts, token_masks
from autovalidators.data_prep.fact_spans.noise import CLOSERS, OPENERS, find_noise
from autovalidators.data_prep.fact_spans.schema import (CharSpan, Origin, Provenance, SpanLabel, SpanRecord,
                                                        TaskType, fill_spans)

PROV = Provenance(dataset="t", file="inline", row="1", licence="test")


def record(answer: str, spans, context: str = "ctx", **kwargs) -> SpanRecord:
    return SpanRecord(id="r", context=context, question="q", answer=answer, spans=spans, source="t", group="g",
                      language="en", task_type=TaskType.QA, origin=Origin.HUMAN, provenance=PROV, **kwargs)


def test_split_facts_cuts_sentences_and_clauses_with_offsets():
    context = ("The tower was built in 1889 in Paris, and it was designed by Gustave Eiffel. "
               "It is tall; visitors climb the stairs every day. Short one.")
    facts = split_facts(context)
    assert [f.text for f in facts] == [
        "The tower was built in 1889 in Paris,", "and it was designed by Gustave Eiffel.",
        "It is tall; visitors climb the stairs every day.", "Short one."]
    assert all(context[f.start:f.end] == f.text for f in facts)


def test_split_facts_russian_clause():
    context = "Метро открыто в 1935 году, а его длина составляет 450 километров. Второе предложение здесь."
    facts = split_facts(context)
    assert [f.text for f in facts][:2] == ["Метро открыто в 1935 году,", "а его длина составляет 450 километров."]


def test_align_facts_finds_the_answer_clause_and_cuts_excluded_ranges():
    context = "The tower was built in 1889 in Paris. The river flows through Brazil and Peru."
    answer = "Sure! The tower was built in 1889 in the city of Paris."
    facts = align_facts(context, answer, exclude=[(0, 5)])
    assert len(facts) == 2
    assert [answer[r.start:r.end] for r in facts[0].answer_spans] == ["The tower was built in 1889 in the city of Paris"]
    assert facts[1].answer_spans == []
    hallucinated_year = (answer.index("1889"), answer.index("1889") + 4)
    cut = align_facts(context, answer, exclude=[hallucinated_year])
    assert all(not (r.start < hallucinated_year[1] and r.end > hallucinated_year[0]) for r in cut[0].answer_spans)


def test_fill_spans_partitions_the_answer_and_the_worst_label_wins():
    answer = "Sure! Paris is big and old."
    spans = fill_spans(answer, [(0, 5, SpanLabel.NOISE, "opener"), (15, 18, SpanLabel.HALLUCINATION, "x"),
                                (12, 18, SpanLabel.NOISE, "")], default=SpanLabel.FACT)
    assert [(s.label, answer[s.start:s.end]) for s in spans] == [
        (SpanLabel.NOISE, "Sure!"), (SpanLabel.FACT, "Paris"), (SpanLabel.NOISE, "is"),
        (SpanLabel.HALLUCINATION, "big"), (SpanLabel.FACT, "and old.")]


def test_record_rejects_inconsistent_spans_and_facts():
    with pytest.raises(ValidationError, match="ends past the answer"):
        record("abc", [CharSpan(start=0, end=5, label=SpanLabel.FACT)])
    with pytest.raises(ValidationError, match="overlaps"):
        record("abcdef", [CharSpan(start=0, end=4, label=SpanLabel.FACT), CharSpan(start=2, end=6, label=SpanLabel.FACT)])
    with pytest.raises(ValidationError, match="does not match the context"):
        record("abc", [], context="hello world", facts=[{"start": 0, "end": 5, "text": "world"}])


def test_token_masks_follow_char_labels_ignored_text_and_facts(tiny_tokenizer):
    context = "The tower was built in 1889 in Paris."
    answer = "Sure! The tower was built in 1900 in Paris."
    year = answer.index("1900")
    rec = record(answer, fill_spans(answer, [(0, 5, SpanLabel.NOISE, ""), (year, year + 4, SpanLabel.HALLUCINATION, "")],
                                    SpanLabel.FACT),
                 context=context, ignored=[{"start": answer.index("Paris"), "end": answer.index("Paris") + 5}],
                 facts=[{"start": 0, "end": len(context), "text": context,
                         "answer_spans": [{"start": 6, "end": year}, {"start": year + 4, "end": len(answer)}]}])
    masks = token_masks(rec, tiny_tokenizer)
    text_of = [answer[a:b].lower() for a, b in masks.offsets]
    labels = {t: masks.label_names[l] if l != IGNORE_INDEX else None for t, l in zip(text_of, masks.labels)}
    assert labels["sure"] == "NOISE" and labels["tower"] == "FACT" and labels["paris"] is None
    year_tokens = [i for i, (a, b) in enumerate(masks.offsets) if year <= a < year + 4]
    assert all(masks.labels[i] == 2 for i in year_tokens)
    assert masks.fact_masks.shape == (1, len(masks.offsets))
    assert np.array_equal(masks.hallucination_mask[year_tokens], np.ones(len(year_tokens), bool))
    assert masks.noise_mask.sum() == sum(1 for a, b in masks.offsets if b <= 5)


def test_recall_is_the_share_of_facts_mentioned():
    rec = record("abc", [], context="one two. three four.", facts=[
        {"start": 0, "end": 8, "text": "one two.", "answer_spans": [{"start": 0, "end": 3}]},
        {"start": 9, "end": 20, "text": "three four."}])
    assert rec.recall() == 0.5


@pytest.mark.parametrize("language", ["en", "ru"])
def test_every_synthetic_noise_phrase_is_found_by_the_matcher(language):
    for phrase in OPENERS[language] + CLOSERS[language]:
        answer = f"{phrase} The tower is tall."
        found = find_noise(answer)
        assert found and found[0][0] == 0 and found[0][1] >= len(phrase) - 1, phrase
    assert find_noise("The tower is tall and was built in 1889.") == []


def test_token_masks_line_up_with_the_runtime_window_answer_tokens(tiny_tokenizer):
    from autovalidators.inference.windowing import build_windows

    answer = "Sure! The tower was built in 1900 in Paris."
    rec = record(answer, fill_spans(answer, [], SpanLabel.FACT))
    masks = token_masks(rec, tiny_tokenizer)
    plan = build_windows(tiny_tokenizer, "q", "The tower was built in 1889.", answer, max_length=128, min_context_tokens=4)
    assert masks.offsets == plan.answer_offsets
