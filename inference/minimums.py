"""The search behind `calibrate`: which answers the gate ACCEPTs under any minimums, and the
combination of minimums with the least friction at a miss limit, overall and per task type.

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

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .config import ChecksPolicy, GateConfig, TaskPolicy
from .gate import Gate, Scored
from .results import Decision

# context_quality is not tuned: its job is routing (a question the context does not cover goes to
# abstention or to retrieval, `missing_abstention` / `poor_retrieval`), which good/bad labels cannot
# see; every other rule catches those answers anyway, so a fit would only ever lower it to 0.
TUNED_CHECKS = ("grounding", "span_grounding", "specifics_grounding", "relevance", "agreement")
# Minimums tried: fine near 0, where a lexical score of a good answer often sits just above nothing.
GRID = (0.0, 0.01, 0.02, 0.05) + tuple(round(0.05 * i, 2) for i in range(2, 20))  # .. 0.95
# specifics_grounding is a share of a sentence's few numbers and names: off, at most half of them
# unknown, or every one known. Three values instead of 22 keep the search at seconds.
GRIDS: dict[str, tuple[float, ...]] = {name: GRID for name in TUNED_CHECKS} | {"specifics_grounding": (0.0, 0.5, 1.0)}
MIN_GOOD = 30


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


class Acceptance:
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
        # passes[c][v]: the cases whose check c passes at minimum GRIDS[c][v] (not applying = passing)
        self.passes = [[np.isnan(scores[:, c]) | (np.nan_to_num(scores[:, c]) >= value) for value in GRIDS[name]]
                       for c, name in enumerate(TUNED_CHECKS)]

    @classmethod
    def of_gate(cls, gate: Gate, scored: Sequence[Scored], base: GateConfig) -> "Acceptance":
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


def fit_minimums(acceptance: Acceptance, good: np.ndarray, mask: np.ndarray, *, max_miss: float,
                 prefer_near: dict[str, float], pinned: tuple[np.ndarray, np.ndarray] | None = None,
                 sources: np.ndarray | None = None) -> Fit:
    """The least friction at miss <= max_miss over every combination of GRIDS minimums (22^4 x 3,
    counted with matrix products: about a second for 615 cases): coordinate descent from a coarse grid
    stopped at a local optimum (data-to-text friction 75.0% on dev_real where this finds 54.7%). Among
    equally good candidates the one nearest `prefer_near` wins: a minimum moves from the hand-set
    default only as far as the data pays for.

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
    # The checks but the last two are enumerated in a loop ("head"), the last two in one matrix ("tail").
    head = open_[None, :]
    for check_passes in passes[:-2]:
        head = (head[:, None, :] & check_passes[None, :, :]).reshape(-1, len(in_scope))
    tail = (passes[-2][:, None, :] & passes[-1][None, :, :]).reshape(-1, len(in_scope)).astype(np.float64)
    counts = np.empty((head.shape[0], tail.shape[0], len(keys)), dtype=np.float64)
    for row, accepted in enumerate(head):
        counts[row] = (tail * accepted) @ member + fixed
    accepted_share = counts / np.maximum(totals, 1)
    good_columns = np.array([key[1] for key in keys], dtype=bool)
    friction = (1 - accepted_share[..., good_columns]).mean(axis=-1) if good_columns.any() else np.zeros(counts.shape[:2])
    miss = accepted_share[..., ~good_columns].mean(axis=-1) if (~good_columns).any() else np.zeros(counts.shape[:2])
    # How far each combination moves the minimums from `prefer_near`, in the same (head, tail) layout.
    distance = [np.abs(np.array(GRIDS[name]) - prefer_near[name]) for name in TUNED_CHECKS]
    head_moved = np.zeros(1)
    for moved_by in distance[:-2]:
        head_moved = (head_moved[:, None] + moved_by[None, :]).reshape(-1)
    moved = head_moved[:, None] + (distance[-2][:, None] + distance[-1][None, :]).reshape(1, -1)
    feasible = miss <= max_miss + 1e-12
    # Feasible candidates first, by friction, then miss; infeasible ones by how far over the limit.
    order = np.lexsort((np.round(moved, 6).ravel(), np.where(feasible, miss, friction).round(9).ravel(),
                        np.where(feasible, friction, miss).round(9).ravel(), (~feasible).ravel()))
    best_head, best_tail = divmod(int(order[0]), tail.shape[0])
    indices = [int(i) for i in np.unravel_index(best_head * tail.shape[0] + best_tail,
                                                [len(GRIDS[name]) for name in TUNED_CHECKS])]
    return Fit({name: GRIDS[name][i] for name, i in zip(TUNED_CHECKS, indices)},
               float(friction[best_head, best_tail]), float(miss[best_head, best_tail]))


def grid_indices(minimums: dict[str, float]) -> list[int]:
    return [GRIDS[name].index(minimums[name]) for name in TUNED_CHECKS]


def hand_set_minimums() -> dict[str, float]:
    """The schema's hand-set minimums, where ties between equally good fits go: to them, not to the
    base file's minimums, so that fitting the fitted config again gives the same config."""
    return {name: getattr(ChecksPolicy(), name).minimum for name in TUNED_CHECKS}


def fit_scope(acceptance: Acceptance, good: np.ndarray, task_of_case: np.ndarray, scope: np.ndarray, *,
              max_miss: float, per_task: bool, sources: np.ndarray | None = None,
              task_limits: dict[str, float] | None = None) -> tuple[Fit, dict[str, Any], dict[str, str]]:
    """Minimums fitted on the cases in `scope`: per task type where it has enough labels, then the
    overall ones, which decide every other task (the fitted tasks pinned, so the combination keeps
    miss <= max_miss too). `task_limits`: the miss limit a task's own fit is held to, where it is not
    `max_miss` (`held_limits`)."""
    hand_set = hand_set_minimums()
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
        pinned_accept[mask] = acceptance.accepted(grid_indices(fit.minimums))[mask]
    overall = fit_minimums(acceptance, good, scope, max_miss=max_miss, prefer_near=hand_set,
                           pinned=(pinned_cases, pinned_accept) if skipped and tasks else None, sources=sources)
    return overall, tasks, skipped


def accepted_by_task(acceptance: Acceptance, task_of_case: np.ndarray, overall: Fit,
                     tasks: dict[str, Any]) -> np.ndarray:
    """Every case under its task's minimums (the overall ones where its task has none)."""
    accepted = acceptance.accepted(grid_indices(overall.minimums))
    for task, entry in tasks.items():
        mask = task_of_case == task
        accepted[mask] = acceptance.accepted(grid_indices(entry["fit"].minimums))[mask]
    return accepted


def config_with(base: GateConfig, minimums: dict[str, float], per_task: dict[str, dict[str, float]]) -> GateConfig:
    checks = base.checks.model_copy(update={
        name: getattr(base.checks, name).model_copy(update={"minimum": value}) for name, value in minimums.items()})
    tasks = {task: TaskPolicy(minimums={k: v for k, v in values.items() if v != minimums.get(k)})
             for task, values in per_task.items()}
    return base.model_copy(update={"checks": checks, "tasks": {t: p for t, p in tasks.items() if p.minimums}})
