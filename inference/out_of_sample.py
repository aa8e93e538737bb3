"""How far a fit's own rates are from the rates on answers it was not fitted on, and a fit held to
the latter: `calibrate --out-of-sample N` and `--hold-out-of-sample`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .minimums import (Acceptance, accepted_by_task, fit_minimums, fit_scope, grid_indices, hand_set_minimums,
                       shortfall)

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


def out_of_sample(acceptance: Acceptance, good: np.ndarray, task_of_case: np.ndarray, groups: np.ndarray, *,
                  max_miss: float, per_task: bool, sources: np.ndarray | None = None,
                  rounds: int = OUT_OF_SAMPLE_ROUNDS, seed: int = 0,
                  task_limits: dict[str, float] | None = None) -> dict[str, Any]:
    """The rates a fit's own numbers hide. `rounds` times: set aside a quarter of each task type's
    answer groups (`groups`: answers to one question or article stay together), fit the minimums on
    the rest exactly as `calibrate` does, and decide the set-aside answers with them. A case's
    out-of-sample decisions are pooled over the rounds that set it aside (pooled rates, also when
    `sources` balances the fit).

    Why: minimums chosen among 22^4 x 3 combinations on a hundred or two labelled answers per task fit
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
        overall, tasks, _ = fit_scope(acceptance, good, task_of_case, fit_on, max_miss=max_miss,
                                      per_task=per_task, sources=sources, task_limits=task_limits)
        accepted = accepted_by_task(acceptance, task_of_case, overall, tasks)
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


def held_limits(acceptance: Acceptance, good: np.ndarray, task_of_case: np.ndarray, groups: np.ndarray, *,
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
    hand_set = hand_set_minimums()
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
                accepted = acceptance.accepted(grid_indices(fit.minimums))
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
