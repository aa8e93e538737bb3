"""Friction and misses of the whole gate on labelled cases: `benchmark gate` and `calibrate`.

The CLI tests run the shipped models and the shipped config on real labelled answers
(tests/fixtures/gate_labelled: RAGTruth, XQuAD and TyDi, English and Russian)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from autovalidators.inference import minimums, out_of_sample
from autovalidators.inference.calibrate import render_config, separability
from autovalidators.inference.minimums import (TUNED_CHECKS, Acceptance, fit_minimums, grid_indices, labels_needed,
                                               shortfall)
from autovalidators.inference.cli import app, _register_commands
from autovalidators.inference.config import CONFIG_DIR, GateConfig, TaskPolicy, load_gate_config
from autovalidators.inference.gate_quality import balanced_rates, paired_change, paired_tone_change, rates, read_labelled

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gate_labelled" / "cases.jsonl"
_register_commands()
runner = CliRunner()


def test_friction_and_miss_count_the_right_answers():
    good = np.array([True, True, True, True, False, False])
    accepted = np.array([True, False, True, True, True, False])
    friction, miss = rates(good, accepted)
    assert friction == pytest.approx(1 / 4)  # one of four good answers stopped
    assert miss == pytest.approx(1 / 2)  # one of two bad answers served


def test_balanced_rates_weigh_each_source_the_same():
    good = np.array([True] * 4 + [False] * 8 + [True] * 4 + [False] * 2)
    accepted = np.array([True] * 4 + [False] * 8 + [False, True, True, True] + [True, True])
    source = np.array(["many"] * 12 + ["few"] * 6)
    assert rates(good, accepted)[1] == pytest.approx(2 / 10)  # pooled: the 8 caught pay for the 2 served
    friction, miss = balanced_rates(good, accepted, source)
    assert miss == pytest.approx((0 / 8 + 2 / 2) / 2)
    assert friction == pytest.approx((0 / 4 + 1 / 4) / 2)
    assert balanced_rates(good, accepted, np.array(["one"] * 18)) == rates(good, accepted)


def _two_sources():
    """Source A: 40 off-topic bad answers that relevance catches at any minimum above 0.1, 40 good.
    Source B: 10 hallucinated answers that only grounding >= 0.8 stops, which also stops 10 of its 40
    good answers. Pooled over 50 bad answers, serving B's 10 costs a 20% miss rate."""
    rows = []  # (good, source, grounding, relevance)
    rows += [(True, "A", 1.0, 0.9)] * 40 + [(False, "A", 1.0, 0.05)] * 40
    rows += [(True, "B", 0.9, 0.9)] * 30 + [(True, "B", 0.6, 0.9)] * 10 + [(False, "B", 0.7, 0.9)] * 10
    good = np.array([r[0] for r in rows])
    scores = np.full((len(rows), len(TUNED_CHECKS)), np.nan)
    scores[:, TUNED_CHECKS.index("grounding")] = [r[2] for r in rows]
    scores[:, TUNED_CHECKS.index("relevance")] = [r[3] for r in rows]
    return Acceptance(np.ones(len(rows), dtype=bool), scores), good, np.array([r[1] for r in rows])


def test_separability_is_each_checks_roc_auc_per_task_and_dataset():
    acceptance, good, source = _two_sources()
    task = np.array(["QA"] * len(good))
    rows = {(r["scope"], r["check"]): r for r in separability(acceptance, good, task, source, resamples=200)}
    # Checks that never apply (NaN) get no row; the pooled task and each of its datasets get one.
    assert {check for _, check in rows} == {"grounding", "relevance"}
    assert {scope for scope, _ in rows} == {"all", "QA", "QA A", "QA B"}
    # A: relevance separates perfectly, grounding (1.0 for every answer) not at all.
    assert rows[("QA A", "relevance")]["roc_auc"] == 1.0 and rows[("QA A", "relevance")]["roc_auc_ci"] == [1.0, 1.0]
    assert rows[("QA A", "grounding")]["roc_auc"] == 0.5
    # B: 30 good answers above the 10 bad ones, 10 below them: 30/40 of good-bad pairs ordered right.
    assert rows[("QA B", "grounding")]["roc_auc"] == pytest.approx(0.75)
    low, high = rows[("QA B", "grounding")]["roc_auc_ci"]
    assert low < 0.75 < high
    # Pooled, A's grounded off-topic answers outrank B's good ones: pooling hides what B's check does.
    assert rows[("QA", "grounding")]["roc_auc"] < rows[("QA B", "grounding")]["roc_auc"]
    assert rows[("QA", "grounding")]["good"] == 80 and rows[("QA", "grounding")]["bad"] == 50
    # Fewer than MIN_SEPARABLE bad answers in a scope: no AUC is claimed for it.
    few = good.copy()
    few[np.flatnonzero(~good & (source == "B"))[1:]] = True
    assert ("QA B", "grounding") not in {(r["scope"], r["check"]) for r in separability(acceptance, few, task, source)}


