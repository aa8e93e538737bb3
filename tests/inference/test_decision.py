"""The decision policy on its own, with hand-made validator outputs: no models, no heuristics."""

from __future__ import annotations

import math

import pytest

from autovalidators.inference.config import CheckPolicy, ChecksPolicy, GateConfig
from autovalidators.inference.decision import decide
from autovalidators.inference.results import (
    CaseSignals,
    Decision,
    FactSpansOutput,
    FailureType,
    NextAction,
    QARelevanceOutput,
    Span,
    SpanLabel,
    ToneOutput,
)

SAFE_TONE = ToneOutput(applies=True, scores={"toxicity": 0.01, "insult": 0.01}, flagged=(),
                       thresholds={"toxicity": 0.5, "insult": 0.5})


def grounded(precision=0.95, hallucination=0.05, recall=0.8, spans=()):
    return FactSpansOutput(applies=True, hallucinated=hallucination >= 0.5, hallucination_score=hallucination,
                           precision=precision, recall=recall, spans=spans)


def signals(specificity=0.8, context_quality=0.9, abstains=False):
    return CaseSignals(specificity=specificity, context_quality=context_quality, abstains=abstains)


def run(config=None, *, has_context=True, sig=None, fact=None, qa=None, tone=SAFE_TONE):
    return decide(
        has_context=has_context,
        signals=sig or signals(),
        fact=fact if fact is not None else grounded(),
        qa=qa if qa is not None else QARelevanceOutput(applies=True, score=0.9, relevant=True),
        tone=tone,
        config=config or GateConfig(),
    )


def all_zero_config(**overrides) -> GateConfig:
    zero = CheckPolicy(minimum=0.0)
    checks = ChecksPolicy(grounding=zero, span_grounding=zero, fact_recall=zero, relevance=zero,
                          context_quality=zero, agreement=zero)
    return GateConfig(checks=checks, **overrides)


def test_all_checks_passing_accepts_and_serves():
    verdict = run()
    assert verdict.decision is Decision.ACCEPT
    assert verdict.next_action is NextAction.SERVE_RESPONSE
    assert 50 <= verdict.confidence <= 100


@pytest.mark.parametrize("score, passes", [(0.6, True), (0.5999, False)])
def test_grounding_boundary_is_inclusive(score, passes):
    config = GateConfig()
    assert config.checks.grounding.minimum == 0.6
    verdict = run(config, fact=grounded(precision=score))
    grounding = next(c for c in verdict.checks if c.name == "grounding")
    assert grounding.passed is passes
    assert (verdict.decision is Decision.ACCEPT) is passes


@pytest.mark.parametrize("score, passes", [(0.5, True), (0.4999, False)])
def test_relevance_boundary_is_inclusive(score, passes):
    verdict = run(qa=QARelevanceOutput(applies=True, score=score, relevant=passes))
    assert (verdict.failure_type is FailureType.OFF_TOPIC) is not passes


def test_one_weak_check_is_not_rescued_by_three_strong_ones():
    verdict = run(fact=grounded(precision=1.0, recall=1.0),
                  qa=QARelevanceOutput(applies=True, score=0.1, relevant=False),
                  sig=signals(context_quality=1.0))
    assert verdict.scores["average"] > 0.6  # the average looks fine and must not matter
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.OFF_TOPIC
    assert verdict.next_action is NextAction.RETRY_WITH_CLEARER_QUERY


def test_an_off_topic_answer_full_of_specific_ungrounded_claims_is_a_confident_hallucination():
    # Seed 000: an essay on the French Revolution to a password question invents facts; REJECT it.
    off_question = QARelevanceOutput(applies=True, score=0.05, relevant=False)
    detailed = run(fact=grounded(precision=0.0, hallucination=1.0, recall=0.0), sig=signals(specificity=0.9),
                   qa=off_question)
    assert (detailed.decision, detailed.failure_type) == (Decision.REJECT, FailureType.CONFIDENT_HALLUCINATION)
    # A vague off-topic answer stays REVIEW off_topic: a clearer query fixes it.
    vague = run(fact=grounded(precision=0.0, hallucination=1.0, recall=0.0), sig=signals(specificity=0.1),
                qa=off_question)
    assert (vague.decision, vague.failure_type) == (Decision.REVIEW, FailureType.OFF_TOPIC)
    # Specific but grounded (a true sentence of the context that answers something else): off topic.
    grounded_elsewhere = run(fact=grounded(), sig=signals(specificity=0.9), qa=off_question)
    assert (grounded_elsewhere.decision, grounded_elsewhere.failure_type) == (Decision.REVIEW, FailureType.OFF_TOPIC)


def test_task_minimums_replace_the_global_ones_for_that_task_only():
    from autovalidators.inference.config import TaskPolicy

    config = GateConfig(tasks={"Data2txt": TaskPolicy(minimums={"grounding": 0.3})})
    weak = grounded(precision=0.4, hallucination=0.05)
    assert run(config.for_task("Data2txt"), fact=weak).decision is Decision.ACCEPT
    assert run(config.for_task("QA"), fact=weak).decision is not Decision.ACCEPT
    assert config.for_task("QA") is config
    with pytest.raises(ValueError, match="unknown check"):
        TaskPolicy(minimums={"groundedness": 0.3})


