"""Reading a structured context (a JSON or Python-literal record) the way its answer restates it.

Data-to-text answers ("The restaurant does not take reservations", "open seven days a week")
restate a record's yes/no attributes and opening hours in words the lexical support cannot check:
an attribute the record sets to false shares every word with the answer that wrongly claims it
("It offers outdoor seating" against `"OutdoorSeating": false`), and a faithful "does not take
reservations" reads as a negation the context never writes. Most of RAGTruth's data-to-text
hallucinations are of these two kinds. `record_checks` reads one answer sentence against the record:

- **attributes**: a leaf whose value is true, false or null (or "yes"/"no"), named by its key's
  words ("OutdoorSeating" -> outdoor seating; a nested leaf also needs its parent named:
  "BusinessParking.street" is a claim about parking, not an address). Claiming a false or null
  attribute, or denying a true one, is a conflict; restating it with the record's polarity explains
  the sentence's negation.
- **hours**: a record's `hours` mapping of weekday -> "9:0-14:0". "Every day", "seven days a week"
  or a day range that takes in a closed day is a conflict; so is a clock time stated for days
  whose hours do not include it ("open 8 am to 2 pm Monday to Friday" when Tuesday opens at 16:30).
  Stating every day when the record has all seven makes its "seven" a supported number.

- **framing**: words with which an answer talks about the record and its reviews rather than about
  the place ("customers praised", "located in", "overall") and the state a `state` code stands for
  ("CA": California) are supported in every sentence (`RECORD_FRAMING_WORDS`, `US_STATES`).

Nothing here applies to prose contexts: `parse_record` returns None unless the whole context is one
record, and then every check is empty.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import lru_cache

from .text import NEGATIONS, Token, clock_times, tokenize

# Key words that name no attribute of their own ("RestaurantsTakeOut" is about take-out).
GENERIC_KEY_WORDS = frozenset({"restaurants", "restaurant", "business", "good", "for", "attributes"})
# What answers call a parent record instead of its key ("Ambience" -> "the atmosphere is casual").
PARENT_ALIASES = {
    "ambience": {"ambience", "ambiance", "atmosphere", "vibe", "decor", "setting", "feel", "environment",
                 "described"},
    "parking": {"parking", "park"},
}
FALSE_STRINGS = frozenset({"no", "none", "false", "u'no'", "u'none'", "'no'", "'none'"})
TRUE_STRINGS = frozenset({"yes", "true"})
# Words that deny an attribute beyond the general negations ("outdoor seating is unavailable").
EXTRA_NEGATIONS = frozenset({"lack", "lacks", "lacking", "unavailable", "closed", "nor"})
# An attribute's claim ends at a contrast ("It provides takeout, though it does not accept
# reservations"), not at a comma: "does not offer WiFi, reservations or music" denies all three.
_CLAIM_CUT = re.compile(r";|\b(?:but|though|although|however|while|whereas)\b"
                        r"|,(?=\s+(?:it|they|there|this|the \w+) (?:does|do|is|are|has|have|offers?|provides?)\b)",
                        re.IGNORECASE)
# A schedule ends at a comma too, and at "and" before another one ("9 am to 5 pm on weekdays and from
# 10 am on Saturdays").
_SCHEDULE_CUT = re.compile(_CLAIM_CUT.pattern + r"|,|\band\b(?=\s+(?:from|on|until|opens?|closes?|closing|between|at|extend\w*)\b)",
                           re.IGNORECASE)
# An answer that says the record leaves something out claims nothing about it.
_UNSTATED = re.compile(r"\b(?:not|never) (?:specified|mentioned|stated|listed|included|indicated|provided|given)\b"
                       r"|\bno (?:information|mention|data|details)\b"
                       r"|\b(?:does|do)(?:n't| not) (?:include|mention|specify|say|state|list|indicate)\b", re.IGNORECASE)
_STARS_KEY = re.compile(r"""["'][\w ]*stars["']\s*:""", re.IGNORECASE)
_OUT_OF_FIVE = re.compile(r"\bout of (?:5|five)(?:\.0)?\b|\b(?:5|five)[- ]star\b", re.IGNORECASE)
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_DAY_RANGE = re.compile(rf"\b{_DAY}\s*(?:to|through|thru|till|until|-|–)\s*{_DAY}\b", re.IGNORECASE)
_ONE_DAY = re.compile(rf"\b{_DAY}\b", re.IGNORECASE)
_GROUP_DAYS = {"weekdays": DAYS[:5], "weekends": DAYS[5:], "weekend": DAYS[5:]}
_GROUP = re.compile(r"\b(weekdays|weekends?)\b", re.IGNORECASE)
# Lower-case "daily" only: "Our Daily Bread" is a name.
_EVERY_DAY = re.compile(r"\b(?:[Ee]very ?day|daily|[Ss]even days|7 days|all week|[Ee]ach day|whole week)\b")
# How an answer says an attribute holds ("take-out is available", "it accepts reservations"): in a
# clause that restates an attribute as the record has it, these words are supported too.
AVAILABILITY_WORDS = ("available offers offer provides provide accepts accept takes take features allows allow "
                      "serves serve options option services service welcome accommodates caters includes")
MAX_RECORD_CHARS = 200_000  # the gate's own cap on a text; a longer context is not parsed
# How an answer talks about a record and its reviews rather than about the place: who wrote the
# reviews, what they did with words, the verbs that introduce what the record lists, and the glue
# of a description. No claim rides on these words, and the claim beside them (a number, a name, an
# attribute, a dish) is still checked. On RAGTruth's dev data-to-text answers these were the most
# frequent of the words the lexical support could not find, and its annotators almost never marked
# them as hallucinated.
RECORD_FRAMING_WORDS = ("customers customer reviewers reviewer reviews review patrons visitors guests diners users "
                        "mention mentioned mentions note noted notes praise praised praises describe described "
                        "express expressed report reported highlight highlighted appreciate appreciated comment "
                        "commented say said says state stated rated rating ratings receive received overall "
                        "however additionally another other others despite particular particularly located "
                        "situated based offers offer provides provide features serves includes include including "
                        "data information overview structured objective business establishment experience experiences")
# Two-letter US state codes as records write them ("state": "CA"); the answer names the state.
US_STATES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California", "CO": "Colorado",
    "CT": "Connecticut", "DE": "Delaware", "DC": "District of Columbia", "FL": "Florida", "GA": "Georgia",
    "HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas",
    "KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts", "MI": "Michigan",
    "MN": "Minnesota", "MS": "Mississippi", "MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada",
    "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico", "NY": "New York", "NC": "North Carolina",
    "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma", "OR": "Oregon", "PA": "Pennsylvania",
    "RI": "Rhode Island", "SC": "South Carolina", "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas",
    "UT": "Utah", "VT": "Vermont", "VA": "Virginia", "WA": "Washington", "WV": "West Virginia",
    "WI": "Wisconsin", "WY": "Wyoming",
}


