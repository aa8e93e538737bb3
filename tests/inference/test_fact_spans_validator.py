"""FactSpanValidator on onnxruntime: padding invariance, windowing, span offsets, registry, gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.results import Decision, SpanLabel
from autovalidators.inference.validators import load_validator
from autovalidators.inference.validators.fact_spans import (EncodingRule, FactSpanValidator, answer_parts,
                                                            calibrate, plan_case, word_spans)

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "fact_spans"

CASES = [
    Case(id="short", question="what is true", context=["paris is the capital of france."],
         answer="sure! paris is the capital of france."),
    Case(id="halluc", question="what is true", context=["bees make honey from nectar."],
         answer="bees make honey from nectar and the nile flows through egypt."),
    Case(id="long", question="what is true",
         context=["the war ended in 1945. " * 20, "water is made of hydrogen and oxygen. " * 10],
         answer="the war ended in 1945 and water is made of hydrogen and oxygen. " * 4),
    Case(id="empty", question="what is true", context=[], answer="paris is the capital of france."),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    from fact_spans_helpers import build_tiny_fact_model

    return build_tiny_fact_model(tmp_path_factory.mktemp("fact"))


def make(models: Path, **kwargs) -> FactSpanValidator:
    folder = models / "fact_spans"
    return FactSpanValidator(folder, load_manifest(folder), threads=1, **kwargs)


def _same(a, b) -> None:
    assert a.applies == b.applies and a.hallucinated == b.hallucinated
    assert a.hallucination_score == pytest.approx(b.hallucination_score, abs=1e-5)
    assert a.precision == pytest.approx(b.precision) and a.recall == pytest.approx(b.recall)
    assert [(s.start, s.end, s.label) for s in a.spans] == [(s.start, s.end, s.label) for s in b.spans]


def test_int8_batch_equals_single(tiny):
    validator = make(tiny[0])
    batched = validator.predict(CASES)
    for case, output in zip(CASES, batched):
        _same(output, validator.predict([case])[0])


def test_fp32_padded_batches_equal_single(tiny):
    models, run = tiny
    validator = make(models, batch_size=8, model_path=run / "onnx" / "model_fp32.onnx")
    batched = validator.predict(CASES)
    for case, output in zip(CASES, batched):
        _same(output, validator.predict([case])[0])


def test_long_context_is_windowed_and_long_answer_split(tiny):
    validator = make(tiny[0])
    case = CASES[2]
    parts = plan_case(validator.tokenizer, case.question, case.context_text, case.answer, validator.rule)
    assert len(parts) > 1  # the answer is longer than max_answer_tokens
    assert all(len(p.plan.windows) > 1 for p in parts)  # the context is longer than one window
    assert all(len(w.input_ids) <= validator.rule.max_length for p in parts for w in p.plan.windows)
    output = validator.predict([case])[0]
    assert output.applies
    covered = "".join(case.answer[s.start:s.end] for s in output.spans)
    assert covered.replace(" ", "") == case.answer.replace(" ", "")  # every answer word in exactly one span


def test_span_offsets_match_answer_text(tiny):
    for case, output in zip(CASES, make(tiny[0]).predict(CASES)):
        previous = 0
        for span in output.spans:
            assert span.text == case.answer[span.start:span.end] and span.text.strip() == span.text
            assert span.start >= previous and 0.0 <= span.score <= 1.0
            previous = span.end
        assert 0.0 <= output.precision <= 1.0 and 0.0 <= output.recall <= 1.0
        assert 0.0 <= output.hallucination_score <= 1.0
        assert output.hallucinated == (output.hallucination_score >= 0.5)
        assert output.hallucinated == any(s.label is SpanLabel.HALLUCINATION for s in output.spans)


def test_empty_context_does_not_apply(tiny):
    output = make(tiny[0]).predict([CASES[3]])[0]
    assert not output.applies and output.spans == ()


def test_answer_parts_cut_between_words(tiny):
    validator = make(tiny[0])
    answer = "bees make honey from nectar " * 12 + "привет мир"
    parts = answer_parts(validator.tokenizer, answer, 8)
    assert len(parts) > 1
    for start, end in parts:
        assert (start == 0 or answer[start - 1] == " ") and (end == len(answer) or answer[end] == " ")


def test_encoding_rule_leaves_room_for_context():
    for length in (64, 128, 256, 512):
        rule = EncodingRule.for_length(length, 32)
        assert length - 4 - rule.max_question_tokens - rule.max_answer_tokens >= length * 3 // 8 - 4
    with pytest.raises(ValueError, match="context tokens"):
        EncodingRule(max_length=64, stride=8, max_question_tokens=16, max_answer_tokens=40)


def test_word_spans_follow_the_threshold(tiny):
    validator = make(tiny[0])
    answer = "paris is the capital"
    plan = plan_case(validator.tokenizer, "q", "paris is the capital", answer, validator.rule)[0].plan
    probs = np.tile([0.7, 0.1, 0.2], (plan.n_answer_tokens, 1))
    probs[-1] = [0.5, 0.1, 0.4]
    assert [s.label for s in word_spans(answer, plan, probs, 0.5)] == [SpanLabel.FACT]
    spans = word_spans(answer, plan, probs, 0.3)
    assert [(s.text, s.label) for s in spans] == [("paris is the", SpanLabel.FACT),
                                                  ("capital", SpanLabel.HALLUCINATION)]
    assert spans[1].score == pytest.approx(0.4)


def test_calibration_is_monotone_and_puts_threshold_at_half():
    scores = [calibrate(x, 0.3) for x in np.linspace(0, 1, 21)]
    assert scores == sorted(scores) and scores[0] == 0.0 and scores[-1] == pytest.approx(1.0)
    assert calibrate(0.3, 0.3) == pytest.approx(0.5)


def test_registry_loads_the_onnx_validator(tiny):
    validator = load_validator("fact_spans", tiny[0])
    assert isinstance(validator, FactSpanValidator) and validator.info.kind == "onnx"


@pytest.mark.slow
def test_shipped_model_through_the_gate():
    if not (SHIPPED / "manifest.json").is_file():
        pytest.skip(f"{SHIPPED} holds no exported model (run the export in configs/fact_spans_model.yaml)")
    from autovalidators.inference.config import GateConfig
    from autovalidators.inference.gate import Gate

    gate = Gate(GateConfig(validators=["fact_spans"]), models_dir=SHIPPED.parent)
    assert gate.validators["fact_spans"].info.kind == "onnx"
    context = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall."]
    good = Case(id="good", question="When was the Eiffel Tower completed?", context=context,
                answer="The Eiffel Tower was completed in 1889 for the World's Fair in Paris.")
    bad = Case(id="bad", question="When was the Eiffel Tower completed?", context=context,
               answer="The Eiffel Tower was completed in 1925 by Gustav Klimt, who painted it gold for the Olympics.")
    good_result, bad_result = gate.validate_batch([good, bad])
    good_fact, bad_fact = good_result.validators["fact_spans"], bad_result.validators["fact_spans"]
    assert good_fact.source == "onnx" and good_fact.applies
    assert good_fact.hallucination_score < bad_fact.hallucination_score
    assert good_fact.precision > bad_fact.precision
    assert any(s.label is SpanLabel.HALLUCINATION for s in bad_fact.spans)
    assert bad_result.decision is not Decision.ACCEPT
