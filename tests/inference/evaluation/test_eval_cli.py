"""`autovalidators compare | evaluate | testset` end to end on small files."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import app
import autovalidators.inference.evaluation.cli  # noqa: F401  registers the commands

runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    result = runner.invoke(app, ["evaluate", "demo-systems", "--out", str(out), "--limit", "60"])
    assert result.exit_code == 0, result.output
    return out


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_compare_writes_report_and_per_case_file(demo, tmp_path):
    report_path = tmp_path / "report.json"
    result = runner.invoke(app, ["compare", str(demo / "system_b.jsonl"), str(demo / "system_a.jsonl"),
                                 "-o", str(report_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert report["significant"] and report["verdict"] == "B is better"
    assert report["total"]["pairs"] == 60 and report["calls"]["pairwise"] == 120
    assert set(report["by_category"]) <= {"common", "factual", "ambiguous", "adversarial"}
    rows = lines(tmp_path / "report.cases.jsonl")
    assert len(rows) == 60 and {"winner", "a_then_b", "b_then_a", "rationale", "answer_a"} <= set(rows[0])


def test_compare_fails_on_regression_and_reports_missing_ids(demo, tmp_path):
    a_rows = lines(demo / "system_a.jsonl")
    trimmed = tmp_path / "a_trimmed.jsonl"
    trimmed.write_text("".join(json.dumps(r) + "\n" for r in a_rows[:-2]))
    result = runner.invoke(app, ["compare", str(trimmed), str(demo / "system_b.jsonl"), "-o",
                                 str(tmp_path / "r.json"), "--mode", "hybrid", "--fail-on-regression"])
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["significant_regression"] and len(report["only_in_b"]) == 2
    assert report["calls"]["pointwise"] == 2 * 58
    assert report["calls"]["pairwise"] + report["calls"]["pairwise_saved"] == 2 * 58


def test_compare_bad_option_and_missing_file_exit_2(demo, tmp_path):
    a = str(demo / "system_a.jsonl")
    assert runner.invoke(app, ["compare", a, a, "--mode", "best"]).exit_code == 2
    assert runner.invoke(app, ["compare", a, str(tmp_path / "absent.jsonl")]).exit_code == 2


def test_pointwise_and_review(demo, tmp_path):
    scores = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["evaluate", "pointwise", str(demo / "system_b.jsonl"), "-o", str(scores)])
    assert result.exit_code == 0, result.output
    rows = lines(scores)
    assert len(rows) == 60 and all(1 <= r["scores"]["overall"] <= 5 for r in rows)
    summary = json.loads(scores.with_suffix(".summary.json").read_text())
    assert summary["scored"] == 60 and summary["errors"] == {}
    review = tmp_path / "review.md"
    result = runner.invoke(app, ["evaluate", "sample-for-review", str(scores), "-o", str(review), "--n", "5"])
    assert result.exit_code == 0, result.output
    text = review.read_text()
    assert text.count("**Rationale:**") == 5 and "- [ ] I agree with the verdict / scores" in text
    assert len(lines(review.with_suffix(".jsonl"))) == 5


def test_testset_build_check_refresh(demo, tmp_path):
    pool = str(demo / "system_a.jsonl")
    built = tmp_path / "set.jsonl"
    # 60 cases hold 6 adversarial; 20 cases need 2 of them, 8 common, 6 factual and 4 ambiguous.
    result = runner.invoke(app, ["testset", "build", pool, "-o", str(built), "--size", "20"])
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["testset", "check", str(built)]).exit_code == 0
    refreshed = tmp_path / "set2.jsonl"
    result = runner.invoke(app, ["testset", "refresh", str(built), "--pool", pool, "-o", str(refreshed)])
    assert result.exit_code == 0, result.output
    log = json.loads(refreshed.with_suffix(".refresh.json").read_text())
    assert log["removed"] and len(log["removed"]) == len(log["added"])
    assert runner.invoke(app, ["testset", "check", str(refreshed)]).exit_code == 0
    skewed = tmp_path / "skewed.jsonl"
    skewed.write_text("".join(json.dumps(r) + "\n" for r in lines(built) if r["meta"]["category"] == "common"))
    assert runner.invoke(app, ["testset", "check", str(skewed)]).exit_code == 1
    assert runner.invoke(app, ["testset", "build", pool, "-o", str(built), "--size", "200"]).exit_code == 2


def test_hybrid_reuses_paid_pointwise_scores(demo, tmp_path):
    scores_a = tmp_path / "a_scores.jsonl"
    result = runner.invoke(app, ["evaluate", "pointwise", str(demo / "system_a.jsonl"), "-o", str(scores_a)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "h.json"
    result = runner.invoke(app, ["compare", str(demo / "system_a.jsonl"), str(demo / "system_b.jsonl"), "-o", str(out),
                                 "--mode", "hybrid", "--scores-a", str(scores_a)])
    assert result.exit_code == 0, result.output
    calls = json.loads(out.read_text())["calls"]
    assert calls["pointwise"] == 60  # B only; A's scores were reused
    assert calls["net_saved"] == 120 - 60 - calls["pairwise"]
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text(scores_a.read_text().replace('"judge": "local"', '"judge": "llm:x:pointwise_v1"'))
    result = runner.invoke(app, ["compare", str(demo / "system_a.jsonl"), str(demo / "system_b.jsonl"), "-o", str(out),
                                 "--mode", "hybrid", "--scores-a", str(foreign)])
    assert result.exit_code == 2 and "not comparable" in result.output


def test_cadence_job_sets_case_cap_and_failure_rule(demo, tmp_path):
    from autovalidators.inference.config import CONFIG_DIR

    text = (CONFIG_DIR / "evaluation.yaml").read_text().replace("max_cases: 200", "max_cases: 40")
    text = text.replace("prompts/pointwise_v1.yaml", str(CONFIG_DIR / "prompts/pointwise_v1.yaml"))
    config = tmp_path / "evaluation.yaml"
    config.write_text(text)
    out = tmp_path / "pr.json"
    args = ["compare", str(demo / "system_a.jsonl"), str(demo / "system_b.jsonl"), "-o", str(out),
            "--config", str(config)]
    result = runner.invoke(app, [*args, "--cadence", "per_pr"])
    report = json.loads(out.read_text())
    assert report["total"]["pairs"] == 40 and report["significant_regression"]
    assert result.exit_code == 1, result.output
    assert runner.invoke(app, args).exit_code == 0  # without the job: no failure rule
    assert runner.invoke(app, [*args, "--cadence", "quarterly_refresh"]).exit_code == 2
