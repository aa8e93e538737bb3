"""Lexicon labeller: en/ru word lists with leetspeak, masking, stretching and transliteration."""

from __future__ import annotations

import importlib.util

import pytest

from autovalidators.data_prep.tone.config import LexiconSettings, load_tone_config
from autovalidators.data_prep.tone.lexicon import LexiconLabeller

LABELS = ["toxicity", "obscenity", "insult", "threat", "identity_hate", "politics"]
needs_en_list = pytest.mark.skipif(importlib.util.find_spec("better_profanity") is None,
                                   reason="better-profanity (train/dev extra) not installed")


@pytest.fixture(scope="module")
def lexicon():
    """The shipped settings, exclusions included."""
    return LexiconLabeller(load_tone_config().lexicon, LABELS)


@pytest.fixture(scope="module")
def builtin_only():
    """No package word lists: the built-in regex lexicon must still do the basics."""
    return LexiconLabeller(LexiconSettings(en_wordlist="none", ru_wordlist="none"), LABELS)


def _obscene(labeller, text):
    votes, _ = labeller.label([text])[0]
    return votes["obscenity"]


@needs_en_list
@pytest.mark.parametrize("text", ["what the f*ck is this", "this is sh1t", "total $hit", "fuuuuuck that",
                                  "kiss my @ss", "MOTHERF*CKER", "f#ck off"])
def test_english_leetspeak_masking_and_stretching(lexicon, text):
    assert _obscene(lexicon, text) == 1


@pytest.mark.parametrize("text", ["this is sh1t", "blyat, the server is down again", "ну ты и сука",
                                  "бляяяять, опять", "пиздец какой-то"])
def test_builtin_lexicon_works_without_package_lists(builtin_only, text):
    assert _obscene(builtin_only, text) == 1


@pytest.mark.parametrize("text", ["I love my class", "please assess this document", "Scunthorpe United won",
                                  "nah man, no thanks", "the ship's cockpit", "@USER @USER hello there",
                                  "из них было много", "a wonderful gown", "scan the document",
                                  "it sucks to wait", "oh my god"])
def test_innocent_words_and_exclusions_stay_negative(lexicon, text):
    assert _obscene(lexicon, text) == 0


def test_transliterated_russian_is_caught_in_russian_text_only(lexicon):
    votes, details = lexicon.label(["ну и pizdec, ребята"])[0]
    assert votes["obscenity"] == 1
    # Transliterating English words wholesale would make "gown" look like "говн".
    assert _obscene(lexicon, "she wore a gown and went to the nehru centre") == 0


def test_mixed_script_lookalikes(lexicon):
    assert _obscene(lexicon, "какая-то xуйня") == 1  # Latin x inside a Cyrillic word


def test_toxicity_is_positive_only_and_provenance_names_the_match(lexicon):
    (toxic, toxic_details), (clean, _) = lexicon.label(["you are a f*cking idiot", "have a nice day"])
    assert toxic["toxicity"] == 1 and toxic["obscenity"] == 1
    assert "f*cking" in toxic_details["obscenity"] and toxic_details["obscenity"].startswith("lexicon-1")
    # A miss is evidence against obscenity, but plenty of toxic text uses no listed word.
    assert clean["obscenity"] == 0 and clean["toxicity"] is None
    # Labels the lexicon is not configured for are not voted on at all.
    assert "politics" not in toxic and "insult" not in toxic


def test_insult_words_count_for_toxicity_not_obscenity(builtin_only):
    votes, _ = builtin_only.label(["you are an idiot"])[0]
    assert votes == {"toxicity": 1, "obscenity": 0}
