"""GroundingFactSpans (issue 12) without a cross-encoder: span assembly, score calibration and
`predict` over a tiny gradient-boosted combiner fitted here and exported with skl2onnx."""

from __future__ import annotations

import numpy as np
import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.grounding import FEATURE_NAMES, ContextIndex, sentence_signals
from autovalidators.inference.results import SpanLabel
from autovalidators.inference.validators.grounding_spans import (AnswerCalibration, Combiner, GroundingFactSpans,
                                                                 Narrower, calibrate, sentence_spans)

CONTEXT = ("The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall, and it was designed by the "
           "engineer Gustave Eiffel. About 7 million people visit the tower every year.")
RU_CONTEXT = "Московский метрополитен открыт в 1935 году. Его длина составляет 450 километров."
SUPPORT = FEATURE_NAMES.index("support")


# ------------------------------------------------------------------------------------------- calibrate

@pytest.mark.parametrize("threshold", [0.05, 0.3, 0.5, 0.77, 0.95])
def test_calibrate_maps_the_threshold_to_one_half_and_is_monotone(threshold):
    assert calibrate(threshold, threshold) == pytest.approx(0.5)
    assert calibrate(0.0, threshold) == 0.0 and calibrate(1.0, threshold) == pytest.approx(1.0)
    grid = np.linspace(0, 1, 201)
    values = [calibrate(float(p), threshold) for p in grid]
    assert all(b >= a for a, b in zip(values, values[1:]))
    assert all((v >= 0.5) == (p >= threshold) for p, v in zip(grid, values))


@pytest.mark.parametrize("threshold", [0.0, 1.0, -1.0, 2.0])
def test_calibrate_degenerate_threshold_is_the_identity(threshold):
    assert calibrate(0.37, threshold) == 0.37


# --------------------------------------------------------------------------------------- sentence_spans

ANSWER = ("Thank you for your question! The Eiffel Tower was completed in 1895 in Paris. "
          "It is 330 metres tall.")


def _signals(answer: str = ANSWER, context: str = CONTEXT):
    return sentence_signals(answer, ContextIndex.build(context))


def _assert_well_formed(answer: str, spans) -> None:
    for span in spans:
        assert 0 <= span.start < span.end <= len(answer)
        assert span.text == answer[span.start:span.end] and span.text == span.text.strip()
    for previous, span in zip(spans, spans[1:]):
        assert previous.end <= span.start


def test_sentence_spans_phrases_mode():
    spans = sentence_spans(ANSWER, _signals(), np.asarray([0.9, 0.1]), 0.5, "phrases")
    _assert_well_formed(ANSWER, spans)
    assert [(s.label, s.text) for s in spans] == [
        (SpanLabel.NOISE, "Thank you for your question!"),
        (SpanLabel.FACT, "The Eiffel Tower was completed in"),
        (SpanLabel.HALLUCINATION, "1895"),
        (SpanLabel.FACT, "in Paris."),
        (SpanLabel.FACT, "It is 330 metres tall."),
    ]
    assert spans[2].score == pytest.approx(0.9) and spans[1].score == pytest.approx(0.1)
    assert spans[4].score == pytest.approx(0.9)


def test_sentence_spans_sentence_mode_flags_the_whole_sentence():
    spans = sentence_spans(ANSWER, _signals(), np.asarray([0.9, 0.1]), 0.5, "sentence")
    _assert_well_formed(ANSWER, spans)
    assert [(s.label, s.text) for s in spans] == [
        (SpanLabel.NOISE, "Thank you for your question!"),
        (SpanLabel.HALLUCINATION, "The Eiffel Tower was completed in 1895 in Paris."),
        (SpanLabel.FACT, "It is 330 metres tall."),
    ]


def test_sentence_spans_threshold_is_inclusive_and_word_swaps_flag_the_sentence():
    # Every word occurs in the context (a swapped relation): phrases mode falls back to the sentence.
    answer = "Paris was completed in 1889 by the Eiffel Tower."
    signals = _signals(answer)
    assert signals[0].unsupported == []
    spans = sentence_spans(answer, signals, np.asarray([0.5]), 0.5, "phrases")
    assert [(s.label, s.start, s.end) for s in spans] == [(SpanLabel.HALLUCINATION, 0, len(answer))]
    below = sentence_spans(answer, signals, np.asarray([0.4999]), 0.5, "phrases")
    assert [s.label for s in below] == [SpanLabel.FACT]


