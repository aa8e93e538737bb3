"""Gold mappings: each source's columns onto the label scheme; silence stays missing, not negative."""

from __future__ import annotations

import pytest
from tone_helpers import write_config, write_sources

from autovalidators.data_prep.io import DataError
from autovalidators.data_prep.tone.config import Rule, load_tone_config
from autovalidators.data_prep.tone.sources import read_source
from autovalidators.inference.config import ConfigError


@pytest.fixture()
def config(tmp_path):
    write_sources(tmp_path / "data")
    return load_tone_config(write_config(tmp_path / "tone.yaml", tmp_path / "data"))


def _records(name, config):
    records, errors = read_source(name, config)
    assert errors == []
    return records


def _by_text(records):
    return {r.text: r.votes.get("gold", {}) for r in records}


def test_olid_mapping_and_missing_is_not_negative(config):
    gold = _by_text(_records("olid", config))
    assert gold["@USER you are a stupid idiot"] == {"toxicity": 1, "insult": 1}
    assert gold["what a shit day honestly"] == {"toxicity": 1, "insult": 0}
    # NOT says "no offence at all": negative for every label with a NOT rule...
    assert gold["lovely weather in the park today"] == {"toxicity": 0, "insult": 0, "threat": 0}
    records = {r.text: r for r in _records("olid", config)}
    offensive = records["@USER you are a stupid idiot"]
    # ...but OFF says nothing about threats, obscenity, identity hate or politics: missing, not 0.
    for label in ("threat", "obscenity", "identity_hate", "politics"):
        assert label not in offensive.votes["gold"]
        assert offensive.labels[label] is None
    assert offensive.vote_details["gold"]["insult"] == "subtask_b=TIN"


def test_davidson_and_jigsaw_mappings(config):
    davidson = _by_text(_records("davidson", config))
    assert davidson["go back to your country you people"] == {"toxicity": 1, "identity_hate": 1}
    assert davidson["that bitch is crazy"] == {"toxicity": 1, "identity_hate": 0}
    assert davidson["just had a great coffee"] == {"toxicity": 0, "identity_hate": 0}
    jigsaw = _by_text(_records("jigsaw", config))
    assert jigsaw["i will kill you"] == {"toxicity": 1, "obscenity": 0, "threat": 1}
    assert jigsaw["thanks for the edit,\nsee you"] == {"toxicity": 0, "obscenity": 0, "threat": 0}
    # Any positive rule wins: severe_toxic alone makes the text toxic.
    assert jigsaw["severe but not marked toxic"]["toxicity"] == 1


def test_row_ids_name_file_and_line(config):
    records = _records("jigsaw", config)
    # The quoted multi-line comment starts on line 3; the next record on line 5.
    assert [r.row for r in records] == ["jigsaw.csv:2", "jigsaw.csv:3", "jigsaw.csv:5"]


def test_bad_cell_skips_only_its_row_and_names_file_and_line(tmp_path, config):
    (tmp_path / "data" / "jigsaw.csv").write_text(
        "comment_text,toxic,severe_toxic,obscene,threat,insult,identity_hate\n"
        "hello,0,0,0,0,0,0\nbad,yes,0,0,0,0,0\n,1,0,0,0,0,0\nfine,1,0,1,0,0,0\n")
    records, errors = read_source("jigsaw", config)
    assert [r.text for r in records] == ["hello", "fine"]
    assert errors[0].endswith("jigsaw.csv:3: column 'toxic' = 'yes' is not a number; row skipped")
    assert errors[1].endswith("jigsaw.csv:4: empty comment_text; row skipped")


def test_missing_file_and_column_are_clear(tmp_path, config):
    (tmp_path / "data" / "olid.tsv").unlink()
    with pytest.raises(DataError, match="olid.tsv: no such file"):
        read_source("olid", config)
    (tmp_path / "data" / "davidson.csv").write_text("id,tweet\n1,hello\n")
    # A column a mapping rule needs is checked up front: a wrong file fails at once, not row by row.
    with pytest.raises(DataError, match=r"no column\(s\) \['class'\]"):
        read_source("davidson", config)


def test_config_rejects_unknown_keys_labels_and_half_rules(tmp_path):
    write_sources(tmp_path / "data")
    path = write_config(tmp_path / "tone.yaml", tmp_path / "data", lexicon={"bogus": 1})
    with pytest.raises(ConfigError, match="lexicon.bogus: unknown key"):
        load_tone_config(path)
    path = write_config(tmp_path / "tone.yaml", tmp_path / "data", lexicon={"labels": {"toxicty": "positive_only"}})
    with pytest.raises(ConfigError, match="lexicon.labels.toxicty: not in the label scheme"):
        load_tone_config(path)
    with pytest.raises(ValueError, match="either positive/negative values or a threshold"):
        Rule(column="toxic", positive=["1"], threshold=0.5)
    with pytest.raises(ValueError, match="either positive/negative values or a threshold"):
        Rule(column="toxic")


