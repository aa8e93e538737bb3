"""Test sets: exact quotas when building, a tolerance when checking, a share replaced on refresh."""

from __future__ import annotations

from collections import Counter

import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.evaluation.config import EvalSetConfig
from autovalidators.inference.evaluation.testsets import (
    QuotaError,
    build_testset,
    check_testset,
    quota_category,
    quota_counts,
    refresh_testset,
)

CONFIG = EvalSetConfig()


def pool(per_category: dict[str, int]) -> list[Case]:
    return [Case(id=f"{name}-{i}", question="q", answer="a", meta={"category": name})
            for name, n in per_category.items() for i in range(n)]


POOL = pool({"common": 100, "factual": 80, "ambiguous": 50, "out_of_scope": 30})


def categories(cases):
    return Counter(quota_category(c, CONFIG) for c in cases)


def test_quota_counts_sum_to_size():
    for size in (1, 7, 10, 33, 101):
        counts = quota_counts(size, CONFIG.quotas)
        assert sum(counts.values()) == size
        assert all(abs(counts[k] - size * q) < 1 for k, q in CONFIG.quotas.items())


def test_build_meets_quotas_exactly_and_is_seeded():
    chosen = build_testset(POOL, 100, CONFIG)
    assert categories(chosen) == {"common": 40, "factual": 30, "ambiguous": 20, "adversarial": 10}
    assert [c.id for c in chosen] == [c.id for c in build_testset(POOL, 100, CONFIG)]
    assert [c.id for c in chosen] != [c.id for c in build_testset(POOL, 100, CONFIG, seed=99)]
    assert check_testset(chosen, CONFIG).ok


def test_short_pool_names_the_category():
    with pytest.raises(QuotaError, match="adversarial: need 40, pool has 30"):
        build_testset(POOL, 400, CONFIG)


def test_check_flags_skew_unknown_categories_and_duplicates():
    skewed = pool({"common": 60, "factual": 10, "ambiguous": 20, "adversarial": 10})
    report = check_testset(skewed, CONFIG)
    assert not report.ok
    assert {r.category: r.ok for r in report.categories} == {"common": False, "factual": False,
                                                             "ambiguous": True, "adversarial": True}
    good = build_testset(POOL, 100, CONFIG)
    odd = good + [Case(id="x", question="q", answer="a", meta={"category": "weird"}), good[0]]
    report = check_testset(odd, CONFIG)
    assert report.uncategorized == ["x"] and report.duplicate_ids == [good[0].id] and not report.ok


def test_refresh_replaces_the_share_and_keeps_the_rest_in_place():
    current = build_testset(POOL, 100, CONFIG)
    result = refresh_testset(current, POOL, CONFIG)
    # 15% per category: round(0.15 * 40/30/20/10) = 6 + 4 + 3 + 2 (round half to even: 4.5 -> 4).
    assert len(result.removed) == len(result.added) == 15
    old_ids = {c.id for c in current}
    assert not set(result.added) & old_ids
    kept = [(o.id, n.id) for o, n in zip(current, result.cases) if o.id not in result.removed]
    assert all(a == b for a, b in kept) and len(kept) == 85
    assert categories(result.cases) == categories(current)
    assert len({c.id for c in result.cases}) == 100


def test_refresh_without_enough_fresh_cases_is_an_error():
    small_pool = pool({"common": 40, "factual": 40, "ambiguous": 20, "adversarial": 10})
    current = build_testset(small_pool, 100, CONFIG)
    with pytest.raises(QuotaError, match="common: need 6 fresh, pool has 0"):
        refresh_testset(current, small_pool, CONFIG)
