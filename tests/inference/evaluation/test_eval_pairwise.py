"""The compare protocol: both orders, ties for inconsistency, binomial test, hybrid mode, joins."""

from __future__ import annotations

import json
from typing import Sequence

import pytest
from scipy.stats import binomtest

from autovalidators.inference.case import Case
from autovalidators.inference.evaluation.config import EvaluationConfig, PairwiseConfig
from autovalidators.inference.evaluation.pairwise import (
    hybrid_compare,
    join_runs,
    judge_both_orders,
    summarize,
)
from autovalidators.inference.evaluation.schema import (
    Judged,
    JudgeOutputError,
    PairVerdict,
    PointwiseScore,
    UnparseableJudgeOutput,
    Winner,
)


def pair(i: int, a: str, b: str, category: str = "common") -> tuple[Case, Case]:
    meta = {"category": category}
    return (Case(id=str(i), question="q?", context=["c"], answer=a, meta=meta),
            Case(id=str(i), question="q?", context=["c"], answer=b, meta=meta))


class ContentJudge:
    """Prefers the answer containing 'good'; answers 'broken' make it fail."""

    name = "content"

    def __init__(self) -> None:
        self.calls = 0

    def judge_pairs(self, pairs: Sequence[tuple[Case, Case]]) -> list[PairVerdict | JudgeOutputError]:
        self.calls += len(pairs)
        out: list[PairVerdict | JudgeOutputError] = []
        for first, second in pairs:
            if "broken" in first.answer + second.answer:
                out.append(UnparseableJudgeOutput("not JSON"))
            elif ("good" in first.answer) == ("good" in second.answer):
                out.append(PairVerdict(winner=Winner.TIE, rationale="same"))
            else:
                out.append(PairVerdict(winner=Winner.FIRST if "good" in first.answer else Winner.SECOND,
                                       rationale="good wins"))
        return out


class FirstBiasedJudge(ContentJudge):
    """Always picks whatever is shown first: the position bias the protocol must neutralise."""

    def judge_pairs(self, pairs):
        self.calls += len(pairs)
        return [PairVerdict(winner=Winner.FIRST, rationale="first") for _ in pairs]


def summary(outcomes, **pairwise):
    config = EvaluationConfig(pairwise=PairwiseConfig(**pairwise)) if pairwise else EvaluationConfig()
    return summarize(outcomes, config, judge="t", mode="pairwise", calls={})


def test_consistent_winner_counts_and_p_value_matches_scipy():
    pairs = [pair(i, "bad", "good") for i in range(12)] + [pair(100 + i, "good", "bad") for i in range(3)]
    pairs += [pair(200 + i, "good", "good") for i in range(5)]
    judge = ContentJudge()
    outcomes = judge_both_orders(pairs, judge)
    assert judge.calls == 2 * len(pairs)
    report = summary(outcomes)
    total = report.total
    assert (total.wins_b, total.wins_a, total.ties, total.decisive) == (12, 3, 5, 15)
    assert total.win_rate_b == pytest.approx(0.8)
    assert total.p_value == pytest.approx(binomtest(12, 15, 0.5, alternative="greater").pvalue)
    assert report.significant and report.verdict == "B is better"


def test_position_biased_judge_yields_ties_not_a_winner():
    pairs = [pair(i, "bad", "good") for i in range(30)]
    report = summary(judge_both_orders(pairs, FirstBiasedJudge()))
    assert report.total.ties == 30 and report.total.position_inconsistent == 30
    assert report.total.decisive == 0 and not report.significant
    assert report.verdict == "no significant difference"


def test_significance_needs_the_minimum_win_rate_too():
    # 60 of 100 decisive: p < 0.05 (one-sided) but a win rate below a 0.65 minimum.
    pairs = [pair(i, "bad", "good") for i in range(60)] + [pair(100 + i, "good", "bad") for i in range(40)]
    outcomes = judge_both_orders(pairs, ContentJudge())
    assert summary(outcomes).significant
    strict = summary(outcomes, min_win_rate=0.65)
    assert strict.total.p_value < 0.05 and not strict.significant


def test_regression_direction_and_category_breakdown():
    pairs = [pair(i, "good", "bad", "factual") for i in range(10)] + [pair(50 + i, "good", "good", "common")
                                                                        for i in range(4)]
    report = summary(judge_both_orders(pairs, ContentJudge()))
    assert report.significant_regression and not report.significant and report.verdict == "A is better"
    assert report.by_category["factual"].wins_a == 10 and report.by_category["common"].ties == 4


def test_judge_errors_are_counted_not_tied():
    pairs = [pair(0, "bad", "good"), pair(1, "broken", "good")]
    report = summary(judge_both_orders(pairs, ContentJudge()))
    assert report.total.errors == 1 and report.total.ties == 0 and report.total.decisive == 1
    assert report.judge_errors == {"unparseable": 1}


class OverallJudge:
    """Pointwise: overall = the number in the answer."""

    name = "overall"

    def __init__(self) -> None:
        self.calls = 0

    def judge(self, cases: Sequence[Case]) -> list[Judged]:
        self.calls += len(cases)
        return [Judged(c.id, score=PointwiseScore(correctness=3, helpfulness=3, clarity=3, safety=5,
                                                  overall=int(c.answer.split()[-1]), rationale="r")) for c in cases]


def test_hybrid_judges_pairwise_only_contested_cases():
    # Overall differences: 4 (uncontested), 1 and 0 (contested).
    pairs = [pair(0, "x 1", "good 5"), pair(1, "x 3", "good 4"), pair(2, "good 3", "x 3")]
    pairwise = ContentJudge()
    result = hybrid_compare(pairs, OverallJudge(), pairwise, EvaluationConfig())
    winners = {o.id: (o.winner, o.source) for o in result.outcomes}
    assert winners == {"0": ("B", "pointwise"), "1": ("B", "pairwise"), "2": ("A", "pairwise")}
    assert (result.pointwise_calls, result.pairwise_calls, result.pairwise_calls_saved) == (6, 4, 2)
    assert pairwise.calls == 4


def test_join_reports_missing_duplicate_and_bad_records(tmp_path):
    def write(path, rows):
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))

    row = {"question": "q?", "context": "c", "answer": "a"}
    write(tmp_path / "a.jsonl", [{**row, "id": "1"}, {**row, "id": "2"}, {**row, "id": "2"}, "{not json"])
    write(tmp_path / "b.jsonl", [{**row, "id": "1"}, {**row, "id": "3"}, {"id": "4", "question": "q?"}])
    joined = join_runs(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert [a.id for a, _ in joined.pairs] == ["1"]
    assert joined.only_in_a == ["2"] and joined.only_in_b == ["3"]
    assert len(joined.errors) == 2 and any("answer" in str(e) for e in joined.errors)
    assert joined.duplicates and "2" in joined.duplicates[0]