def test_shipped_config_loads_and_maps_every_source_to_known_labels():
    config = load_tone_config()
    assert {"toxicity", "obscenity", "insult", "threat", "identity_hate", "politics"} <= set(config.labels)
    assert config.sources["ru_toxic_val"].role == "benchmark"
    assert config.sources["olid"].holdout_fraction > 0
    assert config.merge.priority[0] == "gold"


def test_shipped_russian_toxic_mapping_makes_a_clean_comment_negative_for_every_abusive_label(tmp_path):
    # A clean comment is evidence against insult, threat and identity hate too (as OLID's NOT is);
    # without it those labels never saw a Russian row and plain Russian text scored identity_hate 0.5.
    folder = tmp_path / "ru_toxic_2ch_pikabu" / "data"
    folder.mkdir(parents=True)
    for name in ("train.csv", "val.csv"):
        (folder / name).write_text('comment,labels\n"Спасибо, очень помогло.\n",0\nты тупой идиот,1\n',
                                   encoding="utf-8")
    config = load_tone_config()
    for source in ("ru_toxic", "ru_toxic_val"):
        records, errors = read_source(source, config, data_root=tmp_path)
        assert errors == []
        gold = _by_text(records)
        assert gold["Спасибо, очень помогло."] == {"toxicity": 0, "insult": 0, "threat": 0, "identity_hate": 0}
        # "toxic" names no particular kind: the other labels stay missing, not guessed.
        assert gold["ты тупой идиот"] == {"toxicity": 1}


def _parallel_config(tmp_path, **source_overrides):
    data = tmp_path / "data"
    write_sources(data)
    # ParaDetox's shape: a toxic comment, 1-3 rewrites, multi-line comments in double quotes.
    (data / "detox.tsv").write_text(
        "toxic_comment\tneutral_comment1\tneutral_comment2\n"
        "ну ты и дебил\tты неправ\tты ошибаешься\n"
        '"иди ты нафиг,\nклоун"\tуходи, пожалуйста\t\n', encoding="utf-8")
    source = {"paths": ["detox.tsv"], "format": "tsv", "quoted": True, "text_column": "toxic_comment",
              "language": "ru", "licence": "test", "fixed_labels": {"toxicity": 1},
              "paired_columns": ["neutral_comment1", "neutral_comment2"],
              "paired_labels": {"toxicity": 0, "insult": 0}, **source_overrides}
    path = write_config(tmp_path / "tone.yaml", data)
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["sources"]["detox"] = source
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return load_tone_config(path)


def test_parallel_source_gives_the_original_fixed_labels_and_each_rewrite_its_own_record(tmp_path):
    records = _records("detox", _parallel_config(tmp_path))
    gold = _by_text(records)
    # A quoted multi-line comment stays one text; an empty rewrite column is no record.
    assert gold == {"ну ты и дебил": {"toxicity": 1}, "ты неправ": {"toxicity": 0, "insult": 0},
                    "ты ошибаешься": {"toxicity": 0, "insult": 0}, "иди ты нафиг,\nклоун": {"toxicity": 1},
                    "уходи, пожалуйста": {"toxicity": 0, "insult": 0}}
    rows = {r.text: r.row for r in records}
    assert rows["ты ошибаешься"] == rows["ну ты и дебил"] + ":neutral_comment2"  # a rewrite names its original


def test_parallel_source_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="paired_columns and paired_labels"):
        _parallel_config(tmp_path, paired_labels={})
    with pytest.raises(ConfigError, match="sources.detox.fixed_labels.rudeness: not in the label scheme"):
        _parallel_config(tmp_path, fixed_labels={"rudeness": 1})


def test_unquoted_tsv_reads_stray_quotes_as_text(tmp_path):
    config = _parallel_config(tmp_path, quoted=False)  # writes the quoted fixture; replaced below
    (tmp_path / "data" / "detox.tsv").write_text('toxic_comment\tneutral_comment1\tneutral_comment2\n"ну и дебил\tты неправ\t\n',
                                                 encoding="utf-8")
    assert set(_by_text(_records("detox", config))) == {'"ну и дебил', "ты неправ"}