def test_a_balanced_fit_does_not_let_one_source_pay_for_anothers_misses():
    acceptance, good, source = _two_sources()
    everything = np.ones(len(good), dtype=bool)
    start = {name: 0.0 for name in TUNED_CHECKS}
    pooled = fit_minimums(acceptance, good, everything, max_miss=0.2, prefer_near=start)
    balanced = fit_minimums(acceptance, good, everything, max_miss=0.2, prefer_near=start, sources=source)
    served_b = lambda fit: acceptance.accepted(grid_indices(fit.minimums))[source == "B"]
    hallucinated_b = ~good[source == "B"]
    # Pooled, every hallucinated B answer is served (10 of 50 bad = 20%, within the limit) ...
    assert served_b(pooled)[hallucinated_b].all() and pooled.miss == pytest.approx(0.2)
    # ... balanced, B's misses count as half the rate: grounding must stop them, at B's friction.
    assert not served_b(balanced)[hallucinated_b].any()
    assert balanced.minimums["grounding"] > 0.7 and balanced.friction == pytest.approx((0 + 10 / 40) / 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("balanced", [False, True])
def test_the_fit_is_the_best_combination_of_minimums(monkeypatch, seed, balanced):
    # Checked against every combination on small grids, one check's shorter than the others' as
    # specifics_grounding's is (the real search has 22^4 x 3). Coordinate descent from minimums at 0,
    # the search this replaced without its coarse start, misses the optimum on each of these seeds.
    import itertools
    small = {name: (0.0, 0.3, 0.6, 0.9) for name in TUNED_CHECKS} | {"specifics_grounding": (0.0, 0.5, 1.0)}
    monkeypatch.setattr(minimums, "GRIDS", small)
    rng = np.random.default_rng(seed)
    good = rng.random(120) < 0.5
    # Scores correlated with the label, in different ways per check, so minimums trade off.
    scores = np.clip(rng.normal(0.5, 0.25, size=(120, len(TUNED_CHECKS))) + 0.2 * good[:, None], 0, 1)
    scores[rng.random(scores.shape) < 0.1] = np.nan  # checks that do not apply
    acceptance = Acceptance(rng.random(120) < 0.95, scores)
    sources = rng.choice(["A", "B", "C"], size=120) if balanced else None
    everything = np.ones(120, dtype=bool)
    near = {name: 0.0 for name in TUNED_CHECKS}
    fit = fit_minimums(acceptance, good, everything, max_miss=0.2, prefer_near=near, sources=sources)

    def measured(indices):
        accepted = acceptance.accepted(indices)
        return balanced_rates(good, accepted, sources) if balanced else rates(good, accepted)

    feasible = [measured(c) for c in itertools.product(*(range(len(small[n])) for n in TUNED_CHECKS))
                if measured(c)[1] <= 0.2 + 1e-12]
    assert fit.miss <= 0.2 and fit.friction == pytest.approx(min(f for f, _ in feasible))
    assert (fit.friction, fit.miss) == pytest.approx(measured(grid_indices(fit.minimums)))


def test_the_fit_counts_pinned_cases_as_they_were_decided():
    # Pinned cases (decided by their task's own minimums) count in the rates but do not move.
    scores = np.full((4, len(TUNED_CHECKS)), np.nan)
    scores[:, 0] = [0.9, 0.2, 0.9, 0.9]
    acceptance = Acceptance(np.ones(4, dtype=bool), scores)
    good = np.array([True, False, False, True])
    pinned = (np.array([False, False, True, True]), np.array([False, False, True, False]))
    fit = fit_minimums(acceptance, good, np.ones(4, dtype=bool), max_miss=0.5,
                       prefer_near={n: 0.0 for n in TUNED_CHECKS}, pinned=pinned)
    # Case 2 (bad) stays served and case 3 (good) stays stopped whatever the minimums: the best is to
    # stop case 1 and serve case 0, friction 1/2, miss 1/2.
    assert (fit.friction, fit.miss) == (0.5, 0.5) and 0.2 < fit.minimums["grounding"] <= 0.9


def _one_check(scores: np.ndarray, good: np.ndarray):
    table = np.full((len(good), len(TUNED_CHECKS)), np.nan)
    table[:, TUNED_CHECKS.index("grounding")] = scores
    return Acceptance(np.ones(len(good), dtype=bool), table)


def test_out_of_sample_rates_show_what_a_fit_to_noise_hides():
    rng = np.random.default_rng(0)
    good = np.repeat([True, False], 100)
    task, groups = np.array(["QA"] * 200), np.array([str(i) for i in range(200)])
    # Four scores unrelated to the label: the combination of minimums with the least friction at the
    # miss limit on these answers is the one that fits their noise best, and on answers it was not
    # fitted on it stops more good ones and serves more bad ones than it did here.
    noise = Acceptance(np.ones(200, dtype=bool), rng.random((200, len(TUNED_CHECKS))))
    fitted = fit_minimums(noise, good, np.ones(200, dtype=bool), max_miss=0.1,
                          prefer_near={n: 0.0 for n in TUNED_CHECKS})
    unseen = out_of_sample.out_of_sample(noise, good, task, groups, max_miss=0.1, per_task=True, rounds=20)
    assert fitted.miss <= 0.1 < unseen["rates"]["all"]["miss"]
    assert fitted.friction < unseen["rates"]["all"]["friction"]
    assert unseen["rates"]["QA"] == unseen["rates"]["all"] and unseen["rounds"] == 20
    low, high = unseen["spread"]["QA"]["grounding"]["low"], unseen["spread"]["QA"]["grounding"]["high"]
    assert low < high  # the minimum moves with the answers it was fitted on
    # A score that separates good from bad: the same minimums every round, no optimism to show.
    clean = _one_check(np.where(good, 0.9, 0.2), good)
    unseen = out_of_sample.out_of_sample(clean, good, task, groups, max_miss=0.1, per_task=True, rounds=10)
    assert unseen["rates"]["all"] == {"friction": 0.0, "miss": 0.0}
    assert unseen["spread"]["all"]["grounding"]["low"] == unseen["spread"]["all"]["grounding"]["high"]


def test_out_of_sample_sets_aside_whole_answer_groups_and_fits_on_the_rest(monkeypatch):
    good = np.tile([True, False], 100)
    groups = np.repeat([f"question-{i}" for i in range(50)], 4)  # four answers to each question
    task = np.where(np.arange(200) < 120, "QA", "Summary")
    fitted_on = []
    real_fit_scope = out_of_sample.fit_scope

    def recording(acceptance, good_, task_, scope, **kwargs):
        fitted_on.append(scope.copy())
        return real_fit_scope(acceptance, good_, task_, scope, **kwargs)

    monkeypatch.setattr(out_of_sample, "fit_scope", recording)
    acceptance = _one_check(np.where(good, 0.9, 0.2), good)
    result = out_of_sample.out_of_sample(acceptance, good, task, groups, max_miss=0.2, per_task=True, rounds=5)
    assert len(fitted_on) == result["rounds"] == 5
    for scope in fitted_on:
        for name in np.unique(groups):  # a question's answers are all fitted on or all set aside
            assert len(set(scope[groups == name])) == 1
        for kind in ("QA", "Summary"):  # a quarter of each task's questions set aside
            aside = np.unique(groups[(task == kind) & ~scope])
            assert len(aside) == round(out_of_sample.HOLDOUT_SHARE * len(np.unique(groups[task == kind])))


def test_held_limits_tighten_only_the_task_whose_fit_serves_more_bad_answers_out_of_sample():
    rng = np.random.default_rng(1)
    good = np.tile(np.repeat([True, False], 100), 2)
    task = np.repeat(["QA", "Summary"], 200)
    groups = np.array([str(i) for i in range(400)])
    scores = rng.random((400, len(TUNED_CHECKS)))  # Summary: four scores unrelated to the label
    scores[:200] = np.nan
    scores[:200, TUNED_CHECKS.index("grounding")] = np.where(good[:200], 0.9, 0.2)  # QA: one that separates
    acceptance = Acceptance(np.ones(400, dtype=bool), scores)
    held = out_of_sample.held_limits(acceptance, good, task, groups, max_miss=0.15, rounds=10)
    # QA's fit serves no bad answer it did not see: it keeps the limit asked for.
    assert held["limits"]["QA"] == 0.15 and held["curves"]["QA"][0]["miss"] == 0.0
    # Summary's fit to noise serves more than 15% out of sample at 0.15; it is held to the largest
    # lower limit that does not, or the lowest one tried.
    summary = held["curves"]["Summary"]
    assert summary[0]["miss"] > 0.15 and held["limits"]["Summary"] < 0.15
    chosen = next(p for p in summary if p["limit"] == held["limits"]["Summary"])
    larger = [p for p in summary if p["limit"] > chosen["limit"]]
    assert all(p["miss"] > 0.15 for p in larger)
    assert chosen["miss"] <= 0.15 or chosen is summary[-1]
    # The fit then uses those limits: Summary's own minimums are stricter than at 0.15.
    everything = np.ones(400, dtype=bool)
    _, tasks_loose, _ = minimums.fit_scope(acceptance, good, task, everything, max_miss=0.15, per_task=True)
    _, tasks_held, _ = minimums.fit_scope(acceptance, good, task, everything, max_miss=0.15, per_task=True,
                                          task_limits=held["limits"])
    assert tasks_held["QA"]["fit"].minimums == tasks_loose["QA"]["fit"].minimums
    assert tasks_held["Summary"]["fit"].miss <= held["limits"]["Summary"] < tasks_loose["Summary"]["fit"].miss + 1e-9


def test_the_paired_change_counts_each_case_against_itself():
    def case(case_id, good, accepted, language="en"):
        return {"id": case_id, "good": good, "accepted": accepted, "language": language, "task": "QA"}

    before = [case("a", True, False), case("b", True, True), case("c", False, True), case("d", False, False),
              case("e", True, True, "ru")]
    after = [case("a", True, True), case("b", True, True), case("c", False, False), case("d", False, True),
             case("e", True, False, "ru"), case("new", True, False)]  # "new" has no partner: left out
    overall = paired_change(before, after)[0]
    assert overall["cases"] == 5
    assert overall["friction_before"] == pytest.approx(1 / 3) and overall["friction_after"] == pytest.approx(1 / 3)
    assert overall["friction_change"] == pytest.approx(0.0)  # a fixed and e broken: no net change
    assert overall["miss_before"] == overall["miss_after"] == pytest.approx(0.5)
    low, high = overall["friction_change_ci"]
    assert low < 0 < high  # one up, one down: the interval straddles 0
    with pytest.raises(ValueError, match="no case id"):
        paired_change(before, [case("zzz", True, True)])


def test_the_paired_tone_change_counts_each_text_against_itself():
    def texts(flagged_neutral: set[int], language="ru"):
        return ([{"id": f"n{i}", "text_sha256": f"h{i}", "language": language, "label": "neutral",
                  "flagged": i in flagged_neutral} for i in range(2000)]
                + [{"id": f"a{i}", "text_sha256": f"x{i}", "language": language, "label": "abusive", "flagged": True}
                   for i in range(200)])

    before = texts(set(range(32)))  # 1.6% of neutral texts flagged
    after = texts(set(range(10)))  # 22 of them no longer, none newly flagged
    rows = {row["label"]: row for row in paired_tone_change(before, after)}
    neutral = rows["neutral"]
    assert neutral["texts"] == 2000 and neutral["before"] == pytest.approx(0.016) and neutral["after"] == pytest.approx(0.005)
    assert neutral["change_ci"][1] < 0  # 22 fewer false flags out of 2,000: beyond the interval
    assert rows["abusive"]["change"] == 0.0 and rows["abusive"]["change_ci"] == [0.0, 0.0]
    # The same number of flags on other texts is no change in rate, and the interval straddles 0.
    swapped = paired_tone_change(before, texts(set(range(16)) | set(range(100, 116))))
    assert swapped[1]["change"] == 0.0 and swapped[1]["change_ci"][0] < 0 < swapped[1]["change_ci"][1]
    # Per dataset too: a language's total can hide a set that moved the other way.
    def named(flagged_neutral: set[int]):
        return [dict(t, dataset="forum" if t["label"] == "neutral" and int(t["id"][1:]) < 1000 else "encyclopaedia")
                for t in texts(flagged_neutral)]

    # 20 encyclopaedic flags before, 20 forum flags after: the same neutral rate, two sets moving apart.
    by_dataset = {(r["label"], r["dataset"]): r for r in paired_tone_change(named(set(range(1000, 1020))),
                                                                            named(set(range(20))))}
    assert by_dataset[("neutral", "all")]["change"] == 0.0
    assert by_dataset[("neutral", "forum")]["change_ci"][0] > 0 > by_dataset[("neutral", "encyclopaedia")]["change_ci"][1]
    assert by_dataset[("neutral", "forum")]["texts"] == 1000 and by_dataset[("abusive", "encyclopaedia")]["texts"] == 200
    # A text whose content changed is not the same text.
    changed = [dict(t, text_sha256="other") for t in after]
    with pytest.raises(ValueError, match="no tone text"):
        paired_tone_change(before, changed)


def test_bad_labelled_lines_are_named_and_the_rest_is_read(tmp_path):
    good_line = FIXTURE.read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "labelled.jsonl"
    no_label = json.loads(good_line)
    no_label.pop("label")
    path.write_text("\n".join([good_line, json.dumps({**json.loads(good_line), "label": "fine"}),
                               json.dumps(no_label), "{not json", good_line]) + "\n", encoding="utf-8")
    cases, errors = read_labelled(path)
    assert len(cases) == 2
    assert [(e.line, e.field) for e in errors] == [(2, "label"), (3, "label"), (4, None)]
    assert "good' or 'bad'" in errors[0].message and str(path) in str(errors[0])


def test_the_labels_needed_follow_the_allowed_miss_rate():
    assert labels_needed(0.10) == 36 and labels_needed(0.20) == 16
    assert shortfall(good=30, bad=36, max_miss=0.10) is None
    assert "label 6 more bad answers and 5 more good answers" in shortfall(good=25, bad=30, max_miss=0.10)


def test_render_keeps_the_base_comments_and_writes_minimums_tasks_and_provenance():
    base_text = (CONFIG_DIR / "gate.yaml").read_text(encoding="utf-8")
    base = load_gate_config()
    checks = base.checks.model_copy(update={"grounding": base.checks.grounding.model_copy(update={"minimum": 0.35})})
    fitted = base.model_copy(update={"checks": checks, "tasks": {"Data2txt": TaskPolicy(minimums={"relevance": 0.0})}})
    text = render_config(base_text, fitted, {"data": "x.jsonl", "max_miss": 0.1})
    assert "# Decision-gate policy" in text
    config = GateConfig.model_validate(yaml.safe_load(text))
    assert config.checks.grounding.minimum == 0.35
    assert config.tasks["Data2txt"].minimums == {"relevance": 0.0}
    assert config.provenance["max_miss"] == 0.1
    # Rendering again replaces the fitted block instead of stacking a second one.
    again = render_config(text, fitted, {"data": "y.jsonl"})
    assert again.count("fitted by `autovalidators calibrate`") == 1 and "y.jsonl" in again


def test_calibrate_then_benchmark_gate_on_real_labelled_answers(tmp_path):
    out = tmp_path / "gate.yaml"
    report = tmp_path / "calibrate.json"
    result = runner.invoke(app, ["calibrate", str(FIXTURE), "--max-miss", "0.15", "--leave-one-out", "--out", str(out),
                                 "--json", str(report)])
    assert result.exit_code == 0, result.output
    assert "how well each check alone separates" in " ".join(result.output.split())
    written = json.loads(report.read_text())
    assert written["provenance"]["data_sha256"] and written["leave_one_out"]
    aucs = {(r["scope"], r["check"]): r["roc_auc"] for r in written["separability"]}
    assert 0.5 < aucs[("all", "relevance")] <= 1.0  # the off-topic fixture answers score low relevance
    # Left out, RAGTruth's 16 answers meet minimums fitted on the other 60; without XQuAD (40) or TyDi
    # (20) too few good answers remain to fit on, and the table says so instead of fitting anyway.
    assert "each dataset left out" in result.output and "without it:" in " ".join(result.output.split())
    fitted = load_gate_config(out)
    provenance = fitted.provenance
    assert provenance["data_sha256"] and provenance["cases"] == {"good": 38, "bad": 38, "skipped_lines": 0}
    assert provenance["balance"] is None  # pooled rates, the default
    assert provenance["fitted_on_data"]["miss"] <= 0.15
    assert set(provenance["leave_one_dataset_out"]) == {"ragtruth"}
    # Out of sample: every task the fixture has, and the table beside the fitted rates.
    assert provenance["out_of_sample"]["rounds"] > 0 and "all" in provenance["out_of_sample"]
    assert written["out_of_sample"]["spread"]["all"].keys() == set(TUNED_CHECKS)
    assert "out of sample" in result.output
    assert provenance["roc_auc"]["all"] == {check: aucs[("all", check)] for check in provenance["roc_auc"]["all"]}
    # The shipped config on the same answers, and the fitted one: `benchmark gate` reproduces the
    # fitted rates exactly, and the fit stops no more good answers than the shipped minimums at no
    # more misses than allowed.
    reports = {}
    tone_texts = tmp_path / "tone.jsonl"
    tone_texts.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in [
        {"id": "n1", "text": "The bridge opened in 1932.", "label": "neutral", "dataset": "d", "language": "en"},
        {"id": "n2", "text": "Мост открыли в 1932 году.", "label": "neutral", "dataset": "d", "language": "ru"},
        {"id": "a1", "text": "You are a worthless idiot.", "label": "abusive", "dataset": "d", "language": "en"}]))
    for name, config in (("shipped", None), ("fitted", out)):
        # The shipped run writes into a folder that does not exist yet: the JSON and the plot make it.
        json_out = tmp_path / ("not-made-yet" if name == "shipped" else "") / f"{name}.json"
        args = ["benchmark", "gate", "--cases", str(FIXTURE), "--repeat", "1", "--latency-cases", "3",
                "--tone-texts", str(tone_texts), "--json", str(json_out)] + (["--config", str(config), "--baseline",
                                             str(tmp_path / "not-made-yet" / "shipped.json")]
                                            if config else [])
        run = runner.invoke(app, args)
        assert run.exit_code == 0, run.output
        reports[name] = json.loads(json_out.read_text())["quality"]["groups"]
    overall = reports["fitted"]["all"][0]
    assert overall["friction"] == pytest.approx(provenance["fitted_on_data"]["friction"], abs=1e-4)
    assert overall["miss"] == pytest.approx(provenance["fitted_on_data"]["miss"], abs=1e-4)
    shipped = reports["shipped"]["all"][0]
    assert shipped["miss"] > 0.15 or overall["friction"] <= shipped["friction"]
    assert {row["group"] for row in reports["fitted"]["language"]} == {"en", "ru"}
    change = json.loads((tmp_path / "fitted.json").read_text())["versus_baseline"]["rows"][0]
    assert change["friction_change"] == pytest.approx(overall["friction"] - shipped["friction"], abs=1e-9)
    # The same tone model on the same texts: every tone flag rate unchanged, text by text.
    tone_change = json.loads((tmp_path / "fitted.json").read_text())["tone_versus_baseline"]
    assert {(r["language"], r["label"]) for r in tone_change} == {("en", "abusive"), ("en", "neutral"), ("ru", "neutral")}
    assert all(r["change"] == 0.0 for r in tone_change) and "tone flags against shipped.json" in run.output
    assert (tmp_path / "fitted_rates.png").is_file() and (tmp_path / "not-made-yet" / "shipped_rates.png").is_file()


