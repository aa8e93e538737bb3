"""Regression baselines: record what the gate decides on a fixed case set, then check a change.

`record_baseline` runs a Gate over cases and keeps, per case, the decision, failure type, reason
and scores, plus the model sha256s and a hash of the gate policy. `compare` sets a later run
against that baseline and reports decision flips, score deltas beyond a tolerance, cases that
went missing, and two aggregate tests: McNemar's exact test on paired correct/incorrect
decisions (cases whose `meta.expected_decision` says what is right) or on "accepted or not"
(cases without one), and a seeded paired bootstrap on each score's mean. `RegressionRules`
decides which findings fail the check. Both functions are pure apart from running the gate, so
a CI test can plant a regression (a degraded validator, a broken policy) and see it caught.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from pydantic import Field

from .case import Case, CaseError
from .config import CONFIG_DIR, StrictModel, load_config
from .gate import Gate
from .results import Decision, FailureType

logger = logging.getLogger(__name__)

BASELINE_FORMAT_VERSION = 1
# Scores are rounded in the baseline so it diffs cleanly in review and float noise stays out.
SCORE_DECIMALS = 6
_DECISION_RANK = {Decision.ACCEPT.value: 0, Decision.REVIEW.value: 1, Decision.REJECT.value: 2}


class RegressionError(ValueError):
    """A baseline that cannot be read or compared; the message names the file and field."""


class RegressionRules(StrictModel):
    """Which findings make `regress check` fail (exit 1). Improvements never fail it."""

    # A case with `meta.expected_decision` (and optional `expected_failure_type`) whose new
    # decision is further from the expectation than the baseline's.
    fail_on_worse_flip: bool = True
    # Flips not known to be improvements (unlabelled cases, lateral moves) allowed before failing;
    # None = no limit.
    max_flips: int | None = Field(3, ge=0)
    # McNemar says the decisions shifted: toward wrong (labelled cases) or in acceptance rate
    # (unlabelled cases, either direction, since nothing says which way is better).
    fail_on_significant_shift: bool = True
    # A significant paired-bootstrap shift of a score's mean. Off by default: a lower grounding
    # score on a hallucinated answer is an improvement, so a mean shift alone is not a regression.
    fail_on_score_shift: bool = False
    # Cases in the baseline that the new run lacks (removed, or now a bad record) could hide a flip.
    fail_on_missing: bool = True
    # Scores that moved beyond their tolerance allowed before failing (default none: a score that
    # drifts past its tolerance is a regression even when no decision flips); None = report only.
    max_score_deltas: int | None = Field(0, ge=0)


class RegressionConfig(StrictModel):
    """`configs/regression.yaml`: tolerances, test settings and the failing rules."""

    score_tolerance: float = Field(0.05, ge=0.0, description="per-case |new - old| reported above this")
    score_tolerances: dict[str, float] = Field(default_factory=dict, description="per-score overrides")
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level of both tests")
    bootstrap_resamples: int = Field(2000, ge=100)
    # A significant but tiny mean shift (e.g. +0.001 everywhere) is not worth a red build.
    min_mean_shift: float = Field(0.01, ge=0.0)
    seed: int = 13
    rules: RegressionRules = RegressionRules()

    def tolerance(self, score: str) -> float:
        return self.score_tolerances.get(score, self.score_tolerance)


def load_regression_config(path: str | Path | None = None) -> RegressionConfig:
    """The rules from `path`, or the shipped `configs/regression.yaml`."""
    return load_config(path or CONFIG_DIR / "regression.yaml", RegressionConfig)


def config_hash(gate: Gate) -> str:
    """sha256 of the resolved policy: comments and key order in the YAML do not change it."""
    canonical = json.dumps(gate.config.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _expectation(case: Case) -> tuple[dict[str, str], str | None]:
    """(expected fields, problem): a bad expectation is reported, the case is still recorded."""
    expected: dict[str, str] = {}
    decision = case.meta.get("expected_decision")
    if decision is not None:
        if decision not in _DECISION_RANK:
            return {}, f"meta.expected_decision {decision!r} is not one of {', '.join(_DECISION_RANK)}"
        expected["decision"] = decision
        failure = case.meta.get("expected_failure_type")
        if failure is not None:
            if failure not in {f.value for f in FailureType}:
                return {}, f"meta.expected_failure_type {failure!r} is not a failure type"
            expected["failure_type"] = failure
    return expected, None


def snapshot(gate: Gate, records: Iterable[Case | CaseError], *, command: str = "",
             cases_path: str | Path | None = None, batch_size: int = 32) -> dict[str, Any]:
    """Runs the gate over `records` and returns a baseline dict (what `record` writes)."""
    records = list(records)
    cases = [r for r in records if isinstance(r, Case)]
    errors = [str(r) for r in records if isinstance(r, CaseError)]
    results = []
    for start in range(0, len(cases), batch_size):
        results.extend(gate.validate_batch(cases[start:start + batch_size]))
    rows = []
    for case, result in zip(cases, results):
        expected, problem = _expectation(case)
        if problem:
            errors.append(f"case {case.id}: {problem}")
        rows.append({
            "id": case.id,
            "decision": result.decision.value,
            "failure_type": result.failure_type.value,
            "reason": result.reason,
            "scores": {k: None if v is None else round(float(v), SCORE_DECIMALS) for k, v in result.scores.items()},
            "expected": expected,
        })
    return {
        "format_version": BASELINE_FORMAT_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "cases_file": str(cases_path) if cases_path else None,
        "cases_sha256": file_sha256(cases_path) if cases_path else None,
        "config_sha256": config_hash(gate),
        "models": gate.models,
        "errors": errors,
        "cases": rows,
    }


def write_baseline(path: str | Path, baseline: dict[str, Any]) -> None:
    """Writes the header indented and one case per line, so a re-record reviews as a per-case diff."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {k: v for k, v in baseline.items() if k != "cases"}
    text = json.dumps(header, indent=1, ensure_ascii=False)[:-2]  # reopen the object for "cases"
    rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in baseline["cases"])
    text += f',\n "cases": [\n{rows}\n ]\n}}\n' if rows else ',\n "cases": []\n}\n'
    path.write_text(text, encoding="utf-8")


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Reads a baseline written by `record`; raises RegressionError saying what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegressionError(f"{path}: no such baseline; create it with `autovalidators regress record`") from None
    except json.JSONDecodeError as exc:
        raise RegressionError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("format_version") != BASELINE_FORMAT_VERSION:
        raise RegressionError(f"{path}: format_version must be {BASELINE_FORMAT_VERSION}; re-record the baseline")
    for number, row in enumerate(data.get("cases") or []):
        missing = [k for k in ("id", "decision", "failure_type", "scores") if k not in row]
        if missing:
            raise RegressionError(f"{path}: cases[{number}] lacks {', '.join(missing)}")
    return data


