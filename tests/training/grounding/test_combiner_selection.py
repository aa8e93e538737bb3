"""Dev-time selection for the fact-span combiner: thresholds, answer calibration, char F1 (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from autovalidators.training.grounding.selection import (MAX_THRESHOLD, MIN_THRESHOLD,  # noqa: E402
                                                        best_f1_threshold, choose_threshold,
                                                        fit_answer_calibration)


def _f1(scores, gold, cut):
    predicted = scores >= cut
    return 2 * (predicted & gold).sum() / (predicted.sum() + gold.sum())


def test_mean_objective_lets_a_small_set_count_as_much_as_a_big_one():
    rng = np.random.default_rng(0)
    # "big": 1000 answers, 90% hallucinated, scores barely separate them: flag nearly all of them
    big_gold = rng.random(1000) < 0.9
    big_scores = np.clip(rng.normal(np.where(big_gold, 0.55, 0.45), 0.15), 0, 1)
    # "small": 40 answers, 20% hallucinated, well separated around 0.7
    small_gold = np.arange(40) < 8
    small_scores = np.where(small_gold, rng.uniform(0.75, 0.95, 40), rng.uniform(0.2, 0.65, 40))
    scores, gold = np.concatenate([big_scores, small_scores]), np.concatenate([big_gold, small_gold])
    groups = np.asarray(["big"] * 1000 + ["small"] * 40)
    pooled, _ = choose_threshold(scores, gold, groups, "pooled")
    mean, mean_f1 = choose_threshold(scores, gold, groups, "mean")
    big, small = groups == "big", groups == "small"
    assert _f1(small_scores, small_gold, mean) > _f1(small_scores, small_gold, pooled) + 0.2
    assert mean_f1 == pytest.approx((_f1(big_scores, big_gold, mean) + _f1(small_scores, small_gold, mean)) / 2)
    assert mean_f1 >= (_f1(scores[big], gold[big], pooled) + _f1(scores[small], gold[small], pooled)) / 2


def test_identical_groups_make_the_mean_and_the_pooled_objective_agree():
    rng = np.random.default_rng(1)
    gold = rng.random(200) < 0.5
    scores = np.clip(rng.normal(np.where(gold, 0.6, 0.4), 0.2), 0, 1)
    both = np.concatenate([scores, scores]), np.concatenate([gold, gold])
    groups = np.asarray(["a"] * 200 + ["b"] * 200)
    assert choose_threshold(*both, groups, "mean") == pytest.approx(choose_threshold(*both, groups, "pooled"))


def test_best_f1_threshold_stays_inside_the_open_interval():
    cut, f1 = best_f1_threshold(np.asarray([0.3, 0.5, 0.9]), np.asarray([True, True, True]))
    assert cut == pytest.approx(0.3) and f1 == 1.0
    cut, _ = best_f1_threshold(np.asarray([0.0, 0.0, 1.0]), np.asarray([True, True, False]))
    assert MIN_THRESHOLD <= cut <= MAX_THRESHOLD  # never 0: a cut of 0 flags every answer


class _Answers:
    """The slice of `combiner.Featurised` the calibration reads."""

    def __init__(self, records, owners):
        self.records, self.owners = records, np.asarray(owners)


def test_answer_calibration_learns_that_long_answers_need_a_higher_worst_sentence():
    rng = np.random.default_rng(0)
    records, owners, unsupported = [], [], []
    for index in range(400):
        claims = int(rng.integers(1, 9))
        hallucinated = rng.random() < 0.4
        # a faithful answer's worst sentence rises with its length (the maximum of more draws)
        worst = rng.beta(4, 2) if hallucinated else max(rng.beta(2, 4, claims))
        p = np.minimum(rng.beta(2, 4, claims), worst)
        p[0] = worst
        records.append({"label": 0 if hallucinated else 1, "source": "ragtruth" if index % 2 else "xsumfaith"})
        owners += [index] * claims
        unsupported.append(p)
    calibration = fit_answer_calibration(_Answers(records, owners), np.concatenate(unsupported), {"ragtruth": 3.0})
    assert calibration.max_logit > 0 and calibration.log_claims < 0
