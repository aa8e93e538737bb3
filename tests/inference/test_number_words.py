"""Numbers spelt out in English and Russian are read as numbers, so they meet their digits."""

from __future__ import annotations

import pytest

from autovalidators.inference.heuristics import sentence_support
from autovalidators.inference.number_words import number_value
from autovalidators.inference.text import tokenize


@pytest.mark.parametrize("words, value", [
    (["five"], 5), (["twenty-five"], 25), (["two", "hundred", "fifty"], 250), (["one", "hundred"], 100),
    (["пять"], 5), (["двух"], 2), (["двадцать", "один"], 21), (["две", "тысячи", "двадцать", "пять"], 2025),
    (["триста"], 300), (["сорока"], 40),
])
def test_a_run_of_number_words_reads_as_its_value(words, value):
    assert number_value(words) == value


@pytest.mark.parametrize("words", [["one"], ["один"], ["одна"], ["hundred"], ["тысячи"], ["million"], ["house"],
                                   ["two", "houses"], []])
def test_words_that_claim_no_number_are_not_read_as_one(words):
    assert number_value(words) is None


def numbers(text: str) -> list[tuple[str, str, str]]:
    return [(t.text, t.stem, text[t.start:t.end]) for t in tokenize(text) if t.is_number]


def test_spelt_and_written_numbers_become_the_same_token():
    assert [stem for _, stem, _ in numbers("сроком пять лет")] == [stem for _, stem, _ in numbers("сроком 5 лет")] == ["5"]
    assert numbers("Twenty-five cats") == [("twenty-five", "25", "Twenty-five")]


def test_a_compound_is_one_token_whose_offsets_cover_it():
    text = "We sold two hundred and fifty units to двадцати пяти клиентам."
    assert numbers(text) == [("two hundred and fifty", "250", "two hundred and fifty"),
                             ("двадцати пяти", "25", "двадцати пяти")]


def test_pronoun_one_and_bare_scale_words_stay_ordinary_words():
    assert numbers("One of the reasons is that thousands of users and тысячи людей один из нас") == []
    one = next(t for t in tokenize("one of the reasons") if t.text == "one")
    assert one.is_stopword and not one.is_number


def test_a_number_swapped_in_words_is_an_unsupported_number():
    context = "На роутер X200 действует ограниченная гарантия сроком два года."
    swapped, = sentence_support("На роутер X200 действует гарантия сроком пять лет.", context)
    assert swapped.unsupported_numbers == ("пять",) and swapped.support <= 0.3
    restated, = sentence_support("На роутер X200 действует гарантия сроком 2 года.", context)
    assert restated.unsupported_numbers == () and restated.support > 0.6


@pytest.mark.parametrize("variants, stem", [
    (["1.5 million", "1,500,000", "1500000"], "1500000"),
    (["67 млн", "67 миллионов", "шестьдесят семь миллионов", "67000000"], "67000000"),
    (["3,5 тыс", "3500"], "3500"),
])
def test_one_number_written_several_ways_is_one_stem(variants, stem):
    assert [[s for _, s, _ in numbers(v)] for v in variants] == [[stem]] * len(variants)


def test_a_number_with_its_scale_word_is_one_token_and_a_bare_number_stays_itself():
    assert numbers("В 2020 году там жили 67 млн человек.") == [("2020", "2020", "2020"), ("67 млн", "67000000", "67 млн")]


def test_a_rescaled_number_is_supported_by_its_other_spelling():
    supported, = sentence_support("The city has 1.5 million residents.", "About 1,500,000 residents live in the city.")
    assert supported.unsupported_numbers == ()
    wrong, = sentence_support("The city has 2.5 million residents.", "About 1,500,000 residents live in the city.")
    assert wrong.unsupported_numbers == ("2.5 million",)


def test_adversarial_runs_are_left_as_words_instead_of_building_huge_integers():
    # "hundred" x 3,000 would be 10**6000, past Python's int-to-str limit; a 6,000-digit number
    # times a million likewise. Both stay as they were written, and nothing is lost.
    words = tokenize("hundred " * 3000 + "five")
    assert len(words) == 3001 and not any(t.is_number and t.text.startswith("hundred") for t in words)
    huge = "1" * 6000
    assert [(t.stem, t.is_number) for t in tokenize(huge + " million")] == [(huge, True), ("million", False)]


HOURS = "{'hours': {'Monday': '17:30-23:0', 'Sunday': '9:0-14:0'}, 'stars': 4.0}"


@pytest.mark.parametrize("answer", [
    "On Sundays it is open from 9:00 am until 2:00 pm.", "On Sundays it is open from 9 a.m. to 2 p.m.",
    "On Mondays it opens at 5:30 PM and closes at 11 pm.", "On Mondays it is open from 17:30 to 23:00.",
    "It has a rating of 4 stars.",
])
def test_clock_times_and_ratings_restated_another_way_are_supported(answer):
    sentence, = sentence_support(answer, HOURS)
    assert sentence.unsupported_numbers == ()


@pytest.mark.parametrize("answer, invented", [
    ("On Sundays it is open from 10:00 am until 2:00 pm.", "10:00 am"),
    ("On Mondays it opens at 5 pm.", "5 pm"),  # 17:00, the context says 17:30
    ("It has a rating of 4.5 stars.", "4.5"),
])
def test_a_wrong_clock_time_or_rating_is_still_an_unsupported_number(answer, invented):
    sentence, = sentence_support(answer, HOURS)
    assert sentence.unsupported_numbers == (invented,) and sentence.support <= 0.3


def test_a_clock_time_is_one_token_covering_its_characters():
    text = "Open 9:00 am to 5 p.m. daily"
    assert numbers(text) == [("9:00 am", "09:00", "9:00 am"), ("5 p.m.", "17:00", "5 p.m.")]