@dataclass(frozen=True)
class Attribute:
    path: tuple[str, ...]          # the key path, as written ("attributes", "BusinessParking", "street")
    words: tuple[str, ...]         # stems that name the leaf ("street",); all must appear
    joined: str                    # the leaf's words run together ("takeout"), as answers also write them
    parent_words: frozenset[str]   # stems one of which must appear for a nested leaf; empty at top level
    value: bool | None


@dataclass(frozen=True)
class Record:
    attributes: tuple[Attribute, ...]
    hours: dict[str, frozenset[str]]  # open day -> its "HH:MM" times; empty when the record has none
    closed_days: frozenset[str]       # weekdays the hours leave out (none when there are no hours)
    list_words: frozenset[str]        # stems that may run between an attribute and its copula (`_is_denied`)
    # Stems every sentence may use against this record: RECORD_FRAMING_WORDS and the names of the
    # states its `state` codes stand for.
    framing: frozenset[str] = frozenset()
    # The record rates on stars ("business_stars": 3.5): "3.5 out of 5 stars" restates it, and the
    # scale's 5 is no number the record needs to hold.
    star_scale: bool = False


@dataclass(frozen=True)
class RecordCheck:
    conflicts: tuple[str, ...] = ()   # what the sentence gets wrong, in words ("claims Ambience.casual (false)")
    explains_negation: bool = False   # the sentence's negation restates a false attribute or a closed day
    supported_stems: frozenset[str] = frozenset()  # words of attributes restated as the record has them
    # Numbers the record states in other words: "seven" days a week against a record open all seven.
    explained_numbers: frozenset[str] = frozenset()


def parse_record(context: str) -> Record | None:
    """The context as one record, or None when it is prose (or unreadable)."""
    # Checked before stripping: a prose context costs a regex match, not a copy and a hash of it.
    if len(context) > MAX_RECORD_CHARS or not _OPENS_RECORD.match(context):
        return None
    return _parse_record(context.strip())


