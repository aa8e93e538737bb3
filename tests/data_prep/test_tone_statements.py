"""Identity statements: hateful claims and neutral sentences about the same groups, split so that
a test statement always holds a wording or a group training never saw."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from autovalidators.data_prep.io import DataError
from autovalidators.data_prep.tone.statements import DEFAULT_PATH, load_statements, statement_records
from autovalidators.training.tasks.tone import TONE_LABELS


@pytest.fixture(scope="module")
def records():
    return statement_records(DEFAULT_PATH, TONE_LABELS)


def test_hateful_statements_are_toxic_identity_hate_and_neutral_ones_negative_for_every_abusive_label(records):
    by_text = {r["text"]: r["labels"] for r in records}
    hateful = by_text["Jews secretly control the banks and the media."]
    assert (hateful["toxicity"], hateful["identity_hate"]) == (1, 1)
    assert hateful["insult"] is None and hateful["politics"] is None  # the file says nothing about them
    assert by_text["Hitler became chancellor in 1933."] == {
        "toxicity": 0, "obscenity": 0, "insult": 0, "threat": 0, "identity_hate": 0, "politics": None}


def test_a_statement_is_in_the_later_split_of_its_group_and_its_wording(records):
    parsed = load_statements(DEFAULT_PATH)
    split_of = {r["text"]: r["split"] for r in records}
    # A training wording about a held-out group is a test statement, and so is a held-out wording
    # about a training group: neither ever trains.
    assert split_of["Hindus are subhuman."] == "test"
    assert split_of["Jews cannot be trusted, it is in their blood."] == "test"
    assert split_of["Jews are subhuman."] == "train"
    train_texts = {r["text"] for r in records if r["split"] == "train"}
    for group in parsed.groups["en"]["test"]:
        assert not any(group in text for text in train_texts)
    counts = Counter((r["language"], r["row"].split(":")[0], r["split"]) for r in records)
    for language in ("en", "ru"):
        for kind in ("hateful", "neutral"):
            assert all(counts[(language, kind, split)] > 0 for split in ("train", "dev", "test"))


def test_a_template_without_its_slot_or_an_unknown_split_is_named(tmp_path):
    raw = yaml.safe_load(DEFAULT_PATH.read_text(encoding="utf-8"))
    raw["hateful"]["en"]["train"].append("They are bad.")
    path = tmp_path / "statements.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(DataError, match=r"statements.yaml: hateful.en.train: 'They are bad.' has no \{group\} slot"):
        load_statements(path)
    raw = yaml.safe_load(DEFAULT_PATH.read_text(encoding="utf-8"))
    raw["groups"]["ru"]["holdout"] = ["x"]
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(DataError, match=r"groups.ru: split\(s\) \['holdout'\]"):
        load_statements(path)
