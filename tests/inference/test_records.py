"""Reading a structured context: attribute polarity and opening hours (inference/records.py)."""

import json

import pytest

from autovalidators.inference.heuristics import sentence_support
from autovalidators.inference.records import parse_record

RECORD = {
    "name": "Our Daily Bread", "address": "831 State St", "city": "Santa Barbara",
    "hours": {"Monday": "8:0-14:0", "Tuesday": "16:30-21:0", "Wednesday": "16:30-21:0", "Thursday": "16:30-21:0",
              "Friday": "16:30-21:0", "Saturday": "8:0-14:0"},
    "attributes": {"BusinessParking": {"garage": False, "street": False, "lot": True, "valet": False},
                   "RestaurantsReservations": False, "OutdoorSeating": True, "RestaurantsTakeOut": True,
                   "Music": None, "Ambience": {"casual": True, "trendy": False, "upscale": False}},
    "business_stars": 4.0,
}
CONTEXT = str(RECORD)  # RAGTruth writes its records as Python's repr: single quotes, True, None


def support(answer: str, context: str = CONTEXT):
    item, = sentence_support(answer, context)
    return item


@pytest.mark.parametrize("answer", [
    "It offers outdoor seating.", "Take-out is available.", "It does not take reservations.",
    "The atmosphere is casual.", "Parking is available in a lot.",
    "It has outdoor seating, though it does not accept reservations.",
    "It does not offer garage, street or valet parking.",
    "Garage, street and valet parking are not available.",
    "The atmosphere is casual rather than trendy or upscale.",
])
def test_an_attribute_restated_as_the_record_has_it_is_supported(answer):
    item = support(answer)
    assert item.record_conflicts == () and not item.negation_mismatch and item.support >= 0.6, item


@pytest.mark.parametrize("answer, conflict", [
    ("It takes reservations.", "claims attributes.RestaurantsReservations (false)"),
    ("The atmosphere is trendy.", "claims Ambience.trendy (false)"),
    ("Customers can enjoy live music.", "claims attributes.Music (null)"),
    ("Parking is available on the street.", "claims BusinessParking.street (false)"),
    ("There is no outdoor seating.", "denies attributes.OutdoorSeating (true)"),
])
def test_an_attribute_the_record_contradicts_caps_the_sentence(answer, conflict):
    item = support(answer)
    assert conflict in item.record_conflicts and item.support <= 0.3


def test_a_nested_attribute_needs_its_parent_named():
    # "street" is a claim about parking only next to parking; an address is not one.
    assert support("It is located at 831 State St in Santa Barbara.").record_conflicts == ()


def test_an_answer_that_says_the_record_leaves_a_field_out_claims_nothing():
    assert support("Whether it has music or WiFi is not specified.").record_conflicts == ()


@pytest.mark.parametrize("answer", [
    "It is open every day.", "It is open Monday to Sunday.", "It is open on Sundays.",
    "It is open from 8 am to 2 pm Monday to Friday.",  # Tuesday to Friday open at 16:30
])
def test_opening_hours_the_record_contradicts_are_conflicts(answer):
    assert support(answer).record_conflicts, answer


@pytest.mark.parametrize("answer", [
    "It is open from 4:30 pm to 9 pm Tuesday through Friday.",
    "It opens at 8 am on Mondays and Saturdays.",
    "It is closed on Sundays.",
    "Our Daily Bread is a bakery in Santa Barbara.",  # "Daily" is its name, not a schedule
])
def test_opening_hours_as_the_record_has_them_are_not(answer):
    assert support(answer).record_conflicts == (), answer


def test_a_rule_stated_with_its_exceptions_is_not_a_conflict():
    every_day = {**RECORD, "hours": {day: "17:0-21:0" for day in ("Monday", "Tuesday", "Wednesday", "Thursday",
                                                                   "Sunday")} | {"Friday": "17:0-22:0",
                                                                                 "Saturday": "17:0-22:0"}}
    answer = "It is open from 5 pm to 9 pm Monday through Sunday, and until 10 pm on Fridays and Saturdays."
    item = support(answer, str(every_day))
    assert item.record_conflicts == ()
    # Seven days is what the record says: "seven" is no invented number.
    assert support("It is open seven days a week.", str(every_day)).unsupported_numbers == ()
    assert support("It is open seven days a week.").record_conflicts


def test_json_records_read_as_python_ones():
    assert parse_record(json.dumps(RECORD)) == parse_record(CONTEXT)
    assert support("It takes reservations.", json.dumps(RECORD)).record_conflicts


@pytest.mark.parametrize("context", [
    "The cafe takes no reservations. It is open daily.", "{not a record", "[1, 2, 3]", "{'a': 1} trailing prose",
])
def test_prose_and_unreadable_contexts_get_no_record_checks(context):
    assert parse_record(context) is None
    assert support("It is open on Sundays and takes reservations.", context).record_conflicts == ()


WIFI_RECORD = str({**RECORD, "attributes": {**RECORD["attributes"], "WiFi": "free"}})


@pytest.mark.parametrize("answer", ["It offers free Wi-Fi and outdoor seating.",
                                    "It offers free wifi and takeout."])
def test_a_hyphenated_or_run_together_word_meets_the_records_camelcase_key(answer):
    # The record writes "WiFi" (read as "wi" "fi") and "RestaurantsTakeOut"; answers write
    # "Wi-Fi", "wifi", "takeout". Every word of these sentences is the record's.
    assert support(answer, WIFI_RECORD).support == 1.0


def test_the_parts_of_a_hyphenated_context_word_do_not_support_a_word_alone():
    context = "The well-known bakery opened a take-out counter."
    assert support("The bakery opened a takeout counter.", context).support == 1.0
    assert support("The bakery is known for its takeout counter.", context).support < 1.0


@pytest.mark.parametrize("answer, supported", [
    ("The business has a rating of 4 out of 5 stars.", True),
    ("It is rated 4.0 out of five.", True),
    ("It has a rating of 4.5 out of 5 stars.", False),   # the record's rating is 4.0
])
def test_a_star_rating_on_its_five_star_scale(answer, supported):
    item = support(answer)
    assert (item.unsupported_numbers == ()) is supported, item.unsupported_numbers
    assert "5" not in item.unsupported_numbers  # the scale is no claim


def test_a_five_the_record_has_no_scale_for_is_still_checked():
    prose = "The bakery sells bread and rolls; reviewers rate it highly."
    assert "5" in support("Reviewers give it 4 out of 5.", prose).unsupported_numbers
