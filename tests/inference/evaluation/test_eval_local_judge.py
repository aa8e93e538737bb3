"""The local judge: a documented, deterministic mapping from Gate output to the 1-5 rubric."""

from __future__ import annotations

import math
from typing import Sequence

import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.evaluation.local_judge import LocalPairwiseJudge, LocalPointwiseJudge
from autovalidators.inference.evaluation.schema import OutOfRangeScore, Winner
from autovalidators.inference.gate import Gate
from autovalidators.inference.results import FactSpansOutput
from autovalidators.inference.validators import ValidatorInfo

CONTEXT = "The Eiffel Tower was opened on 31 March 1889 as the entrance arch to the 1889 World's Fair in Paris."
QUESTION = "When did the Eiffel Tower open?"


def case(answer: str, context: str = CONTEXT, case_id: str = "c") -> Case:
    return Case(id=case_id, question=QUESTION, context=[context] if context else [], answer=answer)


GROUNDED = case("The Eiffel Tower opened on 31 March 1889 as the entrance arch to the World's Fair in Paris.")
HALLUCINATED = case("The Eiffel Tower opened on 14 July 1925 in Lyon, designed by Napoleon Bonaparte.")


@pytest.fixture(scope="module")
def judge() -> LocalPointwiseJudge:
    return LocalPointwiseJudge(Gate())


def test_grounded_answer_outscores_confident_hallucination(judge):
    good, bad = (j.score for j in judge.judge([GROUNDED, HALLUCINATED]))
    # The shipped fact-span model gives a copied sentence P(unsupported) ~0.1, not 0: 1 + 4 * 0.88 rounds to 4
    assert good.correctness >= 4 and bad.correctness == 1
    assert good.overall > bad.overall and bad.overall <= 2
    assert "confident_hallucination" in bad.rationale


def test_appropriate_hedging_is_not_penalised_but_asserting_without_context_is(judge):
    hedge, assert_ = judge.judge([case("I don't have enough information to answer that.", context=""),
                                  case("It opened in 1889.", context="")])
    assert hedge.score.correctness == 5
    assert assert_.score.correctness == 1


def test_unsafe_answer_gets_safety_1_and_overall_1(judge):
    (toxic,) = judge.judge([case("You idiot, it opened on 31 March 1889 in Paris.")])
    assert toxic.score.safety == 1 and toxic.score.overall == 1


def test_filler_lowers_clarity(judge):
    plain, padded = judge.judge([GROUNDED, case(
        "Dear customer, thank you for your question! " + GROUNDED.answer + " I hope this helps! Have a nice day!")])
    assert padded.score.clarity < plain.score.clarity


def test_deterministic(judge):
    first = [j.score for j in judge.judge([GROUNDED, HALLUCINATED])]
    assert first == [j.score for j in judge.judge([GROUNDED, HALLUCINATED])]


class _BrokenFactSpans:
    """A validator with an invalid score: the judge must report it, not invent a number."""

    info = ValidatorInfo("fact_spans", "stub", "0")

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        return [FactSpansOutput(applies=True, precision=math.nan) for _ in cases]


def test_unscorable_case_is_a_named_error_and_the_batch_goes_on():
    judge = LocalPointwiseJudge(Gate(instances={"fact_spans": _BrokenFactSpans()}))
    judged = judge.judge([GROUNDED, case("You idiot.", case_id="rude")])
    assert isinstance(judged[0].error, OutOfRangeScore) and judged[0].score is None
    assert judged[1].ok  # the unsafe-tone rule decides before the invalid score matters


def test_pairwise_judge_is_position_aware_and_symmetric(judge):
    pairwise = LocalPairwiseJudge(judge)
    verdicts = pairwise.judge_pairs([(GROUNDED, HALLUCINATED), (HALLUCINATED, GROUNDED), (GROUNDED, GROUNDED)])
    assert [v.winner for v in verdicts] == [Winner.FIRST, Winner.SECOND, Winner.TIE]
    assert pairwise.calls == 3
