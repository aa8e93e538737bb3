"""`label tone` end to end on tiny fixtures: merge rule, benchmark sets never trained on, outputs."""

from __future__ import annotations

import json

from tone_helpers import write_config, write_sources
from typer.testing import CliRunner

import autovalidators.data_prep.tone.cli  # noqa: F401  (registers the label commands)
from autovalidators.data_prep.tone.config import load_tone_config
from autovalidators.data_prep.tone.pipeline import build
from autovalidators.data_prep.tone.records import read_records
from autovalidators.inference.cli import app


def _build(tmp_path):
    write_sources(tmp_path / "data")
    config = load_tone_config(write_config(tmp_path / "tone.yaml", tmp_path / "data"))
    report = build(config, tmp_path / "out")
    splits = {p.stem: list(read_records(p)) for p in (tmp_path / "out").glob("*.jsonl")}
    return report, splits


def test_outputs_splits_and_benchmarks(tmp_path):
    report, splits = _build(tmp_path)
    assert {"train", "dev", "test", "benchmark_olid", "benchmark_ru_val"} <= set(splits)
    assert (tmp_path / "out" / "DATA_CARD.md").is_file() and (tmp_path / "out" / "data_card.json").is_file()
    assert json.loads((tmp_path / "out" / "labelling_report.json").read_text())["splits"] == report["splits"]
    # The benchmark-role source never reaches train/dev/test, and held-out OLID is only OLID.
    trainable = [r for name in ("train", "dev", "test") for r in splits[name]]
    assert not any(r.source == "ru_val" for r in trainable)
    assert {r.source for r in splits["benchmark_olid"]} == {"olid"}
    assert {r.source for r in splits["benchmark_ru_val"]} == {"ru_val"}
    # No text group in two splits.
    seen: dict[str, str] = {}
    for name, records in splits.items():
        for record in records:
            assert seen.setdefault(record.group, name) == name


def test_duplicates_collapse_and_gold_wins_over_lexicon(tmp_path):
    report, splits = _build(tmp_path)
    records = {r.text: r for rs in splits.values() for r in rs}
    # The Davidson copy of an OLID tweet is folded in: one record, which keeps OLID's id.
    assert "Lovely  weather in the park TODAY" not in records
    weather = records["lovely weather in the park today"]
    assert weather.duplicates == ["davidson:davidson.csv:5"]
    assert weather.labels["identity_hate"] == 0  # filled from the Davidson copy's gold
    assert report["dedup"]["duplicates_collapsed.davidson"] == 1
    # Gold has no obscenity rule for OLID here, so the lexicon decides, with provenance.
    shit = records["what a shit day honestly"]
    assert shit.labels["obscenity"] == 1 and shit.provenance["obscenity"].labeller == "lexicon"
    assert shit.provenance["toxicity"].labeller == "gold" and shit.provenance["toxicity"].source == "olid"
    # Gold (toxicity 0 from Davidson "neither") outranks a lexicon positive, and the clash is counted.
    shitty = records["this shitty game again lol"]
    assert shitty.labels["toxicity"] == 0 and shitty.votes["lexicon"]["toxicity"] == 1
    assert shitty.provenance["toxicity"].labeller == "gold"
    assert report["disagreements"]["toxicity: gold=0 vs lexicon=1"] >= 1
    # Nobody says anything about politics for these sources: missing everywhere, never 0.
    assert all(r.labels["politics"] is None for r in records.values())


def test_label_tone_command(tmp_path):
    write_sources(tmp_path / "data")
    config = write_config(tmp_path / "tone.yaml", tmp_path / "data")
    result = CliRunner().invoke(app, ["label", "tone", "--config", str(config), "--out", str(tmp_path / "out"),
                                      "--no-llm"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "train.jsonl").is_file()
    bad = CliRunner().invoke(app, ["label", "tone", "--config", str(config), "--out", str(tmp_path / "out2"),
                                   "--data-root", str(tmp_path / "nowhere")])
    assert bad.exit_code == 2 and "no such file" in bad.output


def test_bad_source_row_is_skipped_reported_and_exits_1(tmp_path):
    write_sources(tmp_path / "data")
    with open(tmp_path / "data" / "jigsaw.csv", "a", encoding="utf-8") as handle:
        handle.write("a broken row,maybe,0,0,0,0,0\n")
    config = write_config(tmp_path / "tone.yaml", tmp_path / "data")
    result = CliRunner().invoke(app, ["label", "tone", "--config", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    report = json.loads((tmp_path / "out" / "labelling_report.json").read_text())
    assert len(report["bad_rows"]) == 1 and "jigsaw.csv:6: column 'toxic' = 'maybe'" in report["bad_rows"][0]
    texts = {r.text for p in (tmp_path / "out").glob("*.jsonl") for r in read_records(p)}
    assert "i will kill you" in texts and "a broken row" not in texts  # the rest was processed


def test_near_copies_of_benchmark_texts_and_their_rewrites_are_dropped_not_trained_on(tmp_path):
    from autovalidators.data_prep.tone.pipeline import benchmark_overlap
    from autovalidators.data_prep.tone.records import new_record

    def make(text, source, row, language="ru"):
        return new_record(text, language=language, source=source, row=row, labels=["toxicity"])

    benchmark = [make("Привет всем. Ну ты и тупой дебил, иди проспись уже наконец. Пока.", "ru_val", "val.csv:2")]
    cut = make("ну ты и тупой дебил, иди проспись уже наконец", "detox", "train.tsv:2")
    rewrite = make("ты неправ, тебе стоит отдохнуть", "detox", "train.tsv:2:neutral_comment1")
    other = make("совсем другой комментарий про погоду и футбол сегодня вечером", "detox", "train.tsv:3")
    english = make("ну ты и тупой дебил, иди проспись уже наконец", "olid", "x:1", language="en")
    kept, dropped = benchmark_overlap([cut, rewrite, other, english], benchmark)
    assert [r.row for r in dropped] == ["train.tsv:2", "train.tsv:2:neutral_comment1"]
    assert kept == [other, english]  # another language is not a copy of a Russian benchmark text


def test_every_collected_record_lands_in_a_written_file_dropped_ones_included(tmp_path):
    from autovalidators.data_prep.tone.pipeline import collect

    write_sources(tmp_path / "data")
    config = load_tone_config(write_config(tmp_path / "tone.yaml", tmp_path / "data"))
    records, _, _ = collect(config)
    report = build(config, tmp_path / "out")
    assert report["splits"]["dropped_benchmark_overlap"] == 0  # the fixture's texts are all distinct
    assert (tmp_path / "out" / "dropped_benchmark_overlap.jsonl").is_file()
    assert sum(report["splits"].values()) == len(records)  # dropped is written out, never lost