def test_sentence_spans_of_several_phrases_stay_ordered():
    answer = "The tower was designed by Frank Wright in 1901 and it is 330 metres tall in Chicago."
    signals = _signals(answer)
    spans = sentence_spans(answer, signals, np.asarray([0.8]), 0.5, "phrases")
    _assert_well_formed(answer, spans)
    flagged = [s.text for s in spans if s.label is SpanLabel.HALLUCINATION]
    assert "Chicago" in flagged[-1] and any("Frank Wright" in text for text in flagged)
    assert any(s.label is SpanLabel.FACT for s in spans)


# -------------------------------------------------------------------------------------- the combiner

@pytest.fixture(scope="module")
def combiner_model(tmp_path_factory):
    """(Combiner, scikit-learn model): P(unsupported) rises as the support feature falls."""
    pytest.importorskip("sklearn")
    pytest.importorskip("skl2onnx")
    from sklearn.ensemble import GradientBoostingClassifier

    from autovalidators.training.grounding.combiner import to_onnx

    rng = np.random.default_rng(0)
    features = rng.random((400, len(FEATURE_NAMES))).astype(np.float32)
    labels = (features[:, SUPPORT] > 0.6).astype(np.int64)  # class 0 = unsupported
    model = GradientBoostingClassifier(n_estimators=15, max_depth=2, random_state=0).fit(features, labels)
    path = tmp_path_factory.mktemp("combiner") / "combiner.onnx"
    path.write_bytes(to_onnx(model, len(FEATURE_NAMES)))
    return Combiner(path), model


@pytest.fixture
def validator(combiner_model):
    return GroundingFactSpans(None, combiner_model[0], threshold=0.5, fallback_languages=["ru"])


def test_combiner_matches_scikit_learn(combiner_model):
    combiner, model = combiner_model
    rows = np.random.default_rng(1).random((50, len(FEATURE_NAMES))).astype(np.float32)
    np.testing.assert_allclose(combiner.unsupported(rows), model.predict_proba(rows)[:, 0], atol=1e-5)
    assert combiner.unsupported(np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32)).shape == (0,)
    low, high = rows.copy(), rows.copy()
    low[:, SUPPORT], high[:, SUPPORT] = 0.1, 0.95
    assert (combiner.unsupported(low) > 0.5).all() and (combiner.unsupported(high) < 0.5).all()


def test_invalid_span_mode_is_rejected(combiner_model):
    with pytest.raises(ValueError, match="span_mode"):
        GroundingFactSpans(None, combiner_model[0], threshold=0.5, span_mode="tokens")
    with pytest.raises(ValueError, match="needs a narrower"):
        GroundingFactSpans(None, combiner_model[0], threshold=0.5, span_mode="words")


# ------------------------------------------------------------------------------- answer calibration

def test_answer_calibration_defaults_to_the_plain_maximum():
    p = np.asarray([0.2, 0.7, 0.4])
    np.testing.assert_allclose(AnswerCalibration().scores(p), p)
    assert AnswerCalibration().scores(np.zeros(0)).shape == (0,)


def test_answer_calibration_discounts_long_answers_and_keeps_the_order_of_sentences():
    calibration = AnswerCalibration(max_logit=1.0, log_claims=-0.5, intercept=0.0)
    one, five = calibration.scores(np.asarray([0.6])), calibration.scores(np.full(5, 0.6))
    assert one[0] == pytest.approx(0.6, abs=1e-6) and five[0] < one[0]  # same worst sentence, more chances
    p = np.asarray([0.1, 0.9, 0.5])
    assert list(np.argsort(calibration.scores(p))) == list(np.argsort(p))


# ------------------------------------------------------------------------------------- word spans

