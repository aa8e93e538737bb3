"""`autovalidators calibrate LABELLED.jsonl --max-miss 0.10`: the gate's minimums fitted to your cases.

Every validator runs once per case (`Gate.score_batch`); each candidate set of minimums then only
re-runs the decision policy, so thousands of candidates cost seconds. The fit searches every
combination of a grid of minimums for the lowest friction (good answers not ACCEPTed) whose miss rate (bad
answers ACCEPTed) is at most `max_miss`. Minimums per task type (QA, Summary, Data2txt) are fitted
where that task has enough labels of its own, each task held to `max_miss` on its own cases, so no
task pays for another.

Too few labels make a miss rate a guess: with n bad answers its standard error is
sqrt(m(1-m)/n); the command refuses until that is at most half the allowed rate m (n >= 4(1-m)/m:
36 bad answers at m = 0.10) and there are `MIN_GOOD` good answers, and says how many more it needs.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml

from .config import THRESHOLD_CHECKS, ChecksPolicy, GateConfig, TaskPolicy
from .gate import Gate, Scored
from .gate_quality import Labelled, balanced_rates, rates
from .results import Decision

# context_quality is not tuned: its job is routing (a question the context does not cover goes to
# abstention or to retrieval, `missing_abstention` / `poor_retrieval`), which good/bad labels cannot
# see; every other rule catches those answers anyway, so a fit would only ever lower it to 0.
TUNED_CHECKS = ("grounding", "span_grounding", "relevance", "agreement")
# Minimums tried: fine near 0, where a lexical score of a good answer often sits just above nothing.
GRID = (0.0, 0.01, 0.02, 0.05) + tuple(round(0.05 * i, 2) for i in range(2, 20))  # .. 0.95
MIN_GOOD = 30
MIN_SEPARABLE = 10  # good and bad answers a check must apply to before its ROC-AUC is reported


class TooFewLabels(ValueError):
    """The labelled cases cannot support the requested miss rate; the message says how many more."""


def labels_needed(max_miss: float) -> int:
    """Bad answers needed before a miss rate of `max_miss` is measured to within half of itself."""
    return math.ceil(4 * (1 - max_miss) / max_miss)


def shortfall(good: int, bad: int, max_miss: float) -> str | None:
    need_bad = labels_needed(max_miss)
    missing = [f"{need_bad - bad} more bad answers" if bad < need_bad else "",
               f"{MIN_GOOD - good} more good answers" if good < MIN_GOOD else ""]
    missing = [m for m in missing if m]
    if not missing:
        return None
    return (f"{good} good and {bad} bad answers cannot pin a miss rate of {max_miss:.2f} down (its standard "
            f"error would exceed half of it); label {' and '.join(missing)}")


@dataclass
class Fit:
    minimums: dict[str, float]
    friction: float
    miss: float


class _Acceptance:
    """Which cases the gate ACCEPTs under any minimums of the tuned checks, without re-deciding.

    Why this is exact: every rule that stops an answer either reads no tuned minimum (unsafe tone,
    an invalid score, abstaining although the context covers the question, a declared check) or
    fires only when an applicable required tuned check fails. So a case is ACCEPTed iff it is
    ACCEPTed with every tuned minimum at 0 and each of its applicable tuned scores reaches its
    minimum. `calibrate` re-decides the fitted minimums with the real policy and stops if the two
    ever disagree.
    """

    def __init__(self, open_: np.ndarray, scores: np.ndarray):
        """`open_`: ACCEPTed with every tuned minimum at 0; `scores[case, check]` (TUNED_CHECKS order),
        NaN where the check does not apply or is not required."""
        self.open = np.asarray(open_, dtype=bool)
        self.scores = np.asarray(scores, dtype=float)
        # passes[c][v]: the cases whose check c passes at minimum GRID[v] (not applying = passing)
        self.passes = [[np.isnan(scores[:, c]) | (np.nan_to_num(scores[:, c]) >= value) for value in GRID]
                       for c in range(len(TUNED_CHECKS))]

    @classmethod
    def of_gate(cls, gate: Gate, scored: Sequence[Scored], base: GateConfig) -> "_Acceptance":
        zero = config_with(base, {name: 0.0 for name in TUNED_CHECKS}, {})
        results = [gate.decide(s, zero) for s in scored]
        scores = np.full((len(scored), len(TUNED_CHECKS)), np.nan)
        for row, result in enumerate(results):
            checks = {c.name: c for c in result.checks}
            for column, name in enumerate(TUNED_CHECKS):
                check = checks[name]
                if check.applies and check.score is not None and getattr(base.checks, name).required:
                    scores[row, column] = check.score
        return cls(np.array([r.decision is Decision.ACCEPT for r in results], dtype=bool), scores)

    def accepted(self, indices: Sequence[int]) -> np.ndarray:
        mask = self.open.copy()
        for column, index in enumerate(indices):
            mask &= self.passes[column][index]
        return mask


def fit_minimums(acceptance: _Acceptance, good: np.ndarray, mask: np.ndarray, *, max_miss: float,
                 prefer_near: dict[str, float], pinned: tuple[np.ndarray, np.ndarray] | None = None,
                 sources: np.ndarray | None = None) -> Fit:
    """The least friction at miss <= max_miss over every combination of GRID minimums (22^4, counted
    with matrix products: 0.2 s for 615 cases): coordinate descent from a coarse grid stopped at a
    local optimum (data-to-text friction 75.0% on dev_real where this finds 54.7%). Among equally good
    candidates the one nearest `prefer_near` wins: a minimum moves from the hand-set default only as
    far as the data pays for.

    `pinned` = (which cases, their acceptance): cases decided by other minimums (their task's own),
    counted in the rates but not moved by the candidate. `sources` (one per case): the rates are
    averaged over them (`balanced_rates`) instead of pooled."""
    pinned_cases, pinned_accept = pinned if pinned is not None else (np.zeros(len(good), dtype=bool), None)
    in_scope = np.flatnonzero(mask)
    groups = sources[in_scope] if sources is not None else np.zeros(len(in_scope), dtype=int)
    # One column per (source, good/bad) with any case: accepted counts per combination are then
    # passes @ membership, and the rates follow from the counts as `rates` / `balanced_rates` compute them.
    pairs = [(str(g), bool(x)) for g, x in zip(groups, good[in_scope])]
    keys = sorted(set(pairs))
    member = np.zeros((len(in_scope), len(keys)))
    member[np.arange(len(in_scope)), [keys.index(pair) for pair in pairs]] = 1.0
    totals = member.sum(axis=0)
    moving = ~pinned_cases[in_scope]
    fixed = (member[~moving] * pinned_accept[in_scope][~moving, None]).sum(axis=0) if pinned_accept is not None \
        else np.zeros(len(keys), dtype=np.float64)
    open_ = acceptance.open[in_scope] & moving
    passes = [np.array([p[in_scope] for p in acceptance.passes[c]], dtype=bool) for c in range(len(TUNED_CHECKS))]
    first_two = (passes[0][:, None, :] & passes[1][None, :, :] & open_).reshape(-1, len(in_scope))
    last_two = (passes[2][:, None, :] & passes[3][None, :, :]).reshape(-1, len(in_scope)).astype(np.float64)
    counts = np.empty((first_two.shape[0], last_two.shape[0], len(keys)), dtype=np.float64)
    for row, accepted in enumerate(first_two):
        counts[row] = (last_two * accepted) @ member + fixed
    accepted_share = counts / np.maximum(totals, 1)
    good_columns = np.array([key[1] for key in keys], dtype=bool)
    friction = (1 - accepted_share[..., good_columns]).mean(axis=-1) if good_columns.any() else np.zeros(counts.shape[:2])
    miss = accepted_share[..., ~good_columns].mean(axis=-1) if (~good_columns).any() else np.zeros(counts.shape[:2])
    # How far each combination moves the minimums from `prefer_near`, in the same (first two, last two) layout.
    distance = [np.abs(np.array(GRID) - prefer_near[name]) for name in TUNED_CHECKS]
    moved = ((distance[0][:, None] + distance[1][None, :]).reshape(-1, 1)
             + (distance[2][:, None] + distance[3][None, :]).reshape(1, -1))
    feasible = miss <= max_miss + 1e-12
    # Feasible candidates first, by friction, then miss; infeasible ones by how far over the limit.
    order = np.lexsort((np.round(moved, 6).ravel(), np.where(feasible, miss, friction).round(9).ravel(),
                        np.where(feasible, friction, miss).round(9).ravel(), (~feasible).ravel()))
    best_first, best_last = divmod(int(order[0]), last_two.shape[0])
    indices = [*divmod(best_first, len(GRID)), *divmod(best_last, len(GRID))]
    return Fit({name: GRID[i] for name, i in zip(TUNED_CHECKS, indices)},
               float(friction[best_first, best_last]), float(miss[best_first, best_last]))


def miss_friction_curves(acceptance: _Acceptance, good: np.ndarray, minimums: dict[str, float]
                         ) -> dict[str, list[dict[str, float]]]:
    """Per check: friction and miss over GRID with the other checks at `minimums`, on every case."""
    current = _indices(minimums)
    curves = {}
    for column, name in enumerate(TUNED_CHECKS):
        points = []
        for index, value in enumerate(GRID):
            friction, miss = rates(good, acceptance.accepted(current[:column] + [index] + current[column + 1:]))
            points.append({"minimum": value, "friction": friction or 0.0, "miss": miss or 0.0})
        curves[name] = points
    return curves


def _auc(scores: np.ndarray, good: np.ndarray) -> float:
    """ROC-AUC from ranks (ties count half): the chance that a good answer outscores a bad one."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]  # 1-based, tied scores share their average rank
    n_good = int(good.sum())
    return float((ranks[good].sum() - n_good * (n_good + 1) / 2) / (n_good * (len(good) - n_good)))


def separability(acceptance: _Acceptance, good: np.ndarray, task_of_case: np.ndarray, datasets: np.ndarray, *,
                 resamples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Per scope (all cases, each task type, each task x dataset) and tuned check: how well the
    check's score alone separates good from bad answers where it applies, as ROC-AUC with a 95%
    bootstrap interval. A task's datasets can fail in different ways (QA on dev: RAGTruth's
    hallucinated answers are ungrounded, WikiQA's off-topic ones are grounded sentences of the
    passage), so a check can separate each dataset and not their pool.

    Why: a minimum can only trade friction for misses along its check's ROC curve. On the dev real
    answers no check reaches 0.7 on summaries, so no set of minimums serves most good summaries while
    stopping most bad ones; a better fit cannot fix that, a better signal can. Scopes or checks with
    fewer than `MIN_SEPARABLE` good or bad answers are left out."""
    rng = np.random.default_rng(seed)
    rows = []
    scopes = {"all": np.ones(len(good), dtype=bool)}
    for task in sorted({str(t) for t in task_of_case}):
        scopes[task] = task_of_case == task
        named = sorted({str(d) for d in datasets[scopes[task]] if str(d)})
        scopes.update({f"{task} {d}": scopes[task] & (datasets == d) for d in named if len(named) > 1})
    for scope, in_scope in scopes.items():
        for column, name in enumerate(TUNED_CHECKS):
            applies = in_scope & ~np.isnan(acceptance.scores[:, column])
            scores, labels = acceptance.scores[applies, column], good[applies]
            n_good, n_bad = int(labels.sum()), int((~labels).sum())
            if min(n_good, n_bad) < MIN_SEPARABLE:
                continue
            draws = rng.integers(0, len(labels), size=(resamples, len(labels)))
            aucs = [_auc(scores[d], labels[d]) for d in draws if 0 < labels[d].sum() < len(d)]
            rows.append({"scope": scope, "check": name, "good": n_good, "bad": n_bad,
                         "roc_auc": round(_auc(scores, labels), 4),
                         "roc_auc_ci": [round(float(np.percentile(aucs, 2.5)), 4),
                                        round(float(np.percentile(aucs, 97.5)), 4)]})
    return rows


def _indices(minimums: dict[str, float]) -> list[int]:
    return [GRID.index(minimums[name]) for name in TUNED_CHECKS]


def _fit_scope(acceptance: _Acceptance, good: np.ndarray, task_of_case: np.ndarray, scope: np.ndarray, *,
               max_miss: float, per_task: bool, sources: np.ndarray | None = None,
               task_limits: dict[str, float] | None = None) -> tuple[Fit, dict[str, Any], dict[str, str]]:
    """Minimums fitted on the cases in `scope`: per task type where it has enough labels, then the
    overall ones, which decide every other task (the fitted tasks pinned, so the combination keeps
    miss <= max_miss too). `task_limits`: the miss limit a task's own fit is held to, where it is not
    `max_miss` (`held_limits`)."""
    # Ties go to the schema's hand-set defaults, not to the base file's minimums: fitting the fitted
    # config again then gives the same config.
    hand_set = {name: getattr(ChecksPolicy(), name).minimum for name in TUNED_CHECKS}
    tasks: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    pinned_cases = np.zeros(len(good), dtype=bool)
    pinned_accept = np.zeros(len(good), dtype=bool)
    for task in sorted({str(t) for t in task_of_case[scope]}) if per_task else []:
        mask = scope & (task_of_case == task)
        problem = shortfall(int(good[mask].sum()), int((~good[mask]).sum()), max_miss)
        if problem:
            skipped[task] = problem
            continue
        limit = (task_limits or {}).get(task, max_miss)
        fit = fit_minimums(acceptance, good, mask, max_miss=limit, prefer_near=hand_set, sources=sources)
        tasks[task] = {"fit": fit, "good": int(good[mask].sum()), "bad": int((~good[mask]).sum())}
        pinned_cases |= mask
        pinned_accept[mask] = acceptance.accepted(_indices(fit.minimums))[mask]
    overall = fit_minimums(acceptance, good, scope, max_miss=max_miss, prefer_near=hand_set,
                           pinned=(pinned_cases, pinned_accept) if skipped and tasks else None, sources=sources)
    return overall, tasks, skipped


def _accepted(acceptance: _Acceptance, task_of_case: np.ndarray, overall: Fit, tasks: dict[str, Any]) -> np.ndarray:
    """Every case under its task's minimums (the overall ones where its task has none)."""
    accepted = acceptance.accepted(_indices(overall.minimums))
    for task, entry in tasks.items():
        mask = task_of_case == task
        accepted[mask] = acceptance.accepted(_indices(entry["fit"].minimums))[mask]
    return accepted


# Out of sample: the share of each task's answer groups set aside per round, and the rounds by default.
HOLDOUT_SHARE = 0.25
OUT_OF_SAMPLE_ROUNDS = 20


def _set_aside(task_of_case: np.ndarray, groups: np.ndarray, rounds: int, seed: int):
    """`rounds` masks of the cases set aside: a quarter of each task type's answer groups, drawn anew
    each round (the same seed draws the same rounds)."""
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        held = np.zeros(len(groups), dtype=bool)
        for task in np.unique(task_of_case):
            in_task = task_of_case == task
            names = np.unique(groups[in_task])
            aside = rng.choice(names, size=max(1, round(HOLDOUT_SHARE * len(names))), replace=False)
            held |= in_task & np.isin(groups, aside)
        yield held


def out_of_sample(acceptance: _Acceptance, good: np.ndarray, task_of_case: np.ndarray, groups: np.ndarray, *,
                  max_miss: float, per_task: bool, sources: np.ndarray | None = None,
                  rounds: int = OUT_OF_SAMPLE_ROUNDS, seed: int = 0,
                  task_limits: dict[str, float] | None = None) -> dict[str, Any]:
    """The rates a fit's own numbers hide. `rounds` times: set aside a quarter of each task type's
    answer groups (`groups`: answers to one question or article stay together), fit the minimums on
    the rest exactly as `calibrate` does, and decide the set-aside answers with them. A case's
    out-of-sample decisions are pooled over the rounds that set it aside (pooled rates, also when
    `sources` balances the fit).

    Why: minimums chosen among 22^4 combinations on a hundred or two labelled answers per task fit
    some of their noise, so the rates measured on the fitting answers are optimistic. A refit moved
    by a few dev answers raised held-out summary friction by 4 points while its dev rates improved
    (inference/GATE_HISTORY.md, config 14). `spread` gives each fitted minimum's range over the rounds:
    one that jumps was set by a few answers. Rounds whose fitting part cannot support `max_miss` are
    skipped and counted."""
    decided = np.zeros(len(good))
    accepted_times = np.zeros(len(good))
    chosen: dict[str, dict[str, list[float]]] = {}
    skipped = 0
    for held in _set_aside(task_of_case, groups, rounds, seed):
        fit_on = ~held
        if shortfall(int(good[fit_on].sum()), int((~good[fit_on]).sum()), max_miss):
            skipped += 1
            continue
        overall, tasks, _ = _fit_scope(acceptance, good, task_of_case, fit_on, max_miss=max_miss,
                                       per_task=per_task, sources=sources, task_limits=task_limits)
        accepted = _accepted(acceptance, task_of_case, overall, tasks)
        decided[held] += 1
        accepted_times[held] += accepted[held]
        for task in ["all", *np.unique(task_of_case)]:
            minimums = overall.minimums if task == "all" else tasks.get(str(task), {"fit": overall})["fit"].minimums
            for name, value in minimums.items():
                chosen.setdefault(str(task), {}).setdefault(name, []).append(value)

    def pooled(scope: np.ndarray) -> dict[str, float | None]:
        good_seen, bad_seen = decided[scope & good].sum(), decided[scope & ~good].sum()
        return {"friction": float((decided - accepted_times)[scope & good].sum() / good_seen) if good_seen else None,
                "miss": float(accepted_times[scope & ~good].sum() / bad_seen) if bad_seen else None}

    scopes = {"all": np.ones(len(good), dtype=bool), **{str(t): task_of_case == t for t in np.unique(task_of_case)}}
    return {"rounds": rounds - skipped, "skipped_rounds": skipped, "holdout_share": HOLDOUT_SHARE,
            "rates": {scope: pooled(mask) for scope, mask in scopes.items()},
            "spread": {scope: {name: {"low": min(values), "median": float(np.median(values)), "high": max(values)}
                               for name, values in by_check.items()} for scope, by_check in chosen.items()}}


# Miss limits a task's fit may be held to so that its out-of-sample misses stay within --max-miss:
# from --max-miss down to half of it, in this many steps.
LIMIT_STEPS = 8


def held_limits(acceptance: _Acceptance, good: np.ndarray, task_of_case: np.ndarray, groups: np.ndarray, *,
                max_miss: float, sources: np.ndarray | None = None, rounds: int = OUT_OF_SAMPLE_ROUNDS,
                seed: int = 0) -> dict[str, Any]:
    """Per task type with enough labels, the miss limit to fit it at so that its out-of-sample miss
    rate, not its fitted one, stays at most `max_miss`: the largest of LIMIT_STEPS limits from
    `max_miss` down to half of it whose fits, on the rounds of `_set_aside`, serve at most `max_miss`
    of the set-aside bad answers (the lowest limit when none does). `curves` has every limit's
    out-of-sample friction and miss.

    Why: a fit held to a limit on its own answers serves more bad answers than that on new ones, by
    an amount that depends on how well a task's checks separate (dev real answers at 0.12: data-to-text
    9.7% out of sample, QA 15.3%); one safety margin for every task is too much for one and too little
    for another."""
    hand_set = {name: getattr(ChecksPolicy(), name).minimum for name in TUNED_CHECKS}
    limits = [round(float(v), 4) for v in np.linspace(max_miss, max_miss / 2, LIMIT_STEPS)]
    counts: dict[str, np.ndarray] = {}  # task -> per limit: good, good stopped, bad, bad served
    for held in _set_aside(task_of_case, groups, rounds, seed):
        for task in np.unique(task_of_case):
            mask = (task_of_case == task) & ~held
            if shortfall(int(good[mask].sum()), int((~good[mask]).sum()), max_miss):
                continue
            aside = held & (task_of_case == task)
            tally = counts.setdefault(str(task), np.zeros((len(limits), 4)))
            for row, limit in enumerate(limits):
                fit = fit_minimums(acceptance, good, mask, max_miss=limit, prefer_near=hand_set, sources=sources)
                accepted = acceptance.accepted(_indices(fit.minimums))
                tally[row] += [(aside & good).sum(), (aside & good & ~accepted).sum(),
                               (aside & ~good).sum(), (aside & ~good & accepted).sum()]
    chosen, curves = {}, {}
    for task, tally in counts.items():
        curves[task] = [{"limit": limit, "friction": float(t[1] / t[0]) if t[0] else None,
                         "miss": float(t[3] / t[2]) if t[2] else None} for limit, t in zip(limits, tally)]
        within = [point["limit"] for point in curves[task] if point["miss"] is not None
                  and point["miss"] <= max_miss + 1e-12]
        chosen[task] = within[0] if within else limits[-1]
    return {"limits": chosen, "curves": curves}


def calibrate(gate: Gate, labelled: Sequence[Labelled], *, max_miss: float, source: Path,
              per_task: bool = True, leave_one_out: bool = False, balance: bool = False,
              out_of_sample_rounds: int = OUT_OF_SAMPLE_ROUNDS, hold_out_of_sample: bool = False) -> dict[str, Any]:
    """Fitted minimums (overall and per task type) with their friction/miss on these cases and curves.
    With `leave_one_out`, also the rates on each dataset (`meta.dataset`) of minimums fitted
    without it: what to expect on answers from a source the fit never saw.
    With `balance`, friction and miss are averaged over the datasets in each scope, not pooled: in a
    pooled rate, 59 off-topic WikiQA answers that relevance catches paid for 6 of 13 hallucinated
    RAG answers served, all inside one QA miss rate of 10%. Not the default: fitted that way on the
    dev real answers, the held-out split's RAGTruth QA misses fell from 78.6% to 35.7% but summary
    friction rose by 14 points and Russian misses by 6.6, both beyond the interval (README).
    With `out_of_sample_rounds` > 0, also the fit's out-of-sample rates (`out_of_sample`): what to
    expect on new answers from the same sources. With `hold_out_of_sample`, each task is fitted at the
    limit of `held_limits` instead of `max_miss`, and those rates come from other rounds than the
    ones that chose it.
    Raises TooFewLabels when the cases cannot support `max_miss`."""
    good = np.array([item.good for item in labelled], dtype=bool)
    problem = shortfall(int(good.sum()), int((~good).sum()), max_miss)
    if problem:
        raise TooFewLabels(f"{source}: {problem}")
    started = time.perf_counter()
    scored = gate.score_batch([item.case for item in labelled])
    scoring_s = time.perf_counter() - started
    base = gate.config.model_copy(update={"tasks": {}})
    acceptance = _Acceptance.of_gate(gate, scored, base)
    task_of_case = np.array([s.task for s in scored])
    datasets = np.array([str(item.case.meta.get("dataset", "")) for item in labelled])
    sources = datasets if balance else None
    everything = np.ones(len(scored), dtype=bool)
    groups = np.array([str(item.case.meta.get("group") or item.case.id) for item in labelled])
    held = (held_limits(acceptance, good, task_of_case, groups, max_miss=max_miss, sources=sources,
                        rounds=out_of_sample_rounds or OUT_OF_SAMPLE_ROUNDS) if hold_out_of_sample else None)
    task_limits = held["limits"] if held else None
    overall, tasks, skipped = _fit_scope(acceptance, good, task_of_case, everything, max_miss=max_miss,
                                         per_task=per_task, sources=sources, task_limits=task_limits)
    # The combined effect, every case under its own task's minimums, decided by the real policy.
    fitted = config_with(base, overall.minimums, {t: v["fit"].minimums for t, v in tasks.items()})
    accepted = np.array([gate.decide(s, fitted).decision is Decision.ACCEPT for s in scored], dtype=bool)
    if not np.array_equal(accepted, _accepted(acceptance, task_of_case, overall, tasks)):
        raise RuntimeError("the fast acceptance disagrees with the decision policy: a rule reads a tuned "
                           "minimum in a way _Acceptance does not know")
    friction, miss = rates(good, accepted)
    balanced = dict(zip(("friction", "miss"), balanced_rates(good, accepted, datasets)))
    held_out = []
    for dataset in sorted({str(d) for d in datasets}) if leave_one_out else []:
        left_out = datasets == dataset
        row: dict[str, Any] = {"dataset": dataset, "good": int(good[left_out].sum()), "bad": int((~good[left_out]).sum())}
        row["fitted_with_it"] = dict(zip(("friction", "miss"), rates(good[left_out], accepted[left_out])))
        rest = ~left_out
        problem = shortfall(int(good[rest].sum()), int((~good[rest]).sum()), max_miss)
        if problem:
            row["skipped"] = f"without it: {problem}"
        else:
            fit, fit_tasks, _ = _fit_scope(acceptance, good, task_of_case, rest, max_miss=max_miss, per_task=per_task,
                                           sources=sources, task_limits=task_limits)
            unseen = _accepted(acceptance, task_of_case, fit, fit_tasks)
            row["fitted_without_it"] = dict(zip(("friction", "miss"), rates(good[left_out], unseen[left_out])))
        held_out.append(row)
    # Rounds other than the ones that chose the limits (seed 1), so these rates did not pick them.
    unseen_rates = (out_of_sample(acceptance, good, task_of_case, groups, max_miss=max_miss, per_task=per_task,
                                  sources=sources, rounds=out_of_sample_rounds, task_limits=task_limits,
                                  seed=1 if held else 0) if out_of_sample_rounds else None)
    return {"overall": overall, "tasks": tasks, "skipped_tasks": skipped, "config": fitted,
            "out_of_sample": unseen_rates, "held_limits": held,
            "combined": {"friction": friction, "miss": miss, "good": int(good.sum()), "bad": int((~good).sum()),
                         "balanced_over_datasets": balanced},
            "balance": "dataset" if balance else None,
            "curves": miss_friction_curves(acceptance, good, overall.minimums),
            "separability": separability(acceptance, good, task_of_case, datasets),
            "leave_one_out": held_out, "scoring_s": scoring_s}


def config_with(base: GateConfig, minimums: dict[str, float], per_task: dict[str, dict[str, float]]) -> GateConfig:
    checks = base.checks.model_copy(update={
        name: getattr(base.checks, name).model_copy(update={"minimum": value}) for name, value in minimums.items()})
    tasks = {task: TaskPolicy(minimums={k: v for k, v in values.items() if v != minimums.get(k)})
             for task, values in per_task.items()}
    return base.model_copy(update={"checks": checks, "tasks": {t: p for t, p in tasks.items() if p.minimums}})


def render_config(base_text: str, config: GateConfig, provenance: dict[str, Any]) -> str:
    """The base YAML with its minimums replaced in place (its comments kept), and the `tasks` and
    `provenance` blocks (re)written at the end."""
    text = re.split(r"\n# ---- fitted by `autovalidators calibrate`", base_text)[0].rstrip("\n") + "\n"
    if re.search(r"(?m)^(tasks|provenance):", text):
        raise ValueError("the base config sets `tasks` or `provenance` itself; calibrate writes both, remove them")
    for name in THRESHOLD_CHECKS:
        minimum = getattr(config.checks, name).minimum
        text, count = re.subn(rf"(?m)^(\s+{name}:\s*\{{\s*minimum:\s*)[0-9.]+", rf"\g<1>{minimum:g}", text)
        if count != 1:
            raise ValueError(f"cannot find `{name}: {{minimum: ...}}` once in the base config; write the "
                             "checks in that flow style to calibrate it")
    block = {"tasks": {task: {"minimums": dict(policy.minimums)} for task, policy in config.tasks.items()},
             "provenance": provenance}
    return (text + "# ---- fitted by `autovalidators calibrate` (rewritten on every run; see provenance) ----\n"
            + yaml.safe_dump(block, sort_keys=False, allow_unicode=True, width=110))


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
