"""QA-relevance pair building on tiny fixtures in each source format."""

from __future__ import annotations

import json

import pytest

from autovalidators.data_prep.io import DataError, read_jsonl
from autovalidators.data_prep.qa_relevance import (
    Pair,
    QARelevancePrepareConfig,
    SquadSource,
    UserSource,
    build_pairs,
    deduplicate,
    prepare,
    read_squad,
    read_user_source,
)

WIKIQA_TRAIN = [
    ("how are glacier caves formed ?", "A glacier cave is a cave formed within the ice of a glacier .", 1),
    ("how are glacier caves formed ?", "The ice facade is approximately 60 m high", 0),
    ("who wrote hamlet ?", "Hamlet is a tragedy written by William Shakespeare .", 1),
    ("who wrote hamlet ?", "It is set in Denmark .", 0),
    ("what is a unanswered question ?", "Nothing here answers it .", 0),
    ("how tall is everest ?", "Everest is 8,849 metres tall .", 1),
]
WIKIQA_DEV = [("Q1", "What is the capital of France?", "Paris is the capital of France.", 1),
              ("Q1", "What is the capital of France?", "France is in Europe.", 0)]
SQUAD = {"data": [{"title": "t", "paragraphs": [{
    "context": "The Normans lived in Normandy. They came from Denmark, Iceland and Norway. "
               "Their leader was Rollo. The duchy lasted for centuries.",
    "qas": [
        {"id": "a", "question": "Where did the Normans come from?", "is_impossible": False,
         "answers": [{"text": "Denmark, Iceland and Norway", "answer_start": 46}]},
        {"id": "b", "question": "Who led the Vikings into Spain?", "is_impossible": True, "answers": [],
         "plausible_answers": [{"text": "Rollo", "answer_start": 93}]},
    ]}]}]}


@pytest.fixture
def sources(tmp_path):
    wikiqa = tmp_path / "wikiqa"
    wikiqa.mkdir()
    (wikiqa / "WikiQASent-train.txt").write_text("".join(f"{q}\t{s}\t{l}\n" for q, s, l in WIKIQA_TRAIN))
    header = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel\n"
    (wikiqa / "WikiQA-dev.tsv").write_text(header + "".join(
        f"{i}\t{q}\tD\tT\tS\t{s}\t{l}\n" for i, q, s, l in WIKIQA_DEV))
    qnli = tmp_path / "qnli.tsv"
    qnli.write_text("index\tquestion\tsentence\tlabel\n"
                    "0\tWhat is the capital of France?\tParis is the capital of France.\tentailment\n"
                    "1\tWhat came into force?\tThe new constitution came into force.\tentailment\n"
                    "2\tWhat came into force?\tThe weather was mild.\tnot_entailment\n")
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(SQUAD))
    return tmp_path, wikiqa, qnli, squad


def config_for(tmp_path, wikiqa, qnli, squad, **overrides) -> QARelevancePrepareConfig:
    settings = dict(wikiqa_dir=str(wikiqa), qnli_path=str(qnli),
                    squad_sources=[SquadSource(name="squad", path=str(squad), language="en")],
                    fractions={"train": 0.5, "dev": 0.25, "test": 0.25}, output_dir=str(tmp_path / "out"))
    settings.update(overrides)
    return QARelevancePrepareConfig(**settings)




def test_squad_pairs(sources):
    import random

    _, _, _, squad = sources
    pairs = read_squad(SquadSource(name="s", path=str(squad), language="en"), hard_negatives=5, rng=random.Random(0))
    answered = [p for p in pairs if p.qid == "a"]
    assert [p.answer for p in answered if p.label == 1] == ["They came from Denmark, Iceland and Norway."]
    assert {p.answer for p in answered if p.label == 0} == {
        "The Normans lived in Normandy.", "Their leader was Rollo.", "The duchy lasted for centuries."}
    impossible = [p for p in pairs if p.qid == "b"]
    assert [(p.answer, p.label) for p in impossible] == [("Their leader was Rollo.", 0)]


