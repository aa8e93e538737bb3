"""Is system B better than system A? Pairwise judging in both orders, hybrid mode and the stats.

Protocol: every pair is judged twice, A-then-B and B-then-A. The same system named in both orders
wins; a different winner in each order is a position-inconsistent pair (a judge-bias figure) and,
with a tie in either order, counts as a tie. B's win rate among decisive pairs is tested against
0.5 with a one-sided binomial test; "significant" needs p < alpha AND win rate >= min_win_rate.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

from ..case import Case, CaseError, read_cases
from .config import EvaluationConfig
from .schema import Judged, JudgeOutputError, PairVerdict, Winner

logger = logging.getLogger(__name__)
UNCATEGORIZED = "uncategorized"


class PairwiseJudge(Protocol):
    name: str
    calls: int

    def judge_pairs(self, pairs: Sequence[tuple[Case, Case]]) -> list[PairVerdict | JudgeOutputError]: ...


class PointwiseJudge(Protocol):
    name: str
    calls: int

    def judge(self, cases: Sequence[Case]) -> list[Judged]: ...


@dataclass
class JoinedRuns:
    pairs: list[tuple[Case, Case]]
    only_in_a: list[str]
    only_in_b: list[str]
    errors: list[CaseError]
    duplicates: list[str]
    question_mismatch: list[str]


def _index(path: Path, errors: list[CaseError], duplicates: list[str]) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for record in read_cases(path):
        if isinstance(record, CaseError):
            errors.append(record)
        elif record.id in cases:
            duplicates.append(f"{path}: {record.id}")
        else:
            cases[record.id] = record
    return cases


def join_runs(path_a: str | Path, path_b: str | Path) -> JoinedRuns:
    """Pairs the two runs' cases by id (in A's order); bad lines and one-sided ids are reported."""
    errors: list[CaseError] = []
    duplicates: list[str] = []
    a, b = _index(Path(path_a), errors, duplicates), _index(Path(path_b), errors, duplicates)
    pairs = [(a[i], b[i]) for i in a if i in b]
    mismatch = [x.id for x, y in pairs if x.question.strip() != y.question.strip()]
    if mismatch:
        logger.warning("%d joined id(s) have different questions in the two runs, e.g. %s", len(mismatch), mismatch[0])
    return JoinedRuns(pairs, [i for i in a if i not in b], [i for i in b if i not in a], errors, duplicates, mismatch)


def category_of(a: Case, b: Case) -> str:
    value = a.meta.get("category", b.meta.get("category"))
    return str(value) if value not in (None, "") else UNCATEGORIZED


@dataclass
class PairOutcome:
    """One case's result. `a_then_b`/`b_then_a` name the winning *system* ("A", "B", "tie")."""

    id: str
    category: str
    winner: str  # "A", "B", "tie" or "error"
    source: str  # "pairwise" or "pointwise" (hybrid, uncontested)
    a_then_b: str | None = None
    b_then_a: str | None = None
    position_inconsistent: bool = False
    overall_a: int | None = None
    overall_b: int | None = None
    rationale: str = ""
    error: str | None = None


def _system(verdict: PairVerdict, first: str, second: str) -> str:
    return {Winner.FIRST: first, Winner.SECOND: second, Winner.TIE: "tie"}[verdict.winner]


def _combine(case_id: str, category: str, ab: PairVerdict | JudgeOutputError,
             ba: PairVerdict | JudgeOutputError) -> PairOutcome:
    bad = [v for v in (ab, ba) if isinstance(v, JudgeOutputError)]
    if bad:
        return PairOutcome(case_id, category, "error", "pairwise", error=f"{bad[0].kind}: {bad[0]}")
    first, second = _system(ab, "A", "B"), _system(ba, "B", "A")
    flipped = "tie" not in (first, second) and first != second
    winner = first if first == second else "tie"
    rationale = f"A-then-B: {ab.rationale} | B-then-A: {ba.rationale}"
    return PairOutcome(case_id, category, winner, "pairwise", first, second, flipped, rationale=rationale)