def test_calibrate_fits_several_labelled_files_as_one_set(tmp_path):
    # A user's labels often sit in several files (one per source or language): fitted together they
    # give the same config as their concatenation, each file's sha256 recorded; a case in two files
    # would weigh twice, so it is refused.
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[::2]), encoding="utf-8")
    second.write_text("".join(lines[1::2]), encoding="utf-8")
    args = ["--max-miss", "0.15", "--out-of-sample", "0"]
    one = runner.invoke(app, ["calibrate", str(FIXTURE), *args, "--out", str(tmp_path / "one.yaml")])
    two = runner.invoke(app, ["calibrate", str(first), str(second), *args, "--out", str(tmp_path / "two.yaml")])
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    fitted_one, fitted_two = load_gate_config(tmp_path / "one.yaml"), load_gate_config(tmp_path / "two.yaml")
    assert fitted_two.tasks == fitted_one.tasks and fitted_two.checks == fitted_one.checks
    assert fitted_two.provenance["data_sha256"].keys() == {str(first), str(second)}
    assert fitted_two.provenance["cases"] == fitted_one.provenance["cases"]
    twice = runner.invoke(app, ["calibrate", str(first), str(first), *args, "--out", str(tmp_path / "x.yaml")])
    assert twice.exit_code != 0 and "appear more than once" in " ".join(twice.output.split())
    assert not (tmp_path / "x.yaml").exists()


