"""The labelled gate cases built from reading-comprehension sets: each label is what its answer is."""

from __future__ import annotations

import json

import pytest

from autovalidators.data_prep.gate_sets import _sentence_with, reading_cases, split_of, stable_sample

ARTICLES = [
    ("The bridge opened in 1932. It was designed by John Bradfield. Trains crossed it from the start.",
     [("When did the bridge open?", "1932"), ("Who designed the bridge?", "John Bradfield")]),
    ("The museum holds 4000 paintings. Its founder was Anna Berg. Entry is free on Sundays.",
     [("How many paintings does the museum hold?", "4000"), ("Who founded the museum?", "Anna Berg")]),
    ("The river is 310 km long. It flows into the Baltic Sea. Salmon spawn in its upper reaches.",
     [("How long is the river?", "310"), ("Where does the river flow?", "the Baltic Sea")]),
]


def test_each_constructed_answer_carries_the_label_of_what_it_is(tmp_path):
    data = {"data": [{"title": f"a{i}", "paragraphs": [{"context": context, "qas": [
        {"id": f"q{i}{j}", "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
        for j, (q, a) in enumerate(qas)]}]} for i, (context, qas) in enumerate(ARTICLES)]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    cases = list(reading_cases(path, "xquad", "en", limit=6))
    by_kind: dict[str, list[dict]] = {}
    for case in cases:
        by_kind.setdefault(case["meta"]["kind"], []).append(case)
    assert {c["label"] for c in by_kind["extractive"]} == {"good"} and len(by_kind["extractive"]) == 6
    for gold in by_kind["extractive"]:  # the whole sentence that holds the answer, from its own context
        assert gold["answer"] in gold["context"] and gold["answer"].endswith(".")
    for bad in by_kind.get("swapped", []):  # one answer replaced by another question's of the same kind
        assert bad["label"] == "bad" and bad["answer"] not in bad["context"]
        (start, end), = bad["meta"]["unsupported"]  # where the swapped-in answer sits
        gold = next(g for g in by_kind["extractive"] if g["id"] == bad["id"].replace("-swap", "-gold"))
        assert bad["answer"][:start] + bad["answer"][end:] != gold["answer"]
        assert bad["answer"][:start] == gold["answer"][:start]
        assert bad["answer"][end:] == gold["answer"][len(gold["answer"]) - len(bad["answer"]) + end:]
        assert bad["answer"][start:end] not in bad["context"]
    for bad in by_kind.get("off_topic", []) + by_kind.get("should_abstain", []):
        assert bad["label"] == "bad"
    for miss in by_kind.get("should_abstain", []):  # the gold sentence over another article's paragraph
        assert miss["answer"] not in miss["context"]
    assert set(by_kind) >= {"extractive", "swapped", "off_topic", "should_abstain"}
    # One group per paragraph, and the split follows the group, never the case.
    assert all(split_of(c["meta"]["group"]) in ("dev", "test") for c in cases)


def test_the_gold_sentence_is_cut_at_sentence_ends():
    context = "First one. The answer is here, in 1932. Last one."
    assert _sentence_with(context, context.index("1932"), context.index("1932") + 4) == "The answer is here, in 1932."


def test_paragraph_sides_share_no_article_and_the_tone_source_reads_only_the_dev_side(tmp_path):
    from autovalidators.data_prep.gate_sets import squad_paragraphs_by_split
    from autovalidators.data_prep.tone.config import SourceSpec
    from autovalidators.data_prep.tone.sources import _rows
    from autovalidators.inference.text import split_sentences

    # 40 articles of two paragraphs each: some land on both sides of the split
    articles = []
    for i in range(40):
        paragraphs = [f"Article {i} paragraph {j} says the river is {300 + i} km long. It has {j + 2} bridges over it."
                      for j in range(2)]
        articles.append({"title": f"t{i}", "paragraphs": [
            {"context": c, "qas": [{"id": f"q{i}{j}", "question": "How long?",
                                    "answers": [{"text": str(300 + i), "answer_start": c.index(str(300 + i))}]}]}
            for j, c in enumerate(paragraphs)]})
    path = tmp_path / "tydi.json"
    path.write_text(json.dumps({"data": articles}), encoding="utf-8")
    sides = squad_paragraphs_by_split(path, "tydiqa", "en")
    title = {p["context"]: a["title"] for a in articles for p in a["paragraphs"]}
    dev_titles = {title[c] for c in sides["dev"]}
    assert sides["dev"] and sides["test"]
    assert not dev_titles & {title[c] for c in sides["test"]}  # the held-out side shares no article
    assert len(sides["dev"]) + len(sides["test"]) < 80  # a straddling article's test paragraphs are dropped
    spec = SourceSpec(paths=[str(path)], format="squad_sentences", text_column="text", id_column="id",
                      language="en", licence="test", fixed_labels={"toxicity": 0})
    texts = [row["text"] for _, row in _rows(path, spec)]
    assert texts == [s.text for c in sides["dev"] for s in split_sentences(c)]


def test_a_changed_text_moves_only_itself_in_or_out_of_the_tone_sample():
    texts = [f"Sentence number {i} about a river." for i in range(400)]
    sample = stable_sample(texts, 100, salt="xquad_ru")
    assert len(sample) == 100 == len(set(sample))
    assert sample == stable_sample(list(reversed(texts)), 100, salt="xquad_ru")  # order does not matter
    # Cut differently, ten texts change; the rest of the sample stays (a random draw over the new
    # list would have drawn anew).
    changed = [t + " It is long." if i % 40 == 0 else t for i, t in enumerate(texts)]
    resampled = stable_sample(changed, 100, salt="xquad_ru")
    assert len(set(sample) - set(resampled)) <= 10
    assert stable_sample(texts, 100, salt="squad2_en") != sample  # each set has its own draw


def test_the_tone_check_samples_only_texts_the_tone_data_prep_holds_out():
    from autovalidators.data_prep.gate_sets import tone_unseen
    from autovalidators.data_prep.splits import grouped_split
    from autovalidators.data_prep.tone.config import load_tone_config
    from autovalidators.data_prep.tone.records import text_group

    config = load_tone_config()
    texts = [f"@user you are number {i} on my list, loser" for i in range(3000)]
    # Davidson: no benchmark holdout, so its test split only (a tenth), every text of a group together.
    unseen = tone_unseen(texts + ["@other YOU ARE NUMBER 7 on my list,   loser"], "davidson", config)
    split = grouped_split([text_group(t) for t in texts], str, config.splits.fractions, seed=config.splits.seed)
    assert {text_group(t) for t in unseen} == set(split["test"])
    assert 0.07 < len(unseen) / len(texts) < 0.13
    assert ("@other YOU ARE NUMBER 7 on my list,   loser" in unseen) == (texts[7] in unseen)
    # OLID: its benchmark holdout (a fifth; its hash leaves the rest all in train).
    olid = tone_unseen(texts, "olid", config)
    holdout = grouped_split([text_group(t) for t in texts], str, {"keep": 0.8, "holdout": 0.2}, seed=config.splits.seed)
    assert config.sources["olid"].holdout_fraction == 0.2
    assert {text_group(t) for t in olid} == set(holdout["holdout"]) and 0.16 < len(olid) / len(texts) < 0.24


@pytest.mark.parametrize("name, per_language", [("ORDINARY_ANSWERS", {"en": 50, "ru": 50}),
                                                ("ORDINARY_ANSWERS_V2", {"en": 150, "ru": 150}),
                                                ("ORDINARY_ANSWERS_V3", {"en": 149, "ru": 148})])
def test_the_ordinary_answers_are_neutral_texts_of_both_languages_the_tone_check_can_read(name, per_language):
    from autovalidators.data_prep import gate_sets
    from autovalidators.data_prep.io import read_jsonl
    from autovalidators.inference.text import language_of

    path = getattr(gate_sets, name)
    prefix = path.stem  # ordinary_answers, ordinary_answers_v2, _v3: the dataset names per language
    rows = list(read_jsonl(path))
    assert len({r["id"] for r in rows}) == len(rows) == sum(per_language.values())
    for row in rows:
        assert row["label"] == "neutral" and row["dataset"] == f"{prefix}_{row['language']}"
        assert language_of(row["text"]) == row["language"], row["text"]
        assert len(row["text"]) in gate_sets.TONE_TEXT_LENGTH
    assert sum(r["language"] == "ru" for r in rows) == per_language["ru"]


@pytest.mark.parametrize("later, earlier", [("ORDINARY_ANSWERS_V2", ["ORDINARY_ANSWERS"]),
                                            ("ORDINARY_ANSWERS_V3", ["ORDINARY_ANSWERS", "ORDINARY_ANSWERS_V2"])])
def test_each_later_set_of_ordinary_answers_shares_no_sentence_with_the_earlier_ones_or_any_training_text(later, earlier):
    from autovalidators.data_prep import gate_sets
    from autovalidators.data_prep.io import read_jsonl
    from autovalidators.inference.text import split_sentences

    def sentences(texts):
        return {s.text.strip().rstrip(".") for text in texts for s in split_sentences(text)}

    instructions = gate_sets.ORDINARY_ANSWERS.parent.glob("assistant_instructions*.jsonl")
    others = [r["text"] for path in [*(getattr(gate_sets, name) for name in earlier), *instructions]
              for r in read_jsonl(path)]
    assert len(others) > 1000
    assert not sentences(r["text"] for r in read_jsonl(getattr(gate_sets, later))) & sentences(others)


def test_the_appropriate_forum_texts_are_the_rows_the_tone_source_keeps_and_never_trains_on(tmp_path):
    from autovalidators.data_prep.gate_sets import APPROPRIATENESS, appropriate_unseen
    from autovalidators.data_prep.splits import grouped_split
    from autovalidators.data_prep.tone.config import load_tone_config
    from autovalidators.data_prep.tone.records import text_group

    config = load_tone_config()
    folder = tmp_path / APPROPRIATENESS
    folder.mkdir(parents=True)
    kept = [f"Сообщение номер {i}: к какому врачу идти?" for i in range(200)]
    for name, rows in (("val.csv", kept[:100]), ("test.csv", kept[100:])):
        lines = [f"{text},0.0,0.1" for text in rows] + ["Неуместное,0.9,0.1", "Грубое,0.0,0.9"]
        (folder / name).write_text("text,inappropriate,toxic_new\n" + "\n".join(lines) + "\n", encoding="utf-8")
    texts = appropriate_unseen(tmp_path, config)
    # Only kept rows (appropriate, not scored toxic), and of them exactly the tone prep's test groups.
    test_groups = set(grouped_split([text_group(t) for t in kept], str, config.splits.fractions,
                                    seed=config.splits.seed, allow_empty=True)["test"])
    assert {text_group(t) for t in texts} == test_groups and 0 < len(texts) < 60


def test_an_appropriateness_row_without_a_score_stops_the_held_out_set_with_its_file_line_and_column(tmp_path):
    from autovalidators.data_prep.gate_sets import APPROPRIATENESS, appropriate_unseen
    from autovalidators.data_prep.io import DataError
    from autovalidators.data_prep.tone.config import load_tone_config

    folder = tmp_path / APPROPRIATENESS
    folder.mkdir(parents=True)
    (folder / "val.csv").write_text("text,inappropriate,toxic_new\nК какому врачу идти?,0.0,0.1\n", encoding="utf-8")
    (folder / "test.csv").write_text("text,inappropriate,toxic_new\nОбычное,0.0,0.1\nБез оценки,,0.1\n",
                                     encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.csv:3: column 'inappropriate' = '' is not a number"):
        appropriate_unseen(tmp_path, load_tone_config())


@pytest.mark.parametrize("name, language", [("written/ru", "ru"), ("written/en_longform", "en")])
def test_the_written_answers_are_gate_cases_labelled_by_their_marked_errors(name, language):
    from autovalidators.data_prep.fact_spans.written_errors import WRITTEN_SETS, read_written_errors
    from autovalidators.data_prep.gate_sets import written_cases

    for split in ("dev", "test"):
        records, cases = read_written_errors(WRITTEN_SETS[name], split=split), written_cases(split, name)
        assert [c["id"] for c in cases] == [r["id"] for r in records]
        for record, case in zip(records, cases):
            assert case["label"] == ("bad" if record["errors"] else "good")
            assert case["meta"]["language"] == language and case["meta"]["task"] == "QA"
            assert case["meta"]["dataset"] == name.replace("/", "_")
            assert case["meta"]["error_kinds"] == sorted({e["kind"] for e in record["errors"]})
            assert (case["question"], case["context"], case["answer"]) == (record["question"], record["context"],
                                                                            record["answer"])
