"""`autovalidators calibrate LABELLED.jsonl --max-miss 0.10`: the gate's minimums fitted to your cases,
with what to expect on answers the fit did not see (left-out datasets, out-of-sample rounds), the
miss-friction curve of every check and how well each separates good from bad answers.
The search itself is `minimums.py`; the out-of-sample rounds are `out_of_sample.py`.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml

from .config import THRESHOLD_CHECKS, GateConfig
from .gate import Gate
from .gate_quality import Labelled, balanced_rates, rates
from .minimums import (GRIDS, TUNED_CHECKS, Acceptance, TooFewLabels, accepted_by_task, config_with, fit_scope,
                       grid_indices, shortfall)
from .out_of_sample import OUT_OF_SAMPLE_ROUNDS, held_limits, out_of_sample
from .results import Decision

MIN_SEPARABLE = 10  # good and bad answers a check must apply to before its ROC-AUC is reported


def miss_friction_curves(acceptance: Acceptance, good: np.ndarray, minimums: dict[str, float]
                         ) -> dict[str, list[dict[str, float]]]:
    """Per check: friction and miss over its grid (GRIDS) with the other checks at `minimums`, on every case."""
    current = grid_indices(minimums)
    curves = {}
    for column, name in enumerate(TUNED_CHECKS):
        points = []
        for index, value in enumerate(GRIDS[name]):
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


def separability(acceptance: Acceptance, good: np.ndarray, task_of_case: np.ndarray, datasets: np.ndarray, *,
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


def calibrate(gate: Gate, labelled: Sequence[Labelled], *, max_miss: float, source: str | Path,
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
    acceptance = Acceptance.of_gate(gate, scored, base)
    task_of_case = np.array([s.task for s in scored])
    datasets = np.array([str(item.case.meta.get("dataset", "")) for item in labelled])
    sources = datasets if balance else None
    everything = np.ones(len(scored), dtype=bool)
    groups = np.array([str(item.case.meta.get("group") or item.case.id) for item in labelled])
    held = (held_limits(acceptance, good, task_of_case, groups, max_miss=max_miss, sources=sources,
                        rounds=out_of_sample_rounds or OUT_OF_SAMPLE_ROUNDS) if hold_out_of_sample else None)
    task_limits = held["limits"] if held else None
    overall, tasks, skipped = fit_scope(acceptance, good, task_of_case, everything, max_miss=max_miss,
                                        per_task=per_task, sources=sources, task_limits=task_limits)
    # The combined effect, every case under its own task's minimums, decided by the real policy.
    fitted = config_with(base, overall.minimums, {t: v["fit"].minimums for t, v in tasks.items()})
    accepted = np.array([gate.decide(s, fitted).decision is Decision.ACCEPT for s in scored], dtype=bool)
    if not np.array_equal(accepted, accepted_by_task(acceptance, task_of_case, overall, tasks)):
        raise RuntimeError("the fast acceptance disagrees with the decision policy: a rule reads a tuned "
                           "minimum in a way Acceptance does not know")
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
            fit, fit_tasks, _ = fit_scope(acceptance, good, task_of_case, rest, max_miss=max_miss, per_task=per_task,
                                          sources=sources, task_limits=task_limits)
            unseen = accepted_by_task(acceptance, task_of_case, fit, fit_tasks)
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
