"""Proof that the local pairwise judge works: grounded beats 30%-hallucinated, identical is a draw.

Built from the shipped TyDi QA GoldP sample (Apache-2.0, inference/evaluation/data/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autovalidators.inference.evaluation.config import EvaluationConfig
from autovalidators.inference.evaluation.local_judge import LocalPairwiseJudge, LocalPointwiseJudge
from autovalidators.inference.evaluation.pairwise import judge_both_orders, summarize
from autovalidators.inference.evaluation.synthetic import build_systems, read_squad
from autovalidators.inference.gate import Gate

SAMPLE = Path(__file__).resolve().parents[3] / "inference" / "evaluation" / "data" / "tydiqa_goldp_en_dev_200.jsonl"


@pytest.fixture(scope="module")
def systems():
    return build_systems(read_squad(SAMPLE), hallucinate=0.3, seed=13, limit=120)


@pytest.fixture(scope="module")
def judge():
    return LocalPairwiseJudge(LocalPointwiseJudge(Gate(), EvaluationConfig()))


def test_builder_makes_aligned_systems_with_the_requested_share_injected(systems):
    grounded, hallucinated = systems
    assert len(grounded) == len(hallucinated) == 120
    assert [c.id for c in grounded] == [c.id for c in hallucinated]
    injected = [b for b in hallucinated if b.meta["injected"]]
    assert 0.25 * 120 <= len(injected) <= 0.3 * 120
    for a, b in zip(grounded, hallucinated):
        assert (a.answer != b.answer) == bool(b.meta["injected"])
        if a.meta["category"] != "adversarial":
            assert a.answer in a.context_text  # grounded = a sentence of the context
    assert {c.meta["category"] for c in grounded} == {"common", "factual", "ambiguous", "adversarial"}
    again = build_systems(read_squad(SAMPLE), hallucinate=0.3, seed=13, limit=120)
    assert [c.answer for c in again[1]] == [c.answer for c in hallucinated]


def test_local_judge_finds_the_grounded_system_better(systems, judge):
    grounded, hallucinated = systems
    config = EvaluationConfig()
    # B = grounded: B must win significantly.
    report = summarize(judge_both_orders(list(zip(hallucinated, grounded)), judge), config,
                       judge="local", mode="pairwise", calls={})
    assert report.significant and report.total.p_value < 0.05
    assert report.total.win_rate_b >= config.pairwise.min_win_rate
    assert report.total.position_inconsistent == 0
    # B = hallucinated: not better, and flagged as a regression.
    reverse = summarize(judge_both_orders(list(zip(grounded, hallucinated)), judge), config,
                        judge="local", mode="pairwise", calls={})
    assert not reverse.significant and reverse.significant_regression


def test_identical_systems_are_not_significant(systems, judge):
    grounded, _ = systems
    report = summarize(judge_both_orders(list(zip(grounded, grounded)), judge), EvaluationConfig(),
                       judge="local", mode="pairwise", calls={})
    assert not report.significant and not report.significant_regression
    assert report.total.decisive == 0 and report.total.ties == len(grounded)