@pytest.fixture(scope="module")
def narrower_path(tmp_path_factory):
    """A token model that marks words the context never uses (`supported` column = 0)."""
    pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LogisticRegression

    from autovalidators.inference.narrowing import TOKEN_FEATURE_NAMES
    from autovalidators.training.grounding.combiner import to_onnx

    rng = np.random.default_rng(0)
    rows = rng.random((300, len(TOKEN_FEATURE_NAMES))).astype(np.float32)
    column = TOKEN_FEATURE_NAMES.index("supported")
    rows[:, column] = rng.integers(0, 2, 300)
    model = LogisticRegression(C=10.0).fit(rows, (rows[:, column] == 0).astype(np.int64))
    path = tmp_path_factory.mktemp("narrower") / "narrower.onnx"
    path.write_bytes(to_onnx(model, len(TOKEN_FEATURE_NAMES)))
    return path


def test_word_mode_marks_only_the_narrowed_words(combiner_model, narrower_path):
    narrower = Narrower(narrower_path, cut=0.5, gap=1)
    validator = GroundingFactSpans(None, combiner_model[0], threshold=0.5, span_mode="words", narrower=narrower)
    answer = "The Eiffel Tower was completed in 1925 in Berlin."
    output = validator.predict([Case(id="w", question="", context=[CONTEXT], answer=answer)])[0]
    assert output.hallucinated
    marked = [s.text for s in output.spans if s.label is SpanLabel.HALLUCINATION]
    assert marked and all(word in "1925 in Berlin" for word in marked)
    assert any(s.label is SpanLabel.FACT and "Eiffel Tower" in s.text for s in output.spans)


def _case(i: int | str, answer: str, context: list[str] | None = None, question: str = "When was it built?",
          **meta) -> Case:
    return Case(id=str(i), question=question, context=[CONTEXT] if context is None else context, answer=answer,
                meta=meta)


def test_no_context_or_no_answer_does_not_apply(validator):
    no_context, empty_answer, blank_answer = validator.predict([
        _case(1, "The tower is in Paris.", context=[]), _case(2, ""), _case(3, "  \n ")])
    for output in (no_context, empty_answer, blank_answer):
        assert output.applies is False and output.hallucinated is False and output.spans == ()


def test_russian_answer_goes_to_the_heuristic(validator, combiner_model):
    ru = _case("ru", "Московский метрополитен открыт в 1935 году.", context=[RU_CONTEXT], question="Когда?")
    output, = validator.predict([ru])
    assert output.source == "heuristic" and output.applies
    english_only = GroundingFactSpans(None, combiner_model[0], threshold=0.5)
    assert english_only.predict([ru])[0].source == "onnx"


def test_supported_and_fabricated_answers(validator):
    copied, fabricated, noise_only = validator.predict([
        _case(1, "The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall."),
        _case(2, "The tower was designed by Frank Lloyd Wright in Chicago in 1901."),
        _case(3, "Thank you for your question!")])
    assert copied.applies and copied.source == "onnx" and not copied.hallucinated
    assert all(s.label is SpanLabel.FACT for s in copied.spans) and copied.precision == 1.0
    assert fabricated.hallucinated and any(s.label is SpanLabel.HALLUCINATION for s in fabricated.spans)
    assert fabricated.precision < 1.0
    assert noise_only.applies and not noise_only.hallucinated and noise_only.hallucination_score == 0.0
    assert [s.label for s in noise_only.spans] == [SpanLabel.NOISE]


MIXED = [
    ("a", "The Eiffel Tower was completed in 1889 in Paris.", None),
    ("b", "The tower was designed by Frank Lloyd Wright in Chicago.", None),
    ("c", "No context here.", []),
    ("d", "Московский метрополитен открыт в 1935 году.", [RU_CONTEXT]),
    ("e", "", None),
    ("f", "Thank you! The Eiffel Tower was completed in 1895 in Paris. About 7 million people visit it.", None),
    ("g", "It is 330 metres tall. It was designed by the engineer Gustave Eiffel.", None),
]


