"""The Gate facade with the heuristic fallback: the issue's must-have examples, en and ru."""

from __future__ import annotations

import pytest

from autovalidators.inference import Case, Decision, FailureType, Gate
from autovalidators.inference.config import CheckPolicy, ChecksPolicy, GateConfig, load_gate_config
from autovalidators.inference.results import QARelevanceOutput
from autovalidators.inference.validators.base import ValidatorInfo

CONTEXT_ENGINEERING = (
    "Context engineering is the practice of designing what goes into a large language model's context "
    "window: instructions, retrieved documents, tool outputs and memory, so that the model has what it "
    "needs to answer well."
)


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    # An empty models folder: every validator runs as its heuristic.
    return Gate(models_dir=tmp_path_factory.mktemp("no-models"))


def test_fallback_is_reported_in_meta(gate):
    result = gate.validate(Case(id="1", question="q?", context="c.", answer="c."))
    assert result.meta["fallback"] == ["abstention", "fact_spans", "qa_relevance", "tone"]
    assert gate.uses_fallback


@pytest.mark.parametrize("config", [GateConfig(), GateConfig(checks=ChecksPolicy(
    **{name: CheckPolicy(minimum=0.0) for name in
       ("grounding", "span_grounding", "fact_recall", "relevance", "context_quality", "agreement")}))],
    ids=["default", "zero-minimums"])
def test_mars_office_is_never_accepted(gate, config):
    zero_gate = Gate(config, instances=gate.validators)
    case = Case(id="mars", question="Will the company support the Mars office?", context="",
                answer="Yes, the Mars office opens in 2027.")
    result = zero_gate.validate(case)
    assert result.decision is Decision.REJECT
    assert result.failure_type is FailureType.MISSING_ABSTENTION


def test_context_engineering_fabrication_is_rejected(gate):
    case = Case(id="ce", question="What is context engineering?", context=CONTEXT_ENGINEERING,
                answer="Context engineering was invented at MIT in 1987 and is mainly used to optimise hardware "
                       "caches in processors. It has nothing to do with language models.")
    result = gate.validate(case)
    assert result.decision is Decision.REJECT
    assert result.triggers  # the fabricated sentences are named


def test_grounded_russian_answer_is_accepted_and_fabricated_one_rejected(gate):
    context = "Москва впервые упоминается в летописи в 1147 году. Основателем города считается князь Юрий Долгорукий."
    good = Case(id="ru1", question="Когда впервые упоминается Москва?", context=context,
                answer="Москва впервые упоминается в летописи в 1147 году.")
    bad = Case(id="ru2", question="Когда впервые упоминается Москва?", context=context,
               answer="Москва впервые упоминается в 1480 году в указе Ивана Грозного.")
    good_result, bad_result = gate.validate_batch([good, bad])
    assert good_result.decision is Decision.ACCEPT
    assert bad_result.decision is Decision.REJECT


def test_batch_and_single_give_the_same_decisions(gate):
    cases = [Case(id=str(i), question="When did it open?", context="It opened in 1889.",
                  answer=answer) for i, answer in enumerate(["It opened in 1889.", "It opened in 1999.", "Hello!"])]
    batch = [r.to_dict() for r in gate.validate_batch(cases)]
    single = [gate.validate(c).to_dict() for c in cases]
    for b, s in zip(batch, single):
        b["meta"].pop("latency_ms"), s["meta"].pop("latency_ms")
        assert b == s


class BrokenRelevance:
    """A validator returning NaN, as a buggy model might."""

    info = ValidatorInfo("qa_relevance", "onnx", "broken", sha256="0" * 64)

    def predict(self, cases):
        return [QARelevanceOutput(applies=True, score=float("nan")) for _ in cases]


def test_nan_from_a_validator_fails_closed_and_output_stays_valid_json(gate):
    broken = Gate(instances={**gate.validators, "qa_relevance": BrokenRelevance()})
    result = broken.validate(Case(id="n", question="When?", context="It opened in 1889.", answer="It opened in 1889."))
    assert result.failure_type is FailureType.INVALID_SCORE
    as_dict = result.to_dict()
    assert as_dict["validators"]["qa_relevance"]["score"] is None
    assert as_dict["meta"]["models"]["qa_relevance"] == "0" * 64


def test_judge_is_consulted_only_below_the_confidence_band(gate):
    calls = []

    class RecordingJudge:
        def review(self, case, result):
            calls.append(case.id)
            return result

    judged = Gate(instances=gate.validators, judge=RecordingJudge())
    confident = Case(id="sure", question="Will the Mars office open?", context="", answer="Yes, in 2027.")
    judged.validate(confident)
    assert calls == []  # a 90+ confidence REJECT needs no judge
    broken = Gate(instances={**gate.validators, "qa_relevance": BrokenRelevance()}, judge=RecordingJudge())
    broken.validate(Case(id="unsure", question="When?", context="It opened in 1889.", answer="It opened in 1889."))
    assert calls == ["unsure"]  # confidence 0 (invalid score) is below any band


def test_prefer_runs_the_shipped_fact_span_model_as_heuristic_but_not_a_model_elsewhere(tmp_path):
    from autovalidators.inference.validators import DEFAULT_MODELS_DIR

    shipped = Gate(validators=["fact_spans"])
    assert shipped.validators["fact_spans"].info.kind == "heuristic"
    assert "fact_spans" in shipped.fallbacks
    # The same model in another folder (a user's own run) is not what prefer speaks about.
    (tmp_path / "fact_spans").symlink_to(DEFAULT_MODELS_DIR / "fact_spans")
    elsewhere = Gate(validators=["fact_spans"], models_dir=tmp_path)
    assert elsewhere.validators["fact_spans"].info.kind == "onnx"


def test_a_misnamed_prefer_entry_is_an_error():
    config = load_gate_config()
    config = config.model_copy(update={"heuristics": config.heuristics.model_copy(update={"prefer": ["fact_span"]})})
    with pytest.raises(ValueError, match=r"heuristics.prefer names unknown validator\(s\) \['fact_span'\]"):
        Gate(config)