@lru_cache(maxsize=64)
def _parse_record(stripped: str) -> Record | None:
    try:
        data = json.loads(stripped)
    except ValueError:
        try:
            data = ast.literal_eval(stripped)  # Python's repr of a dict: 'name': 'x', True, None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(data, dict):
        return None
    attributes: list[Attribute] = []
    _collect(data, (), attributes)
    hours = _hours(data.get("hours"))
    listed = {w for a in attributes for w in (*a.words, *a.parent_words)} | _LIST_GLUE
    states = {t.stem for code in _state_codes(data) for t in tokenize(US_STATES[code])}
    return Record(tuple(attributes), hours, frozenset(DAYS) - set(hours) if hours else frozenset(), frozenset(listed),
                  _FRAMING | states, bool(_STARS_KEY.search(stripped)))


def _state_codes(node: dict) -> set[str]:
    """The US state codes of a record's `state` leaves, at any depth."""
    codes = set()
    for key, value in node.items():
        if isinstance(value, dict):
            codes |= _state_codes(value)
        elif str(key).lower() == "state" and isinstance(value, str) and value.strip().upper() in US_STATES:
            codes.add(value.strip().upper())
    return codes


def _key_words(key: str) -> list[tuple[str, str]]:
    """(lower-case word, stem) of a key's words that name something ("RestaurantsTakeOut" -> take, out)."""
    return [(t.text, t.stem) for t in tokenize(key.replace("_", " "))
            if not t.is_number and t.text not in GENERIC_KEY_WORDS]


def _collect(node: dict, path: tuple[str, ...], out: list[Attribute]) -> None:
    for key, value in node.items():
        key = str(key)
        if isinstance(value, dict):
            _collect(value, path + (key,), out)
            continue
        if key.lower() == "hours":
            continue  # opening hours are read as a schedule (`_hours`), a null one says nothing
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in FALSE_STRINGS | TRUE_STRINGS:
                continue  # "WiFi": "free" is a value to restate, not a yes or no
            value = lowered in TRUE_STRINGS
        if value is not None and not isinstance(value, bool):
            continue
        words = _key_words(key)
        if not words:
            continue
        parents: set[str] = set()
        for text, stem in (_key_words(path[-1]) if path else []):
            parents.add(stem)
            parents |= {t.stem for alias in PARENT_ALIASES.get(text, ()) for t in tokenize(alias)}
        out.append(Attribute(path + (key,), tuple(stem for _, stem in words), "".join(text for text, _ in words),
                             frozenset(parents), value))


def _hours(hours) -> dict[str, frozenset[str]]:
    if not isinstance(hours, dict):
        return {}
    result = {}
    for day, span in hours.items():
        if str(day).lower() in DAYS and isinstance(span, str):
            result[str(day).lower()] = frozenset(clock_times(span))  # "16:30-21:0" -> 16:30, 21:00
    return result


_AVAILABILITY = frozenset(t.stem for t in tokenize(AVAILABILITY_WORDS))
_FRAMING = frozenset(t.stem for t in tokenize(RECORD_FRAMING_WORDS))
_DENIALS = NEGATIONS | EXTRA_NEGATIONS
_LIST_GLUE = frozenset(t.stem for t in tokenize("and or services service options option"))
_COPULA = frozenset("is are was were be been being also currently still".split())
# Denials whose scope is only what follows: "casual without being trendy" affirms casual.
_FORWARD_ONLY = frozenset({"without"})
_RATHER_THAN = re.compile(r"\b(rather than|instead of)\b", re.IGNORECASE)  # read as "without"
_OPENS_RECORD = re.compile(r"\s*\{")


def _clauses(sentence: str, cut: re.Pattern) -> list[str]:
    return [c for c in cut.split(sentence) if c and c.strip()]


def _mention(attribute: Attribute, tokens: list[Token], stems: set[str]) -> tuple[int, int] | None:
    """(first, last) token index of the attribute's name in the clause, or None when it is not named."""
    if attribute.parent_words and not attribute.parent_words & stems:
        return None
    for i, token in enumerate(tokens):
        if token.text.replace("-", "") == attribute.joined or (
                i + 1 < len(tokens) and token.text + tokens[i + 1].text == attribute.joined):
            return i, i + (token.text.replace("-", "") != attribute.joined)
    if all(w in stems for w in attribute.words):
        at = [i for i, t in enumerate(tokens) if t.stem in attribute.words]
        return min(at), max(at)
    return None


