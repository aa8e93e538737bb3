"""`autovalidators report` on synthetic benchmark JSONs: numbers copied exactly, text escaped,
images embedded, absent or broken benchmarks shown as such."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from autovalidators.inference.cli import _register_commands, app
from autovalidators.inference.reporting.build import build_report, draw_figures, write_report
from autovalidators.inference.reporting.plots import operating_point, pr_points
from autovalidators.inference.reporting.render import fmt, highlighted_html
from autovalidators.inference.reporting.schema import Highlight, Report, ScoredSet

pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (the train extra)")
runner = CliRunner()


def build(benchmarks: Path, config, out: Path) -> tuple[Report, dict[str, Path]]:
    report = build_report(config, benchmarks, out.name, "autovalidators report (test)")
    return report, write_report(report, draw_figures(report, config), out)


@pytest.fixture(scope="module")
def built(shared_benchmarks, report_config, tmp_path_factory) -> tuple[Report, dict[str, Path]]:
    """One report with figures from the shared JSONs, for the tests that only read it."""
    return build(shared_benchmarks, report_config, tmp_path_factory.mktemp("report") / "r")


def lookup(data: dict, dotted: str):
    value = data
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def section(report: Report, name: str):
    return next(s for s in report.sections if s.name == name)


def test_every_table_number_equals_the_benchmark_json(built, shared_benchmarks):
    report, paths = built
    benchmarks = shared_benchmarks
    html, markdown = paths["html"].read_text(), paths["md"].read_text()
    checked = 0
    for name in ("qa_relevance", "tone", "fact_spans"):
        data = json.loads((benchmarks / f"{name}.json").read_text())
        part = section(report, name)
        assert part.status == "benchmarked"
        for row in part.metrics:
            source = lookup(data, row.source_key)
            for key, value in row.extra.items():  # accuracy, ROC-AUC, threshold, macro-F1, counts ...
                assert value == source[key], (name, row.source_key, key)
            if row.scope == "summary":
                assert row.precision is row.recall is row.f1 is None
                continue
            for key in ("precision", "recall", "f1"):
                assert getattr(row, key) == source[key], (name, row.source_key, key)
                assert fmt(source[key]) in html
                checked += 1
            assert f"| {row.group} | {fmt(row.precision)} | {fmt(row.recall)} | {fmt(row.f1)} |" in markdown
        for latency in part.latency:
            source = lookup(data, latency.source_key)
            assert (latency.p50_ms, latency.p95_ms) == (source["p50_ms"], source["p95_ms"])
    assert checked >= 30
    # The report.json round-trips into the same model.
    assert Report.model_validate_json(paths["json"].read_text()) == report


def test_rows_are_grouped_by_task_label_language_and_runtime(built):
    report, _ = built
    qa = section(report, "qa_relevance")
    scopes = {(r.scope, r.group) for r in qa.metrics}
    assert {("task", "int8 / test"), ("task", "fp32 / test"), ("language", "int8 / test / en"),
            ("language", "int8 / test / ru")} <= scopes
    assert next(r for r in qa.metrics if r.group == "int8 / test").support == 160
    assert {r.runtime for r in qa.latency} == {"onnx_int8", "onnx_fp32", "torch_eager"}
    assert {r.setting for r in qa.latency} == {"1x128", "32x128"}
    wikiqa = next(r for r in qa.metrics if r.group == "int8 / wikiqa_dev")
    assert wikiqa.scope == "summary" and (wikiqa.extra["map"], wikiqa.extra["mrr"]) == (0.71, 0.72)

    tone = section(report, "tone")
    labels = {r.group for r in tone.metrics if r.scope == "label"}
    assert {"int8 / test_all / toxicity", "int8 / test_all / threat", "int8 / test_by_source / olid / insult",
            "int8 / test_by_source / ru_toxic / toxicity"} <= labels
    rows = {(r.scope, r.group) for r in tone.metrics}
    assert {("task", "int8 / ru_toxic_val"), ("task", "fp32 / ru_toxic_val")} <= rows
    olid = next(r for r in tone.metrics if r.group == "int8 / olid_level_a / any_abusive")
    assert olid.scope == "summary" and olid.extra["macro_f1"] == 0.7311
    assert {r.setting for r in tone.latency} == {"1x short", "32x short"}
    # One scored set per prediction set and label; a record without a threat label is left out.
    threat = next(s for s in tone.scored if s.name == "test / threat")
    assert len(threat.scores) == sum(1 for i in range(60) if i % 3 != 0)
    assert threat.threshold == pytest.approx(0.5)

    fact = section(report, "fact_spans")
    assert {r.group for r in fact.metrics} == {"int8 / ragtruth/Summary / example", "int8 / ragtruth/Summary / char",
                                               "fp32 / ragtruth/Summary / example", "fp32 / ragtruth/Summary / char"}
    settings = {(r.runtime, r.setting) for r in fact.latency}
    assert settings >= {("onnx_int8", "512 tokens"), ("torch_eager", "128 tokens")}
    assert "excluded from ragtruth/QA: 150 rows without a reference" in fact.notes
    # The shipped model's predictions only: the fp32 copy would draw every curve twice.
    assert [s.name for s in fact.scored] == ["int8 / ragtruth/Summary"]


def test_provenance_names_command_model_and_data(built, shared_benchmarks):
    report, paths = built
    qa = section(report, "qa_relevance").provenance
    assert qa.command == "autovalidators benchmark qa-relevance --output x.json" and qa.command_recorded
    assert qa.model_sha256 == "ab" * 32 and qa.model_version == "qa-1"
    assert len(qa.benchmark_sha256) == 64
    assert qa.data == {"test: prepared/qa_relevance/definitely_missing.jsonl": "missing"}
    tone = section(report, "tone")
    assert not tone.provenance.command_recorded
    assert tone.provenance.command.startswith(
        "autovalidators benchmark tone --config configs/tone_model_e5_12l_distill3r2.yaml --output ")
    assert any("does not record its command" in n for n in tone.notes)
    assert "ab" * 32 in paths["html"].read_text()
    # Tone names its sets and folder: the files are found and hashed; fact_spans names a folder.
    assert {k.split(":")[0] for k in tone.provenance.data} == {"test", "olid"}
    assert all(len(v) == 64 for v in tone.provenance.data.values())
    fact = section(report, "fact_spans").provenance
    assert list(fact.data) == [f"ragtruth: {shared_benchmarks.parent / 'data' / 'heldout' / 'ragtruth.jsonl'}"]


def test_confusion_matrix_counts_predictions_at_the_threshold(built, shared_benchmarks):
    report, _ = built
    data = json.loads((shared_benchmarks / "qa_relevance.json").read_text())
    matrix = next(c for c in section(report, "qa_relevance").confusion if c.name == "predictions").matrix
    expected = [[0, 0], [0, 0]]
    for p in data["predictions"]:
        expected[p["label"]][int(p["score"] >= data["threshold"])] += 1
    assert matrix == expected


def test_fact_span_confusion_and_errors_use_the_benchmarks_own_flags(built, shared_benchmarks):
    report, paths = built
    data = json.loads((shared_benchmarks / "fact_spans.json").read_text())
    predictions = data["quality"]["int8"]["ragtruth/Summary"]["predictions"]
    expected = [[0, 0], [0, 0]]
    for p in predictions:
        expected[int(p["gold"])][int(p["predicted"])] += 1
    fact = section(report, "fact_spans")
    assert fact.confusion[0].matrix == expected
    wrong = {p["id"] for p in predictions if p["gold"] != p["predicted"]}
    assert fact.errors and {e.id for e in fact.errors} <= wrong
    # The predictions hold ids only: the answer text comes from the held-out file, spans on top.
    example = next(e for e in fact.errors if e.error == "false negative")
    assert example.text.startswith("The bridge opened in 19") and example.question == "When?"
    assert [(h.start, h.end, h.label) for h in example.highlights] == [(21, 25, "gold HALLUCINATION")]


def test_worst_errors_are_real_errors_and_their_text_is_escaped(built, report_config, nasty):
    report, paths = built
    for part in (section(report, n) for n in ("qa_relevance", "tone", "fact_spans")):
        assert 0 < len(part.errors) <= report_config.worst_errors
        for example in part.errors:
            threshold = next(x.threshold for x in part.scored if x.name == example.group)
            if example.error == "false positive":
                assert example.score >= threshold and example.gold == "0"
            else:
                assert example.error == "false negative" and example.score < threshold and example.gold == "1"
    html = paths["html"].read_text()
    assert nasty not in html and "<script" not in html.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b onclick=&quot;y&quot;&gt;" in html
    # fact_spans errors carry the gold/predicted spans as <mark>s over the escaped answer.
    assert re.search(r'<mark class="gold[^"]*"[^>]*>19\d\d</mark>', html)


def test_highlights_may_overlap_and_are_escaped():
    text = "a <b> & c"
    out = highlighted_html(text, [Highlight(start=2, end=5, label="gold HALLUCINATION"),
                                  Highlight(start=4, end=9, label="predicted HALLUCINATION")])
    assert out == ('a <mark class="gold" title="gold HALLUCINATION">&lt;b</mark>'
                   '<mark class="gold predicted" title="gold HALLUCINATION; predicted HALLUCINATION">&gt;</mark>'
                   '<mark class="predicted" title="predicted HALLUCINATION"> &amp; c</mark>')


def test_images_are_embedded_pngs_and_nothing_is_fetched(built):
    report, paths = built
    html = paths["html"].read_text()
    sources = re.findall(r'<img [^>]*src="([^"]+)"', html)
    # qa: PR + confusion + calibration + latency; tone: 3 labels x (PR + confusion) + calibration + latency.
    assert len(sources) >= 4 + 8 + 3
    for source in sources:
        assert source.startswith("data:image/png;base64,")
        assert base64.b64decode(source.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(https?:)?//', html) and "@import" not in html and "url(" not in html
    # The Markdown links the same figures as files.
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", paths["md"].read_text()):
        assert (paths["md"].parent / link).read_bytes()[:4] == b"\x89PNG"


def test_missing_and_broken_benchmarks_are_shown_not_invented(benchmarks, report_config, tmp_path):
    (benchmarks / "tone.json").write_text("{not json", encoding="utf-8")
    report, paths = build(benchmarks, report_config, tmp_path / "r")
    statuses = {s.name: s.status for s in report.sections}
    assert statuses == {"fact_spans": "benchmarked", "qa_relevance": "benchmarked", "tone": "unreadable",
                        "obedience": "not benchmarked", "gate": "not benchmarked"}
    obedience = section(report, "obedience")
    assert not obedience.metrics and not obedience.latency
    command = f"autovalidators benchmark obedience --json {benchmarks / 'obedience.json'}"
    assert command in obedience.message
    for text in (paths["html"].read_text(), paths["md"].read_text()):
        assert command in text and "not benchmarked" in text and "unreadable" in text


def test_pr_points_and_operating_point_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 200)
    scores = np.round(np.clip(labels * 0.3 + rng.random(200) * 0.7, 0, 1), 2)  # ties on purpose
    precision, recall, cuts = pr_points(scores, labels)
    sk_precision, sk_recall, sk_cuts = metrics.precision_recall_curve(labels, scores)
    # sklearn lists cuts ascending and may drop the cuts after full recall; compare where both have one.
    ours = dict(zip(cuts, zip(precision, recall)))
    for cut, p, r in zip(sk_cuts, sk_precision, sk_recall):
        assert ours[cut] == pytest.approx((p, r))
    point = operating_point(ScoredSet(name="x", scores=list(scores), labels=list(labels), threshold=0.5))
    predicted = scores >= 0.5
    assert point == pytest.approx((metrics.precision_score(labels, predicted), metrics.recall_score(labels, predicted)))


def test_report_command_writes_the_three_files(benchmarks, tmp_path):
    _register_commands()
    for name in ("tone", "fact_spans"):  # one benchmark is enough here, and faster to draw
        (benchmarks / f"{name}.json").unlink()
    out = tmp_path / "reports" / "nightly"
    result = runner.invoke(app, ["report", "--benchmarks", str(benchmarks), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} >= {"report.json", "report.md", "report.html", "img"}
    assert json.loads((out / "report.json").read_text())["name"] == "nightly"


def test_report_command_rejects_a_bad_config(tmp_path):
    _register_commands()
    bad = tmp_path / "report.yaml"
    bad.write_text("sections: {}\nworst_error: 3\n", encoding="utf-8")
    result = runner.invoke(app, ["report", "--config", str(bad), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "worst_error: unknown key" in result.output


def test_run_executes_the_benchmarks_that_can_run_and_skips_those_without_a_model(report_config, tmp_path):
    from autovalidators.inference.reporting.build import run_benchmarks
    from autovalidators.inference.reporting.schema import SectionConfig

    config = report_config.model_copy(update={"models_dir": str(tmp_path / "no_models"), "sections": {
        "gate": SectionConfig(file="gate.json", command="autovalidators benchmark gate --repeat 1 --json {file}"),
        "tone": SectionConfig(file="tone.json", command="autovalidators benchmark tone --output {file}",
                              needs_model="tone"),
        "obedience": SectionConfig(file="obedience.json", command="autovalidators benchmark no-such-benchmark"),
    }})
    benchmarks = tmp_path / "benchmarks"
    steps: list[str] = []
    outcomes = run_benchmarks(config, benchmarks, tmp_path / "logs", steps.append)
    assert outcomes["gate"] == "ran" and (benchmarks / "gate.json").is_file()
    assert outcomes["tone"].startswith("skipped: no model in")
    assert outcomes["obedience"].startswith("failed (exit 2; see ")
    assert steps == ["benchmark gate", "benchmark obedience"]
    report = build_report(config, benchmarks, "run", "test", outcomes)
    gate = section(report, "gate")
    assert gate.status == "benchmarked" and gate.latency[0].runtime == "gate"
    assert section(report, "tone").status == "not benchmarked"
    assert any(n.startswith("--run: failed") for n in section(report, "obedience").notes)


def test_the_shipped_report_config_prepares_the_folder_the_shipped_fact_span_benchmark_reads():
    # `report --run` on a fresh clone prepares `needs_data` first; a section pointing at another
    # task's folder would prepare data its benchmark never reads, then fail.
    from autovalidators.inference.config import load_config
    from autovalidators.inference.manifest import load_manifest
    from autovalidators.inference.reporting.schema import ReportConfig
    from autovalidators.inference.validators.grounding_spans import TASK as GROUNDING_TASK

    root = Path(__file__).resolve().parents[3]
    fact = load_config(root / "configs" / "report.yaml", ReportConfig).sections["fact_spans"]
    manifest = load_manifest(root / "models" / "fact_spans")
    assert manifest.task == GROUNDING_TASK
    data_dir = manifest.training.get("data", {}).get("dir", "prepared/grounding")
    assert fact.needs_data == [f"{data_dir}/heldout"]
    assert fact.prepare == "autovalidators prepare grounding"