def judge_both_orders(pairs: Sequence[tuple[Case, Case]], judge: PairwiseJudge) -> list[PairOutcome]:
    """Asks the judge about every (A, B) pair as A-then-B and as B-then-A, in one batch."""
    if not pairs:
        return []
    asked = [(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]
    verdicts = judge.judge_pairs(asked)
    if len(verdicts) != len(asked):
        raise RuntimeError(f"judge {judge.name} returned {len(verdicts)} verdicts for {len(asked)} pairs")
    n = len(pairs)
    return [_combine(a.id, category_of(a, b), verdicts[i], verdicts[n + i]) for i, (a, b) in enumerate(pairs)]


@dataclass
class HybridResult:
    outcomes: list[PairOutcome]
    pointwise_calls: int
    pairwise_calls: int
    pairwise_calls_saved: int  # against judging every pair in both orders


def _judge_missing(cases: list[Case], judge: PointwiseJudge, known: dict[str, Judged]) -> tuple[list[Judged], int]:
    """Pointwise judgements for `cases`, reusing `known` ones (by id); returns them and the calls made."""
    todo = [c for c in cases if c.id not in known or not known[c.id].ok]
    fresh = {j.id: j for j in judge.judge(todo)} if todo else {}
    return [fresh.get(c.id) or known[c.id] for c in cases], len(todo)


def hybrid_compare(pairs: Sequence[tuple[Case, Case]], pointwise: PointwiseJudge, pairwise: PairwiseJudge,
                   config: EvaluationConfig, *, known_a: dict[str, Judged] | None = None,
                   known_b: dict[str, Judged] | None = None) -> HybridResult:
    """Scores both systems pointwise, then judges pairwise only the contested cases.

    Contested: the two `overall` scores differ by at most `hybrid.contested_within`, or either side
    could not be scored. Elsewhere the higher overall wins without a pairwise call. `known_a` /
    `known_b` are pointwise scores already paid for (e.g. the baseline's monitoring run), by id;
    only the rest are judged, which is where hybrid mode saves calls.
    """
    judged_a, calls_a = _judge_missing([a for a, _ in pairs], pointwise, known_a or {})
    judged_b, calls_b = _judge_missing([b for _, b in pairs], pointwise, known_b or {})
    contested: list[int] = []
    outcomes: list[PairOutcome | None] = []
    for index, ((a, b), ja, jb) in enumerate(zip(pairs, judged_a, judged_b)):
        if not ja.ok or not jb.ok or abs(ja.score.overall - jb.score.overall) <= config.hybrid.contested_within:
            contested.append(index)
            outcomes.append(None)
            continue
        winner = "A" if ja.score.overall > jb.score.overall else "B"
        outcomes.append(PairOutcome(
            a.id, category_of(a, b), winner, "pointwise", overall_a=ja.score.overall, overall_b=jb.score.overall,
            rationale=f"A: {ja.score.rationale} | B: {jb.score.rationale}",
        ))
    decided = judge_both_orders([pairs[i] for i in contested], pairwise)
    for index, outcome in zip(contested, decided):
        ja, jb = judged_a[index], judged_b[index]
        outcome.overall_a = ja.score.overall if ja.ok else None
        outcome.overall_b = jb.score.overall if jb.ok else None
        outcomes[index] = outcome
    return HybridResult(
        outcomes=[o for o in outcomes if o is not None],
        pointwise_calls=calls_a + calls_b,
        pairwise_calls=2 * len(contested),
        pairwise_calls_saved=2 * (len(pairs) - len(contested)),
    )


@dataclass
class Tally:
    pairs: int = 0
    wins_a: int = 0
    wins_b: int = 0
    ties: int = 0
    position_inconsistent: int = 0
    errors: int = 0
    decisive: int = 0
    win_rate_b: float | None = None
    p_value: float | None = None


def _tally(outcomes: Sequence[PairOutcome]) -> Tally:
    counts = Counter(o.winner for o in outcomes)
    tally = Tally(pairs=len(outcomes), wins_a=counts["A"], wins_b=counts["B"], ties=counts["tie"],
                  position_inconsistent=sum(o.position_inconsistent for o in outcomes), errors=counts["error"])
    tally.decisive = tally.wins_a + tally.wins_b
    if tally.decisive:
        tally.win_rate_b = tally.wins_b / tally.decisive
        tally.p_value = binomial_p(tally.wins_b, tally.decisive, "greater")
    return tally


def binomial_p(successes: int, trials: int, alternative: str) -> float:
    """One-sided exact binomial test against 0.5 (scipy); 1.0 when there is nothing to test."""
    if trials == 0:
        return 1.0
    try:
        from scipy.stats import binomtest
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the significance test needs scipy: pip install 'autovalidators[eval]'") from exc
    return float(binomtest(successes, trials, p=0.5, alternative=alternative).pvalue)


@dataclass
class CompareReport:
    judge: str
    mode: str
    alpha: float
    min_win_rate: float
    total: Tally
    p_value_a_better: float
    significant: bool  # B better than A
    significant_regression: bool  # A better than B: what a CI job on a candidate B fails on
    verdict: str
    by_category: dict[str, Tally]
    calls: dict[str, int]
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    bad_records: list[str] = field(default_factory=list)
    judge_errors: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bad_records(joined: JoinedRuns | None) -> list[str]:
    if joined is None:
        return []
    return [str(e) for e in joined.errors] + [f"duplicate id {d}" for d in joined.duplicates]


def summarize(outcomes: Sequence[PairOutcome], config: EvaluationConfig, *, judge: str, mode: str,
              calls: dict[str, int], joined: JoinedRuns | None = None) -> CompareReport:
    """Win rate of B, the one-sided tests both ways, significance and the per-category breakdown."""
    policy = config.pairwise
    total = _tally(outcomes)
    p_a = binomial_p(total.wins_a, total.decisive, "greater")
    rate_b = total.win_rate_b
    significant = rate_b is not None and total.p_value < policy.alpha and rate_b >= policy.min_win_rate
    regression = rate_b is not None and p_a < policy.alpha and (1 - rate_b) >= policy.min_win_rate
    verdict = "B is better" if significant else "A is better" if regression else "no significant difference"
    by_category = {name: _tally([o for o in outcomes if o.category == name])
                   for name in sorted({o.category for o in outcomes})}
    judge_errors = Counter((o.error or "").split(":", 1)[0] for o in outcomes if o.winner == "error")
    return CompareReport(
        judge=judge, mode=mode, alpha=policy.alpha, min_win_rate=policy.min_win_rate, total=total,
        p_value_a_better=p_a, significant=significant, significant_regression=regression, verdict=verdict,
        by_category=by_category, calls=calls,
        only_in_a=joined.only_in_a if joined else [], only_in_b=joined.only_in_b if joined else [],
        bad_records=_bad_records(joined),
        judge_errors=dict(judge_errors),
    )