def test_calibrate_can_hold_the_out_of_sample_miss_rate_to_the_limit(tmp_path):
    out, report = tmp_path / "gate.yaml", tmp_path / "calibrate.json"
    result = runner.invoke(app, ["calibrate", str(FIXTURE), "--max-miss", "0.2", "--hold-out-of-sample",
                                 "--out-of-sample", "5", "--out", str(out), "--json", str(report)])
    assert result.exit_code == 0, result.output
    # 33 good QA answers: three quarters of them are fewer than a fit needs, so no task is held and
    # the command says so instead of holding a task on too few answers.
    assert "no task type has enough labels" in " ".join(result.output.split())
    assert load_gate_config(out).provenance["miss_limit_per_task"] == {}
    assert json.loads(report.read_text())["held_limits"] == {"limits": {}, "curves": {}}


def test_calibrate_balance_holds_the_average_over_datasets_to_the_limit(tmp_path):
    out = tmp_path / "gate.yaml"
    result = runner.invoke(app, ["calibrate", str(FIXTURE), "--max-miss", "0.15", "--balance", "--out", str(out)])
    assert result.exit_code == 0, result.output
    provenance = load_gate_config(out).provenance
    assert provenance["balance"] == "dataset"
    assert provenance["fitted_on_data"]["averaged_over_datasets"]["miss"] <= 0.15