@pytest.mark.parametrize("config", [GateConfig(), all_zero_config()], ids=["default", "all-minimums-zero"])
def test_no_context_and_asserting_answer_is_rejected_whatever_the_thresholds(config):
    verdict = run(config, has_context=False, sig=signals(specificity=0.9, context_quality=0.0),
                  fact=FactSpansOutput(applies=False))
    assert verdict.decision is Decision.REJECT
    assert verdict.failure_type is FailureType.MISSING_ABSTENTION


@pytest.mark.parametrize("minimum", [0.0, 0.3, 0.9])
def test_context_not_covering_question_requires_abstention(minimum):
    checks = ChecksPolicy(context_quality=CheckPolicy(minimum=minimum))
    verdict = run(GateConfig(checks=checks), sig=signals(context_quality=0.0), fact=grounded(precision=0.1))
    if minimum == 0.0:
        # Nothing says the context is off: an ungrounded, specific answer is a confident hallucination.
        assert verdict.failure_type is FailureType.CONFIDENT_HALLUCINATION
    else:
        assert verdict.failure_type is FailureType.MISSING_ABSTENTION
    assert verdict.decision is Decision.REJECT


def test_abstaining_answer_without_context_is_not_rejected():
    verdict = run(has_context=False, sig=signals(specificity=0.0, context_quality=0.0, abstains=True),
                  fact=FactSpansOutput(applies=False), qa=QARelevanceOutput(applies=True, score=0.0))
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.POOR_RETRIEVAL
    assert verdict.next_action is NextAction.RETRIEVE_MORE_DOCUMENTS
    relevance = next(c for c in verdict.checks if c.name == "relevance")
    assert relevance.applies is False and relevance.passed is None  # abstention makes no claims


def test_inapplicable_checks_neither_fail_nor_report_a_passing_score():
    verdict = run(has_context=False, sig=signals(abstains=True, context_quality=0.0),
                  fact=FactSpansOutput(applies=False, precision=1.0))
    for name in ("grounding", "span_grounding", "fact_recall", "context_quality", "agreement"):
        check = next(c for c in verdict.checks if c.name == name)
        assert check.applies is False
        assert check.passed is None
        assert check.score is None
        assert verdict.scores[name] is None


def test_confident_hallucination_rejects_and_names_the_spans():
    span = Span(0, 30, SpanLabel.HALLUCINATION, 0.9, "invented at MIT in 1987")
    verdict = run(fact=grounded(precision=0.2, hallucination=0.9, spans=(span,)), sig=signals(specificity=0.8))
    assert verdict.decision is Decision.REJECT
    assert verdict.failure_type is FailureType.CONFIDENT_HALLUCINATION
    assert verdict.next_action is NextAction.REGENERATE_WITH_GROUNDING_PROMPT
    assert verdict.triggers == ("invented at MIT in 1987",)


def test_vague_ungrounded_answer_goes_to_review():
    verdict = run(fact=grounded(precision=0.2, hallucination=0.8), sig=signals(specificity=0.1))
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.VAGUE_UNGROUNDED
    assert verdict.next_action is NextAction.RETRY_WITH_SPECIFIC_PROMPT


def test_specificity_boundary_separates_confident_from_vague():
    at = GateConfig().specificity.confident_at
    confident = run(fact=grounded(precision=0.2, hallucination=0.8), sig=signals(specificity=at))
    vague = run(fact=grounded(precision=0.2, hallucination=0.8), sig=signals(specificity=at - 1e-6))
    assert confident.decision is Decision.REJECT
    assert vague.decision is Decision.REVIEW


def test_one_hallucinated_span_in_a_mostly_grounded_answer_is_caught():
    verdict = run(fact=grounded(precision=0.9, hallucination=0.95))
    assert verdict.decision is Decision.REJECT
    assert any(c.name == "span_grounding" and c.passed is False for c in verdict.checks)


def test_poor_retrieval_when_context_is_weak_and_answer_abstains():
    verdict = run(sig=signals(context_quality=0.1, abstains=True))
    assert verdict.failure_type is FailureType.POOR_RETRIEVAL
    assert verdict.next_action is NextAction.RETRIEVE_MORE_DOCUMENTS


def test_needless_abstention_with_a_good_context_is_incomplete():
    verdict = run(sig=signals(context_quality=0.9, abstains=True))
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.INCOMPLETE


def test_unsafe_tone_rejects_even_when_grounded():
    tone = ToneOutput(applies=True, scores={"toxicity": 0.97, "insult": 0.91}, flagged=("toxicity", "insult"),
                      thresholds={"toxicity": 0.5, "insult": 0.6})
    verdict = run(tone=tone)
    assert verdict.decision is Decision.REJECT
    assert verdict.failure_type is FailureType.UNSAFE_TONE
    assert "toxicity" in verdict.reason and "insult" in verdict.reason


