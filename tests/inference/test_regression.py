"""Regression baselines: an unchanged run passes, planted regressions fail with the flip named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autovalidators.inference.case import Case, read_cases
from autovalidators.inference.cli import app
from autovalidators.inference.config import load_gate_config
from autovalidators.inference.gate import Gate
from autovalidators.inference.regression import (
    RegressionConfig,
    RegressionError,
    RegressionRules,
    compare,
    exact_mcnemar_p,
    load_baseline,
    load_regression_config,
    snapshot,
    write_baseline,
)
from autovalidators.inference.results import QARelevanceOutput
from autovalidators.inference.validators import ValidatorInfo

import autovalidators.inference.regression_cli  # noqa: F401  (registers `regress`)

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "inference" / "examples" / "regression_cases.jsonl"
EXAMPLES = ROOT / "inference" / "examples" / "cases.jsonl"
runner = CliRunner()


class IrrelevantQA:
    """A degraded relevance model: calls every answer off-topic."""

    info = ValidatorInfo("qa_relevance", "onnx", "degraded-1", "0" * 64)

    def predict(self, cases):
        return [QARelevanceOutput(applies=True, score=0.1, relevant=False, source="onnx") for _ in cases]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return [c for c in read_cases(CASES) if isinstance(c, Case)]


@pytest.fixture(scope="module")
def baseline(cases) -> dict:
    return snapshot(Gate(), cases, cases_path=CASES)


def row(case_id: str, decision: str = "ACCEPT", failure: str = "none", scores: dict | None = None,
        expected: dict | None = None) -> dict:
    return {"id": case_id, "decision": decision, "failure_type": failure, "reason": f"reason of {case_id}",
            "scores": scores if scores is not None else {"grounding": 0.8}, "expected": expected or {}}


def run(rows: list[dict]) -> dict:
    return {"cases": rows, "models": {}, "config_sha256": "x", "errors": []}


def test_regression_cases_cover_the_decision_taxonomy(cases):
    expected = {(c.meta["expected_decision"], c.meta["expected_failure_type"]) for c in cases}
    for pair in [("ACCEPT", "none"), ("REJECT", "unsafe_tone"), ("REJECT", "missing_abstention"),
                 ("REJECT", "confident_hallucination"), ("REVIEW", "off_topic"), ("REVIEW", "vague_ungrounded"),
                 ("REVIEW", "poor_retrieval"), ("REVIEW", "incomplete")]:
        assert pair in expected
    assert {c.meta["language"] for c in cases} == {"en", "ru"}


@pytest.mark.parametrize("cases_file,baseline_file", [
    ("inference/examples/regression_cases.jsonl", "inference/examples/baselines/regression_cases.json"),
    ("inference/examples/cases.jsonl", "inference/examples/baselines/example_cases.json"),
    ("inference/examples/russian_cases.jsonl", "inference/examples/baselines/russian_cases.json"),
])
def test_current_code_matches_the_shipped_baseline(cases_file, baseline_file):
    """CI gate: a change that makes the shipped cases worse fails here. If the change is intended,
    re-record: `autovalidators regress record --cases <cases> --baseline <baseline>`."""
    shipped = load_baseline(ROOT / baseline_file)
    current = snapshot(Gate(), list(read_cases(ROOT / cases_file)), cases_path=ROOT / cases_file)
    report = compare(shipped, current, load_regression_config())
    assert report.passed, "\n".join(report.failures)
    assert report.compared == len(shipped["cases"])


def test_unchanged_run_passes_with_nothing_to_report(cases, baseline):
    report = compare(baseline, snapshot(Gate(), cases, cases_path=CASES), RegressionConfig())
    assert report.passed
    assert report.flips == [] and report.score_deltas == [] and report.missing == []
    assert not report.config_changed and not report.models_changed
    assert report.accuracy["baseline"] == report.accuracy["current"]
    assert report.mcnemar[0].basis == "expected_decision" and report.mcnemar[0].p_value == 1.0


def test_degraded_validator_is_caught_and_each_flip_named(cases, baseline):
    degraded = Gate(instances={"qa_relevance": IrrelevantQA()})
    report = compare(baseline, snapshot(degraded, cases, cases_path=CASES), RegressionConfig())
    assert not report.passed
    worse = {f.id: f for f in report.flips if f.verdict == "worse"}
    assert "accept-eiffel-en" in worse
    flip = worse["accept-eiffel-en"]
    assert (flip.old_decision, flip.new_decision, flip.new_failure) == ("ACCEPT", "REVIEW", "off_topic")
    assert "does not address the question" in flip.new_reason
    assert report.models_changed["qa_relevance"]["current"]["version"] == "degraded-1"
    # Nine ACCEPT cases go wrong and none improves: McNemar alone is significant too.
    test = report.mcnemar[0]
    assert test.worse >= 6 and test.better == 0 and test.significant
    assert any("McNemar" in f for f in report.failures)
    assert any(d.score == "relevance" for d in report.score_deltas)


def test_policy_that_breaks_a_check_is_caught(cases, baseline, tmp_path):
    config = load_gate_config()
    tone_off = config.model_copy(update={"checks": config.checks.model_copy(
        update={"tone_safety": config.checks.tone_safety.model_copy(update={"required": False})})})
    report = compare(baseline, snapshot(Gate(tone_off), cases), RegressionConfig())
    assert report.config_changed
    worse = {f.id for f in report.flips if f.verdict == "worse"}
    assert {"toxic-insult-en", "toxic-threat-en", "toxic-insult-ru"} <= worse
    assert not report.passed


def test_improvement_passes_and_worse_fails():
    expected = {"decision": "REJECT", "failure_type": "unsafe_tone"}
    old = run([row("a", "ACCEPT", expected=expected)])
    better = compare(old, run([row("a", "REJECT", "unsafe_tone", expected=expected)]), RegressionConfig())
    assert better.passed and better.flips[0].verdict == "better"
    worse = compare(run([row("a", "REJECT", "unsafe_tone", expected=expected)]),
                    run([row("a", "REVIEW", "off_topic", expected=expected)]), RegressionConfig())
    assert not worse.passed and worse.flips[0].verdict == "worse"
    # A right decision with the wrong failure type is worse than the right pair, too.
    lateral = compare(run([row("a", "REJECT", "unsafe_tone", expected=expected)]),
                      run([row("a", "REJECT", "confident_hallucination", expected=expected)]), RegressionConfig())
    assert lateral.flips[0].verdict == "worse"


def test_unlabelled_flips_count_against_max_flips():
    old = run([row(f"c{i}", "ACCEPT") for i in range(5)])
    new = run([row(f"c{i}", "REVIEW" if i < 2 else "ACCEPT") for i in range(5)])
    config = RegressionConfig(rules=RegressionRules(max_flips=2))
    report = compare(old, new, config)
    assert [f.verdict for f in report.flips] == ["changed", "changed"]
    assert report.mcnemar[0].basis == "accepted" and not report.mcnemar[0].significant
    assert report.passed
    assert not compare(old, new, RegressionConfig(rules=RegressionRules(max_flips=1))).passed


def test_significant_acceptance_shift_fails_without_labels():
    old = run([row(f"c{i}", "ACCEPT") for i in range(8)])
    new = run([row(f"c{i}", "REVIEW") for i in range(8)])
    rules = RegressionRules(max_flips=None)
    report = compare(old, new, RegressionConfig(rules=rules))
    assert report.mcnemar[0].worse == 8 and report.mcnemar[0].significant
    assert not report.passed
    quiet = rules.model_copy(update={"fail_on_significant_shift": False})
    assert compare(old, new, RegressionConfig(rules=quiet)).passed


@pytest.mark.parametrize("delta,reported", [(0.05, False), (0.0501, True), (-0.0501, True)])
def test_score_tolerance_boundary(delta, reported):
    old = run([row("a", scores={"grounding": 0.5})])
    new = run([row("a", scores={"grounding": 0.5 + delta})])
    report = compare(old, new, RegressionConfig(score_tolerance=0.05))
    assert bool(report.score_deltas) is reported
    # By default a score past its tolerance fails the check even though no decision flipped.
    assert report.passed is not reported
    if reported:
        assert "max_score_deltas 0" in report.failures[0]


def test_per_score_tolerance_and_max_score_deltas():
    old = run([row("a", scores={"grounding": 0.5, "relevance": 0.5})])
    new = run([row("a", scores={"grounding": 0.6, "relevance": 0.6})])
    config = RegressionConfig(score_tolerance=0.05, score_tolerances={"relevance": 0.2},
                              rules=RegressionRules(max_score_deltas=0))
    report = compare(old, new, config)
    assert [(d.score, round(d.delta, 6)) for d in report.score_deltas] == [("grounding", 0.1)]
    assert not report.passed and "max_score_deltas" in report.failures[0]


def test_a_check_that_stops_applying_is_a_score_delta():
    report = compare(run([row("a", scores={"relevance": 0.9})]), run([row("a", scores={"relevance": None})]),
                     RegressionConfig())
    assert report.score_deltas[0].old == 0.9 and report.score_deltas[0].new is None


def test_missing_case_is_reported_and_fails():
    old = run([row("a"), row("b")])
    new = run([row("a"), row("c")])
    report = compare(old, new, RegressionConfig())
    assert report.missing == ["b"] and report.new == ["c"]
    assert not report.passed and "missing" in report.failures[0]
    assert compare(old, new, RegressionConfig(rules=RegressionRules(fail_on_missing=False))).passed


def test_bootstrap_is_seeded_and_flags_a_real_shift():
    old = run([row(f"c{i}", scores={"grounding": 0.5 + 0.01 * i}) for i in range(20)])
    new = run([row(f"c{i}", scores={"grounding": 0.3 + 0.02 * i}) for i in range(20)])
    config = RegressionConfig(rules=RegressionRules(fail_on_score_shift=True))
    first, second = compare(old, new, config), compare(old, new, config)
    assert first.bootstrap == second.bootstrap
    shift = first.bootstrap[0]
    assert shift.new_mean < shift.old_mean and shift.ci_high < 0 and shift.significant
    assert any("mean grounding" in f for f in first.failures)
    # The mean-shift rule is off by default; the per-case deltas (up to 0.19 here) fail it instead.
    default = compare(old, new, RegressionConfig())
    assert not any("mean grounding" in f for f in default.failures)
    assert default.failures == [f"{len(default.score_deltas)} score(s) moved beyond tolerance, more than "
                                "max_score_deltas 0"]


def test_exact_mcnemar_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for worse, better in [(0, 0), (1, 0), (6, 0), (3, 5), (10, 2), (7, 7), (0, 9)]:
        expected = stats.binomtest(worse, worse + better, 0.5).pvalue if worse + better else 1.0
        assert exact_mcnemar_p(worse, better) == pytest.approx(expected)


def test_bad_expectation_is_reported_and_the_case_still_recorded():
    case = Case(id="x", question="q?", context="ctx", answer="a", meta={"expected_decision": "MAYBE"})
    data = snapshot(Gate(), [case])
    assert data["cases"][0]["id"] == "x" and data["cases"][0]["expected"] == {}
    assert "expected_decision 'MAYBE'" in data["errors"][0]


def test_baseline_round_trip_and_bad_files(tmp_path, baseline):
    path = tmp_path / "b.json"
    write_baseline(path, baseline)
    assert load_baseline(path)["cases"] == baseline["cases"]
    with pytest.raises(RegressionError, match="no such baseline"):
        load_baseline(tmp_path / "absent.json")
    (tmp_path / "old.json").write_text(json.dumps({"format_version": 0, "cases": []}))
    with pytest.raises(RegressionError, match="format_version"):
        load_baseline(tmp_path / "old.json")


def test_cli_record_then_check_passes_and_planted_policy_regression_fails(tmp_path):
    base = tmp_path / "baseline.json"
    result = runner.invoke(app, ["regress", "record", "--cases", str(CASES), "--baseline", str(base)])
    assert result.exit_code == 0, result.output
    stored = json.loads(base.read_text())
    assert stored["command"].startswith("autovalidators regress record --cases")
    assert set(stored["models"]) == {"fact_spans", "qa_relevance", "tone", "abstention"} and stored["config_sha256"]
    report = tmp_path / "report.json"
    result = runner.invoke(app, ["regress", "check", "--cases", str(CASES), "--baseline", str(base),
                                 "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["passed"] is True
    broken = tmp_path / "gate.yaml"
    broken.write_text("checks:\n  tone_safety: {required: false}\n")
    result = runner.invoke(app, ["regress", "check", "--cases", str(CASES), "--baseline", str(base),
                                 "--config", str(broken), "--report", str(report)])
    assert result.exit_code == 1, result.output
    assert "toxic-insult-ru" in result.output and "FAIL" in result.output
    data = json.loads(report.read_text())
    assert data["passed"] is False and data["config_changed"] is True
    assert {"toxic-insult-en", "toxic-threat-en"} <= {f["id"] for f in data["flips"] if f["verdict"] == "worse"}


def test_cli_reports_missing_case_and_bad_baseline(tmp_path):
    base = tmp_path / "baseline.json"
    assert runner.invoke(app, ["regress", "record", "--cases", str(CASES), "--baseline", str(base)]).exit_code == 0
    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("".join(CASES.read_text(encoding="utf-8").splitlines(keepends=True)[1:]), encoding="utf-8")
    result = runner.invoke(app, ["regress", "check", "--cases", str(fewer), "--baseline", str(base)])
    assert result.exit_code == 1
    assert "missing" in result.output and "accept-eiffel-en" in result.output
    (tmp_path / "junk.json").write_text("{not json")
    result = runner.invoke(app, ["regress", "check", "--cases", str(CASES), "--baseline", str(tmp_path / "junk.json")])
    assert result.exit_code == 2 and "not valid JSON" in result.output