def test_calibrate_refuses_when_the_labels_cannot_support_the_miss_rate(tmp_path):
    result = runner.invoke(app, ["calibrate", str(FIXTURE), "--max-miss", "0.05", "--out", str(tmp_path / "g.yaml")])
    assert result.exit_code == 2
    assert "label 38 more bad answers" in " ".join(result.output.split())
    assert not (tmp_path / "g.yaml").exists()


def test_calibrate_names_a_base_config_it_cannot_rewrite(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("checks:\n  grounding:\n    minimum: 0.6\n", encoding="utf-8")  # block style: not rewritable in place
    result = runner.invoke(app, ["calibrate", str(FIXTURE), "--max-miss", "0.15", "--config", str(base),
                                 "--out", str(tmp_path / "g.yaml")])
    assert result.exit_code == 2
    assert "nothing written" in " ".join(result.output.split()) and not (tmp_path / "g.yaml").exists()


def test_answers_with_marked_errors_are_counted_served_per_error_kind():
    from types import SimpleNamespace

    from autovalidators.inference.case import Case
    from autovalidators.inference.gate_quality import Labelled, evaluate
    from autovalidators.inference.results import Decision, FailureType

    def item(i: int, good: bool, kinds: list[str]) -> Labelled:
        case = Case(id=str(i), question="q", answer="a", meta={"dataset": "written_en_longform", "error_kinds": kinds})
        return Labelled(case, good, "en", "faithful" if good else "hallucinated")

    def result(accepted: bool):
        return SimpleNamespace(decision=Decision.ACCEPT if accepted else Decision.REJECT,
                               failure_type=FailureType.NONE if accepted else FailureType.CONFIDENT_HALLUCINATION,
                               meta={"task": "QA"})

    # A wrong number served, a wrong number and a wrong name stopped, an addition served; a good answer.
    labelled = [item(0, False, ["number"]), item(1, False, ["entity", "number"]), item(2, False, ["addition"]),
                item(3, True, [])]
    quality = evaluate(labelled, [result(True), result(False), result(True), result(True)])
    assert quality["bad_accepted_by_error"] == {"en": {"addition": {"served": 1, "of": 1},
                                                       "entity": {"served": 0, "of": 1},
                                                       "number": {"served": 1, "of": 2}}}
    assert quality["bad_accepted_by_kind"] == {"en": {"hallucinated": 2}}
    # Cases that mark no errors add no row.
    plain = [Labelled(Case(id="p", question="q", answer="a"), False, "en", "hallucinated")]
    assert evaluate(plain, [result(True)])["bad_accepted_by_error"] == {}
