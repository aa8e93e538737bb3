"""Test sets with category quotas: build one from a pool, check one, refresh a share of one.

A test set is a JSONL of cases (the `validate` input format) whose `meta.category` names a quota
category (or an alias of one, e.g. out_of_scope -> adversarial). Sampling is seeded, so the same
pool, size and seed always give the same set. Refresh replaces `refresh_share` of the set with
cases from the pool that are not in it, category by category, and keeps the rest, so scores before
and after a refresh stay comparable on the kept part.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from typing import Sequence

from ..case import Case
from .config import EvalSetConfig

logger = logging.getLogger(__name__)


class QuotaError(ValueError):
    """The pool cannot satisfy the quotas; the message names each short category."""


def quota_category(case: Case, config: EvalSetConfig) -> str | None:
    """The quota category of a case, or None when its `meta.category` is missing or unknown."""
    raw = case.meta.get("category")
    if not isinstance(raw, str):
        return None
    name = config.aliases.get(raw.strip().lower(), raw.strip().lower())
    return name if name in config.quotas else None


def quota_counts(size: int, quotas: dict[str, float]) -> dict[str, int]:
    """Whole-case targets per category that sum to `size` (largest remainders get the leftovers)."""
    exact = {name: share * size for name, share in quotas.items()}
    counts = {name: math.floor(value) for name, value in exact.items()}
    leftover = size - sum(counts.values())
    for name in sorted(exact, key=lambda n: (counts[n] - exact[n], n))[:leftover]:
        counts[name] += 1
    return counts


def _by_category(cases: Sequence[Case], config: EvalSetConfig) -> tuple[dict[str, list[Case]], list[Case]]:
    groups: dict[str, list[Case]] = {name: [] for name in config.quotas}
    unknown = []
    for case in cases:
        name = quota_category(case, config)
        (groups[name] if name else unknown).append(case)
    return groups, unknown


def build_testset(pool: Sequence[Case], size: int, config: EvalSetConfig, *, seed: int | None = None) -> list[Case]:
    """A seeded sample of `size` cases from `pool` meeting the quotas exactly.

    Raises QuotaError listing every category the pool is short of, rather than a set that quietly
    misses its quotas.
    """
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    groups, unknown = _by_category(pool, config)
    if unknown:
        logger.warning("%d pool case(s) have no quota category in meta.category; skipped", len(unknown))
    targets = quota_counts(size, config.quotas)
    short = {n: (targets[n], len(groups[n])) for n in targets if len(groups[n]) < targets[n]}
    if short:
        details = ", ".join(f"{n}: need {need}, pool has {have}" for n, (need, have) in short.items())
        raise QuotaError(f"the pool cannot fill the quotas for {size} cases ({details}); "
                         "add cases of those categories or build a smaller set")
    rng = random.Random(config.seed if seed is None else seed)
    chosen = {id(c) for name, n in targets.items() for c in rng.sample(groups[name], n)}
    return [c for c in pool if id(c) in chosen]  # pool order: stable diffs between versions


@dataclass
class CategoryCheck:
    category: str
    count: int
    share: float
    quota: float
    ok: bool


@dataclass
class CheckReport:
    size: int
    ok: bool
    categories: list[CategoryCheck]
    uncategorized: list[str] = field(default_factory=list)
    duplicate_ids: list[str] = field(default_factory=list)


def check_testset(cases: Sequence[Case], config: EvalSetConfig) -> CheckReport:
    """Compares category shares with the quotas (within `tolerance`); flags unknown categories and duplicates."""
    groups, unknown = _by_category(cases, config)
    size = len(cases)
    rows = []
    for name, quota in config.quotas.items():
        share = len(groups[name]) / size if size else 0.0
        rows.append(CategoryCheck(name, len(groups[name]), share, quota, abs(share - quota) <= config.tolerance + 1e-9))
    seen: set[str] = set()
    duplicates = sorted({c.id for c in cases if c.id in seen or seen.add(c.id)})
    ok = bool(size) and all(r.ok for r in rows) and not unknown and not duplicates
    return CheckReport(size, ok, rows, [c.id for c in unknown], duplicates)


@dataclass
class RefreshResult:
    cases: list[Case]
    removed: list[str]
    added: list[str]


def refresh_testset(current: Sequence[Case], pool: Sequence[Case], config: EvalSetConfig,
                    *, seed: int | None = None) -> RefreshResult:
    """Replaces `refresh_share` of each category with fresh pool cases; keeps the rest in place.

    Fresh = an id not in the current set. A category whose pool has too few fresh cases is a
    QuotaError naming it, so a refresh never silently shrinks or skews the set.
    """
    rng = random.Random(config.seed if seed is None else seed)
    present = {c.id for c in current}
    groups, unknown = _by_category(current, config)
    fresh_groups, _ = _by_category([c for c in pool if c.id not in present], config)
    removed_ids: set[str] = set()
    replacements: dict[str, list[Case]] = {}
    short = []
    for name, members in groups.items():
        n = round(config.refresh_share * len(members))
        if n == 0:
            continue
        if len(fresh_groups[name]) < n:
            short.append(f"{name}: need {n} fresh, pool has {len(fresh_groups[name])}")
            continue
        removed_ids.update(c.id for c in rng.sample(members, n))
        replacements[name] = rng.sample(fresh_groups[name], n)
    if short:
        raise QuotaError("not enough fresh cases to refresh (" + "; ".join(short) + ")")
    # Each removed case's slot takes a fresh case of the same category, so positions stay stable.
    queues = {name: list(items) for name, items in replacements.items()}
    out, added = [], []
    for case in current:
        if case.id in removed_ids:
            fresh = queues[quota_category(case, config)].pop(0)
            out.append(fresh)
            added.append(fresh.id)
        else:
            out.append(case)
    if unknown:
        logger.warning("%d case(s) without a quota category were kept unchanged", len(unknown))
    return RefreshResult(out, sorted(removed_ids), added)