# --- comparison ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flip:
    """A case whose decision or failure type changed; `verdict` is worse/better/changed."""

    id: str
    old_decision: str
    new_decision: str
    old_failure: str
    new_failure: str
    new_reason: str
    expected: str | None
    verdict: str


@dataclass(frozen=True)
class ScoreDelta:
    id: str
    score: str
    old: float | None
    new: float | None
    tolerance: float

    @property
    def delta(self) -> float | None:
        return None if self.old is None or self.new is None else self.new - self.old


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar: `worse` cases went good->bad, `better` bad->good (or lost/gained ACCEPT)."""

    basis: str  # "expected_decision" or "accepted"
    cases: int
    worse: int
    better: int
    p_value: float
    significant: bool


@dataclass(frozen=True)
class BootstrapShift:
    score: str
    cases: int
    old_mean: float
    new_mean: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool


@dataclass
class RegressionReport:
    flips: list[Flip] = field(default_factory=list)
    score_deltas: list[ScoreDelta] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the baseline, not in this run
    new: list[str] = field(default_factory=list)  # in this run, not in the baseline (not compared)
    errors: list[str] = field(default_factory=list)  # bad records / expectations in this run
    models_changed: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_changed: bool = False
    cases_file_changed: bool = False
    accuracy: dict[str, float | None] = field(default_factory=dict)  # baseline/current vs expected
    mcnemar: list[McNemar] = field(default_factory=list)
    bootstrap: list[BootstrapShift] = field(default_factory=list)
    compared: int = 0
    failures: list[str] = field(default_factory=list)  # why the check failed; empty = passed

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        for row, delta in zip(data["score_deltas"], self.score_deltas):
            row["delta"] = delta.delta
        return data


def _error(row: dict[str, Any]) -> tuple[int, int] | None:
    """How far a decision sits from its expectation: (decision steps, wrong failure type)."""
    expected = row.get("expected") or {}
    if "decision" not in expected:
        return None
    steps = abs(_DECISION_RANK[row["decision"]] - _DECISION_RANK[expected["decision"]])
    failure_wrong = int("failure_type" in expected and row["failure_type"] != expected["failure_type"])
    return steps, failure_wrong


def exact_mcnemar_p(worse: int, better: int) -> float:
    """Two-sided exact McNemar p: a binomial(worse + better, 1/2) test on the discordant pairs.

    Written out (it is one sum) so that `regress check` runs on the runtime install, without scipy.
    """
    n = worse + better
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(worse, better) + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def _mcnemar(basis: str, pairs: list[tuple[bool, bool]], alpha: float) -> McNemar:
    """pairs: (baseline good, current good) per case; exact two-sided binomial on discordant pairs."""
    worse = sum(1 for old, new in pairs if old and not new)
    better = sum(1 for old, new in pairs if new and not old)
    p_value = exact_mcnemar_p(worse, better)
    return McNemar(basis, len(pairs), worse, better, float(p_value), p_value < alpha)


def _bootstrap(score: str, old: np.ndarray, new: np.ndarray, config: RegressionConfig) -> BootstrapShift:
    """Paired bootstrap of the mean difference; p from the null-centred resampled means."""
    diffs = new - old
    observed = float(diffs.mean())
    if np.allclose(diffs, diffs[0]):
        # No spread to resample: the shift is exactly the constant difference.
        low = high = observed
        p_value = 1.0 if abs(observed) < 1e-12 else 0.0
    else:
        rng = np.random.default_rng(config.seed)
        means = diffs[rng.integers(0, len(diffs), size=(config.bootstrap_resamples, len(diffs)))].mean(axis=1)
        low, high = np.quantile(means, [config.alpha / 2, 1 - config.alpha / 2])
        p_value = float(np.mean(np.abs(means - observed) >= abs(observed)))
    significant = p_value < config.alpha and abs(observed) >= config.min_mean_shift
    return BootstrapShift(score, len(diffs), float(old.mean()), float(new.mean()), float(low), float(high),
                          p_value, significant)


def compare(baseline: dict[str, Any], current: dict[str, Any], config: RegressionConfig) -> RegressionReport:
    """Sets `current` (a `snapshot`) against `baseline` and decides whether quality regressed."""
    report = RegressionReport(errors=list(current.get("errors") or []))
    old_rows = {row["id"]: row for row in baseline["cases"]}
    new_rows = {row["id"]: row for row in current["cases"]}
    report.missing = [case_id for case_id in old_rows if case_id not in new_rows]
    report.new = [case_id for case_id in new_rows if case_id not in old_rows]
    report.config_changed = baseline.get("config_sha256") != current.get("config_sha256")
    report.cases_file_changed = (baseline.get("cases_sha256") or None) != (current.get("cases_sha256") or None)
    old_models, new_models = baseline.get("models") or {}, current.get("models") or {}
    report.models_changed = {
        name: {"baseline": old_models.get(name), "current": new_models.get(name)}
        for name in sorted(set(old_models) | set(new_models)) if old_models.get(name) != new_models.get(name)
    }
    common = [case_id for case_id in old_rows if case_id in new_rows]
    report.compared = len(common)
    labelled: list[tuple[bool, bool]] = []
    unlabelled: list[tuple[bool, bool]] = []
    paired_scores: dict[str, list[tuple[float, float]]] = {}
    for case_id in common:
        old, new = old_rows[case_id], new_rows[case_id]
        # The current file's expectation wins: fixing a wrong label should not need a re-record.
        new = {**new, "expected": new.get("expected") or old.get("expected") or {}}
        old = {**old, "expected": new["expected"]}
        old_error, new_error = _error(old), _error(new)
        if old_error is not None and new_error is not None:
            labelled.append((old_error == (0, 0), new_error == (0, 0)))
        else:
            unlabelled.append((old["decision"] == Decision.ACCEPT.value, new["decision"] == Decision.ACCEPT.value))
        if old["decision"] != new["decision"] or old["failure_type"] != new["failure_type"]:
            if old_error is None or new_error is None or old_error == new_error:
                verdict = "changed"
            else:
                verdict = "worse" if new_error > old_error else "better"
            report.flips.append(Flip(case_id, old["decision"], new["decision"], old["failure_type"],
                                     new["failure_type"], new.get("reason", ""),
                                     new["expected"].get("decision"), verdict))
        for score in sorted(set(old["scores"]) | set(new["scores"])):
            before, after = old["scores"].get(score), new["scores"].get(score)
            if before is not None and after is not None:
                paired_scores.setdefault(score, []).append((before, after))
            tolerance = config.tolerance(score)
            # A score that appears or disappears means a check started or stopped applying.
            moved = (before is None) != (after is None) or (
                before is not None and after is not None and abs(after - before) > tolerance + 1e-12)
            if moved:
                report.score_deltas.append(ScoreDelta(case_id, score, before, after, tolerance))
    if labelled:
        report.mcnemar.append(_mcnemar("expected_decision", labelled, config.alpha))
        report.accuracy = {"baseline": sum(o for o, _ in labelled) / len(labelled),
                           "current": sum(n for _, n in labelled) / len(labelled), "cases": len(labelled)}
    if unlabelled:
        report.mcnemar.append(_mcnemar("accepted", unlabelled, config.alpha))
    for score, pairs in sorted(paired_scores.items()):
        values = np.asarray(pairs, dtype=float)
        report.bootstrap.append(_bootstrap(score, values[:, 0], values[:, 1], config))
    report.failures = _failures(report, config.rules)
    return report


def _failures(report: RegressionReport, rules: RegressionRules) -> list[str]:
    failures = []
    worse = [f for f in report.flips if f.verdict == "worse"]
    if rules.fail_on_worse_flip and worse:
        failures.append(f"{len(worse)} case(s) moved away from the expected decision: "
                        + ", ".join(f"{f.id} ({f.old_decision} {f.old_failure} -> {f.new_decision} {f.new_failure})"
                                    for f in worse[:10]))
    unknown = [f for f in report.flips if f.verdict != "better"]
    if rules.max_flips is not None and len(unknown) > rules.max_flips:
        failures.append(f"{len(unknown)} flip(s) not known to be improvements, more than max_flips {rules.max_flips}")
    if rules.fail_on_significant_shift:
        for test in report.mcnemar:
            # For labelled cases only a shift toward wrong is a regression; for unlabelled ones the
            # direction is unknown, so any significant change in acceptance needs a person to look.
            if test.significant and (test.basis == "accepted" or test.worse > test.better):
                failures.append(f"McNemar on {test.basis}: {test.worse} worse vs {test.better} better "
                                f"of {test.cases} cases, p = {test.p_value:.3g}")
    if rules.fail_on_score_shift:
        for shift in report.bootstrap:
            if shift.significant:
                failures.append(f"mean {shift.score} moved {shift.old_mean:.3f} -> {shift.new_mean:.3f} "
                                f"(p = {shift.p_value:.3g})")
    if rules.fail_on_missing and report.missing:
        failures.append(f"{len(report.missing)} baseline case(s) missing from this run: "
                        + ", ".join(report.missing[:10]))
    if rules.max_score_deltas is not None and len(report.score_deltas) > rules.max_score_deltas:
        failures.append(f"{len(report.score_deltas)} score(s) moved beyond tolerance, "
                        f"more than max_score_deltas {rules.max_score_deltas}")
    return failures