def test_batch_of_mixed_cases_gives_one_output_per_case_in_order(validator):
    cases = [_case(i, answer, context) for i, answer, context in MIXED]
    batch = validator.predict(cases)
    assert len(batch) == len(cases)
    assert batch == [validator.predict([case])[0] for case in cases]
    assert [o.applies for o in batch] == [True, True, False, True, False, True, True]
    assert [o.source for o in batch if o.applies] == ["onnx", "onnx", "heuristic", "onnx", "onnx"]
    assert [o.hallucinated for o in batch] == [False, True, False, False, False, True, False]
    for (_, answer, _), output in zip(MIXED, batch):
        _assert_well_formed(answer, list(output.spans))
    assert validator.predict([]) == []


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.8])
def test_score_reaches_one_half_exactly_when_hallucinated(combiner_model, threshold):
    validator = GroundingFactSpans(None, combiner_model[0], threshold=threshold,
                                   task_thresholds={"Summary": min(0.95, threshold + 0.3)})
    cases = [_case(i, answer, context) for i, answer, context in MIXED if context != [RU_CONTEXT]]
    cases += [_case(f"s{i}", c.answer, list(c.context), question="Summarize the text.") for i, c in enumerate(cases)]
    for case, output in zip(cases, validator.predict(cases)):
        if output.applies:
            assert 0.0 <= output.hallucination_score <= 1.0
            assert (output.hallucination_score >= 0.5) == output.hallucinated, case.id


def test_task_thresholds_follow_the_task_type(combiner_model):
    validator = GroundingFactSpans(None, combiner_model[0], threshold=0.5,
                                   task_thresholds={"Summary": 0.99, "Data2txt": 0.1})
    assert validator.threshold_for(_case(1, "x")) == 0.5
    assert validator.threshold_for(_case(2, "x", question="Summarize the article.")) == 0.99
    assert validator.threshold_for(_case(3, "x", context=['{"name": "Cafe"}'])) == 0.1
    assert validator.threshold_for(_case(4, "x", question="Summarize it.", task="QA")) == 0.5
    fabricated = "The tower was designed by Frank Lloyd Wright in Chicago."
    qa, summary = validator.predict([_case(5, fabricated), _case(6, fabricated, question="Summarize the article.")])
    assert qa.hallucinated and not summary.hallucinated  # P(unsupported) is the same; the cut is not
    assert summary.hallucination_score < 0.5 <= qa.hallucination_score


def test_a_huge_context_is_capped_and_the_output_says_so(validator, monkeypatch):
    from autovalidators.inference import grounding

    monkeypatch.setattr(grounding, "MAX_CHUNKS", 20)  # 200k characters hold ~500 chunks; the cap rule is the same
    sentence = "The Eiffel Tower was completed in 1889 in Paris and it is 330 metres tall. "
    huge = (sentence * (200_000 // len(sentence) + 1))[:200_000]
    answer = "The Eiffel Tower was completed in 1889 in Paris."
    capped, small, passages = validator.predict([_case(1, answer, context=[huge]), _case(2, answer),
                                                 _case(3, answer, context=[sentence] * 500)])
    assert capped.applies and not capped.hallucinated
    assert len(capped.notes) == 1 and "first 20 chunks" in capped.notes[0]
    assert small.notes == ()
    assert passages.applies and not passages.hallucinated  # 500 short passages: one context, capped the same way


def test_word_mode_uses_the_cut_of_the_case_task(combiner_model, narrower_path):
    narrower = Narrower(narrower_path, cut=0.5, gap=0, task_cuts={"Data2txt": 0.999999})
    validator = GroundingFactSpans(None, combiner_model[0], threshold=0.5, span_mode="words", narrower=narrower)
    answer = "The Eiffel Tower was completed in 1925 in Berlin."
    summary, data2txt = validator.predict([Case(id="s", question="", context=[CONTEXT], answer=answer),
                                           Case(id="d", question="", context=[CONTEXT], answer=answer,
                                                meta={"task": "Data2txt"})])
    marked = lambda output: [s.text for s in output.spans if s.label is SpanLabel.HALLUCINATION]  # noqa: E731
    assert len(marked(summary)) >= 2  # "1925" and "Berlin" both pass the default cut
    assert len(marked(data2txt)) == 1  # nothing passes the Data2txt cut: the best word only