def test_splits_are_by_question_and_benchmark_questions_never_train(sources):
    tmp_path, wikiqa, qnli, squad = sources
    splits, stats = build_pairs(config_for(tmp_path, wikiqa, qnli, squad, wikiqa_only_answered=True))
    groups = {name: {p.group for p in rows} for name, rows in splits.items() if name != "wikiqa_dev"}
    assert not (groups["train"] & groups["dev"]) and not (groups["train"] & groups["test"])
    assert not (groups["dev"] & groups["test"])
    # The QNLI copy of the WikiQA dev question was removed from training data.
    assert stats["benchmark_leaks_removed"] == 1
    assert all("capital of france" not in g for name in ("train", "dev", "test") for g in groups[name])
    assert len(splits["wikiqa_dev"]) == 2 and splits["wikiqa_dev"][0].qid == "Q1"
    # The WikiQA question without any correct sentence was dropped.
    assert all("unanswered" not in p.question for rows in splits.values() for p in rows)


def test_prepare_writes_splits_and_data_card(sources):
    tmp_path, wikiqa, qnli, squad = sources
    card = prepare(config_for(tmp_path, wikiqa, qnli, squad))
    out = tmp_path / "out"
    assert {"train.jsonl", "dev.jsonl", "test.jsonl", "wikiqa_dev.jsonl", "data_card.json", "DATA_CARD.md"} <= {
        p.name for p in out.iterdir()}
    rows = list(read_jsonl(out / "train.jsonl"))
    assert {"question", "answer", "label", "source", "group", "language"} <= set(rows[0])
    assert card["splits"]["train"]["rows"] == len(rows)


def test_deduplicate_keeps_first_and_counts_conflicts():
    pairs = [Pair("Who?", "Him .", 1, "a", "who?", "en"), Pair("who?", "him.", 0, "b", "who?", "en"),
             Pair("who?", "Her.", 0, "a", "who?", "en")]
    kept, duplicates, conflicts = deduplicate(pairs)
    assert [p.answer for p in kept] == ["Him .", "Her."] and duplicates == 1 and conflicts == 1


def test_user_csv_with_column_mapping_and_bad_rows_reported(tmp_path):
    path = tmp_path / "chats.csv"
    path.write_text("user_msg,bot_reply,ok\n"
                    "How do I reset my password?,Click 'Forgot password' on the login page.,1\n"
                    "Where is my order?,Our office is closed on Sundays.,maybe\n"
                    "Can I pay by card?,\"Yes, we accept all major cards.\",true\n")
    source = UserSource(name="chats", path=str(path), format="csv", question="user_msg", answer="bot_reply", label="ok")
    pairs, errors = read_user_source(source)
    assert [(p.question, p.label) for p in pairs] == [("How do I reset my password?", 1), ("Can I pay by card?", 1)]
    assert len(errors) == 1 and f"{path}:3" in errors[0] and "'ok'" in errors[0]


def test_user_jsonl_missing_column_names_line_and_mapping(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"q": "a?", "a": "b", "y": 1}\n{"q": "c?", "y": 0}\n')
    pairs, errors = read_user_source(UserSource(name="u", path=str(path), question="q", answer="a", label="y"))
    assert len(pairs) == 1
    assert f"{path}:2" in errors[0] and "answer='a'" in errors[0]


def test_bad_public_files_raise_and_bad_user_lines_are_skipped_and_named(sources, tmp_path):
    _, wikiqa, _, _ = sources
    (wikiqa / "WikiQASent-train.txt").write_text("only a question\n")
    with pytest.raises(DataError, match="WikiQASent-train.txt:1"):
        build_pairs(config_for(tmp_path, wikiqa, None, tmp_path / "none.json", squad_sources=[]))
    # A user file's bad lines are reported and skipped, never fatal: the rest is read.
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{not json\n[1, 2]\n{"question": "q?", "answer": "\xff"}\n'
                    b'{"question": "Who?", "answer": "Him.", "label": 1}\n')
    pairs, errors = read_user_source(UserSource(name="u", path=str(bad)))
    assert [(p.question, p.label) for p in pairs] == [("Who?", 1)]
    assert [e.split(": ", 1)[0] for e in errors] == [f"{bad}:1", f"{bad}:2", f"{bad}:3"]
    assert "malformed JSON" in errors[0] and "expected a JSON object" in errors[1] and "invalid UTF-8" in errors[2]