def test_non_blocking_tone_label_is_reported_but_does_not_decide():
    tone = ToneOutput(applies=True, scores={"toxicity": 0.02, "politics": 0.99}, flagged=("politics",),
                      thresholds={"toxicity": 0.5, "politics": 0.5})
    assert run(tone=tone).decision is Decision.ACCEPT


def test_tone_uses_each_labels_own_threshold():
    tone = ToneOutput(applies=True, scores={"threat": 0.3}, flagged=("threat",), thresholds={"threat": 0.25})
    verdict = run(tone=tone)
    check = next(c for c in verdict.checks if c.name == "tone_safety")
    assert check.passed is False
    assert check.minimum == pytest.approx(0.75)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.1, 1.5, None])
def test_invalid_scores_fail_closed_and_name_the_check(bad):
    verdict = run(qa=QARelevanceOutput(applies=True, score=bad))
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.INVALID_SCORE
    assert "relevance" in verdict.reason
    assert verdict.confidence == 0


def test_invalid_tone_score_fails_closed():
    tone = ToneOutput(applies=True, scores={"toxicity": math.nan}, flagged=(), thresholds={"toxicity": 0.5})
    verdict = run(tone=tone)
    assert verdict.failure_type is FailureType.INVALID_SCORE
    assert "tone_safety" in verdict.reason


def test_invalid_score_even_with_all_minimums_zero():
    verdict = run(all_zero_config(), fact=grounded(precision=math.nan))
    assert verdict.decision is Decision.REVIEW
    assert verdict.failure_type is FailureType.INVALID_SCORE


def test_strong_disagreement_goes_to_human_review():
    checks = ChecksPolicy(grounding=CheckPolicy(minimum=0.1), relevance=CheckPolicy(minimum=0.1),
                          agreement=CheckPolicy(minimum=0.5))
    verdict = run(GateConfig(checks=checks), fact=grounded(precision=1.0),
                  qa=QARelevanceOutput(applies=True, score=0.2), sig=signals(context_quality=1.0))
    assert verdict.failure_type is FailureType.VALIDATOR_DISAGREEMENT
    assert verdict.next_action is NextAction.HUMAN_REVIEW


def test_non_required_failing_check_does_not_change_the_decision():
    checks = ChecksPolicy(fact_recall=CheckPolicy(minimum=0.9, required=False))
    verdict = run(GateConfig(checks=checks), fact=grounded(recall=0.1))
    assert verdict.decision is Decision.ACCEPT
    recall = next(c for c in verdict.checks if c.name == "fact_recall")
    assert recall.passed is False  # reported as failing, but not required


def test_required_fact_recall_makes_an_incomplete_answer_reviewed():
    checks = ChecksPolicy(fact_recall=CheckPolicy(minimum=0.5, required=True))
    verdict = run(GateConfig(checks=checks), fact=grounded(recall=0.1))
    assert verdict.failure_type is FailureType.INCOMPLETE


def test_missing_validators_mean_their_checks_do_not_apply():
    verdict = decide(has_context=True, signals=signals(), fact=None, qa=None, tone=None, config=GateConfig())
    assert verdict.decision is Decision.ACCEPT
    applied = {c.name for c in verdict.checks if c.applies}
    assert applied == {"context_quality"}


def test_a_summary_request_has_no_question_for_the_context_to_cover():
    # "Summarize the following news" shares no words with the news: that is no retrieval miss.
    summary = run(sig=signals(context_quality=None))
    assert summary.decision is Decision.ACCEPT
    assert next(c for c in summary.checks if c.name == "context_quality").applies is False
    abstaining = run(sig=signals(context_quality=None, abstains=True))
    assert (abstaining.decision, abstaining.failure_type) == (Decision.REVIEW, FailureType.INCOMPLETE)



def test_a_wrong_number_in_one_sentence_is_ungrounded_whatever_the_average_says():
    # Grounding 0.9 and no span above 0.5: only specifics_grounding sees the one wrong figure.
    config = GateConfig(checks=ChecksPolicy(specifics_grounding=CheckPolicy(minimum=1.0)))
    wrong_figure = CaseSignals(specificity=0.8, context_quality=0.9, abstains=False, specifics_grounding=0.0)
    verdict = run(config, sig=wrong_figure, fact=grounded(precision=0.9, hallucination=0.3))
    assert verdict.decision is Decision.REJECT and verdict.failure_type is FailureType.CONFIDENT_HALLUCINATION
    assert "specifics_grounding" in verdict.reason
    vague = CaseSignals(specificity=0.1, context_quality=0.9, abstains=False, specifics_grounding=0.5)
    assert run(config, sig=vague, fact=grounded(precision=0.9)).failure_type is FailureType.VAGUE_UNGROUNDED
    # Every figure known, or no context to read them in (the signal is None): the check does not stop it.
    known = CaseSignals(specificity=0.8, context_quality=0.9, abstains=False, specifics_grounding=1.0)
    assert run(config, sig=known).decision is Decision.ACCEPT
    checks = {c.name: c for c in run(config).checks}
    assert not checks["specifics_grounding"].applies and run(config).decision is Decision.ACCEPT