def test_shipped_neutral_sources_read_jsonl_and_headerless_tsv_as_negative_for_every_abusive_label(tmp_path):
    # The shapes of HaluEval (JSONL, numeric ids), TERRa (JSONL) and XNLI (TSV without a header row).
    halueval = tmp_path / "halueval_general" / "data"
    halueval.mkdir(parents=True)
    (halueval / "general_data.json").write_text(
        '{"ID": 1, "user_query": "q", "chatgpt_response": "Vaccines train the immune system."}\n'
        '{"ID": 2, "user_query": "q", "chatgpt_response": ""}\n', encoding="utf-8")
    xnli = tmp_path / "xnli_ru_en" / "data" / "xnli"
    xnli.mkdir(parents=True)
    (xnli / "dev-ru.tsv").write_text("Он пришёл домой.\tОн был дома.\tentailment\n", encoding="utf-8")
    config = load_tone_config()
    negative = {label: 0 for label in ("toxicity", "obscenity", "insult", "threat", "identity_hate")}
    records, errors = read_source("halueval_answers", config, data_root=tmp_path)
    assert _by_text(records) == {"Vaccines train the immune system.": negative}
    assert records[0].row == "general_data.json:1" and records[0].labels["politics"] is None
    assert len(errors) == 1 and "general_data.json:2: empty chatgpt_response" in errors[0]  # named, not lost
    records, errors = read_source("xnli_ru_hypotheses", config, data_root=tmp_path)
    assert errors == [] and _by_text(records) == {"Он был дома.": negative}


def test_a_jsonl_source_without_the_text_field_names_file_and_field(tmp_path):
    folder = tmp_path / "terra_ru" / "data" / "TERRa"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text('{"idx": 0, "hypothesis": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"train.jsonl: no column\(s\) \['premise'\]"):
        read_source("terra_premises", load_tone_config(), data_root=tmp_path)


def test_shipped_appropriate_source_keeps_only_rows_every_annotator_and_the_toxicity_score_pass(tmp_path):
    # The shape of the s-nlp appropriateness file: an inappropriateness share and an automatic toxicity score.
    folder = tmp_path / "ru_sensitive_topics" / "Version1" / "appropriateness"
    folder.mkdir(parents=True)
    (folder / "val.csv").write_text(
        "text,inappropriate,drugs,none,toxic_new\n"
        "К какому врачу идти с болью в локте?,0.0,0,1,0.02\n"          # kept
        "Где купить травку?,1.0,1,0,0.10\n"                              # inappropriate: left out
        "Кто-то счёл это неуместным,0.3,0,1,0.01\n"                      # one annotator in three: left out
        "Ну ты и тормоз,0.0,0,1,0.81\n"                                  # appropriate, not polite: left out
        "Строка с дырой,,0,1,0.01\n", encoding="utf-8")                  # no score: named, not lost
    records, errors = read_source("ru_appropriate", load_tone_config(), data_root=tmp_path)
    negative = {label: 0 for label in ("toxicity", "obscenity", "insult", "threat", "identity_hate")}
    assert _by_text(records) == {"К какому врачу идти с болью в локте?": negative}
    assert len(errors) == 1 and errors[0].endswith("val.csv:6: column 'inappropriate' = '' is not a number; row skipped")


def test_bundled_instruction_sources_read_from_the_package_whatever_the_data_root(tmp_path):
    # Written for this project and shipped in data_prep/samples: a data_root without them (tmp_path) changes nothing.
    config = load_tone_config()
    negative = {label: 0 for label in ("toxicity", "obscenity", "insult", "threat", "identity_hate")}
    for name, language, cyrillic in (("instructions_en", "en", False), ("instructions_ru", "ru", True),
                                     ("instructions2_en", "en", False), ("instructions2_ru", "ru", True)):
        records, errors = read_source(name, config, data_root=tmp_path)
        assert errors == [] and len(records) >= 90
        assert all(r.language == language and r.votes["gold"] == negative for r in records)
        assert all(any("а" <= ch <= "я" for ch in r.text.lower()) == cyrillic for r in records)
        [path] = config.source_paths(name, data_root=tmp_path)
        assert path.is_file() and tmp_path not in path.parents


def test_the_instructions_share_no_sentence_with_the_ordinary_answers_the_tone_check_measures():
    from autovalidators.data_prep.gate_sets import ORDINARY_ANSWERS
    from autovalidators.data_prep.io import read_jsonl
    from autovalidators.data_prep.tone.config import BUNDLED_ROOT
    from autovalidators.inference.text import split_sentences

    def sentences(texts):
        return {s.text.strip().rstrip(".") for text in texts for s in split_sentences(text)}

    measured = sentences(row["text"] for row in read_jsonl(ORDINARY_ANSWERS))
    config = load_tone_config()
    trained = [r.text for name in ("instructions_en", "instructions_ru", "instructions2_en", "instructions2_ru")
               for r in read_source(name, config)[0]]
    dev_path = BUNDLED_ROOT / "samples" / "tone" / "assistant_instructions_dev_ru.jsonl"
    dev = [row["text"] for row in read_jsonl(dev_path)]
    assert len(trained) >= 1300 and len(dev) >= 150
    # Neither the training texts nor the dev-only genre set (what a candidate trained on them is selected
    # on) repeats a sentence of the measured answers, and the dev set repeats no training sentence.
    assert not sentences(trained) & measured
    assert not sentences(dev) & measured and not sentences(dev) & sentences(trained)
    # No source of the tone data reads the dev set.
    assert dev_path not in {path for name in config.sources for path in config.source_paths(name)}