def _is_denied(tokens: list[Token], first: int, last: int, listed: frozenset[str]) -> bool:
    """Negation in scope of a mention: before it in the clause ("does not offer WiFi, reservations
    or music"), or right after it past a copula ("outdoor seating is not available") and the rest of
    a list of attributes ("garage, street and valet parking are not available"): `listed`."""
    if any(t.text in _DENIALS for t in tokens[:first]):
        return True
    for token in tokens[last + 1:]:
        if token.text in _DENIALS and token.text not in _FORWARD_ONLY:
            return True
        if token.text not in _COPULA and token.stem not in listed:
            return False
    return False


def _days_claimed(clause: str) -> set[str]:
    days: set[str] = set()
    for match in _DAY_RANGE.finditer(clause):
        first, last = DAYS.index(match.group(1).lower()), DAYS.index(match.group(2).lower())
        span = range(first, last + 1) if first <= last else [*range(first, 7), *range(0, last + 1)]
        days |= {DAYS[i] for i in span}
    days |= {m.group(1).lower() for m in _ONE_DAY.finditer(clause)}
    for match in _GROUP.finditer(clause):
        days |= set(_GROUP_DAYS[match.group(1).lower()])
    return days


def record_checks(sentence: str, record: Record | None) -> RecordCheck:
    """What the sentence claims about the record that the record contradicts, or explains."""
    if record is None:
        return RecordCheck()
    if _UNSTATED.search(sentence):
        # "WiFi and reservations are not specified"
        return RecordCheck(explains_negation=True, supported_stems=record.framing)
    conflicts: list[str] = []
    supported: set[str] = set(record.framing)
    numbers: set[str] = set()
    explains_negation = False
    for clause in _clauses(sentence, _CLAIM_CUT):
        tokens = tokenize(_RATHER_THAN.sub(" without ", clause))
        stems = {t.stem for t in tokens}
        for attribute in record.attributes:
            mention = _mention(attribute, tokens, stems)
            if mention is None:
                continue
            denied = _is_denied(tokens, *mention, record.list_words)
            name = ".".join(attribute.path[-2:])
            if attribute.value is True and denied:
                conflicts.append(f"denies {name} (true)")
            elif attribute.value is not True and not denied:
                conflicts.append(f"claims {name} ({'null' if attribute.value is None else 'false'})")
            else:
                explains_negation = explains_negation or denied
                # "take-out is available", "the atmosphere is casual": the restatement's own words.
                supported |= _AVAILABILITY | set(attribute.words) | (attribute.parent_words & stems)
                supported |= {t.stem for t in tokens if t.text in _DENIALS}
                supported |= {t.stem for t in tokens[mention[0]:mention[1] + 1]}
    if record.star_scale and _OUT_OF_FIVE.search(sentence):
        numbers.add("5")
    for clause in _clauses(sentence, _SCHEDULE_CUT) if record.hours else []:
        words = {t.text for t in tokenize(clause)}
        negated = bool(_DENIALS & words)
        conflicts += _hours_conflicts(clause, negated, record)
        if negated and record.closed_days & _days_claimed(clause):
            explains_negation = True
        if not record.closed_days and _EVERY_DAY.search(clause):
            numbers.add("7")  # "seven days a week", as number words are read ("seven" -> 7)
    return RecordCheck(tuple(dict.fromkeys(conflicts)), explains_negation, frozenset(supported), frozenset(numbers))


def _hours_conflicts(clause: str, negated: bool, record: Record) -> list[str]:
    if negated:
        return []  # "closed on Mondays" is a claim about closed days, checked above as an explanation
    hours, closed = record.hours, record.closed_days
    days = set(DAYS) if _EVERY_DAY.search(clause) else _days_claimed(clause)
    conflicts = [f"open on {day} (closed)" for day in DAYS if day in days & closed]
    times = clock_times(clause)
    open_days = days - closed
    if times and open_days:
        # A time stated for several days must be an opening or closing time of most of them: "5 pm to
        # 9 pm Monday through Sunday, until 10 pm on Fridays" states the rule, then its exceptions.
        conflicts += [f"{time} on {', '.join(sorted(open_days, key=DAYS.index))}" for time in sorted(times)
                      if 2 * sum(time in hours[day] for day in open_days) <= len(open_days)]
    return conflicts
