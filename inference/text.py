"""Language-aware text primitives shared by the heuristics: tokens, stems, sentences (en and ru).

Tokens keep digits and Cyrillic: "67 million" and "69 million" are different claims, and two
identical Russian texts must come out identical. Numbers spelt out ("five", "двадцать пять") become
one number token with the value as its stem, so they meet their digits (`number_words`).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from .number_words import SCALE_WORDS, is_number_word, number_value, scaled

# A number keeps its inner separators ("1,000", "3.5", "2027"); a word is any run of letters/digits.
WRITTEN_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Invisible format characters that web pages leave inside words: soft hyphen, zero-width space,
# non-joiner and joiner, word joiner, zero-width no-break space (BOM). Like an accent, they stay
# inside their word and are dropped from its text; they used to cut "инфор\u00adмация" in two.
_INVISIBLE = "\u00ad\u200b-\u200d\u2060\ufeff"
# Stress and other combining accents ("Сраже́ние", common in Russian encyclopaedias) stay inside
# their word and are dropped from its text; they used to split it in two, so it matched nothing.
_ACCENTS = "\u0300-\u036f"
_LETTERS = rf"(?:[^\W\d_][{_ACCENTS}{_INVISIBLE}]*)+"
# Thousands set apart by a space, as Russian and SI typography write them ("1 350 000", "11 164 мм",
# often with a no-break or thin space): one number, the same as "1350000" and "1,350,000". Each group
# after the first has three digits, and the first at most three, so "в 1941 году 12 танков" and
# "1941 200" stay two numbers.
_NUMBER_SPACES = " \u00a0\u2009\u202f"
_NUMBER_SPACE = re.compile(f"[{_NUMBER_SPACES}]")
GROUPED_NUMBER = re.compile(rf"(?<![\d.,])\d{{1,3}}(?:[{_NUMBER_SPACES}]\d{{3}})+(?:,\d+)?(?!\d)")
_TOKEN = re.compile(GROUPED_NUMBER.pattern + "|" + WRITTEN_NUMBER.pattern + rf"|{_LETTERS}(?:['’-]{_LETTERS})*|\d+",
                    re.UNICODE)
_ACCENT = re.compile(f"[{_ACCENTS}{_INVISIBLE}]")
# What is not spelling, once a text is composed (NFC): the two stress marks (acute, grave) left on a
# letter with no code point of its own ("а́"; "é" has one and keeps its accent) and the invisible
# characters above.
NOT_SPELLING = f"[\u0300\u0301{_INVISIBLE}]"
_NOT_SPELLING = re.compile(NOT_SPELLING)


def plain_spelling(text: str) -> str:
    """`text` composed (NFC), without stress marks and invisible characters: "Хуа́н" -> "Хуан",
    "инфор\u00adмация" -> "информация", a decomposed "й" -> "й"; "café" unchanged."""
    return _NOT_SPELLING.sub("", unicodedata.normalize("NFC", text))


# A clock time is one number, read on a 24-hour clock: "17:0" (a structured context's hours),
# "5:00 PM", "5 p.m." and "17:00" are all 17:00. Read as digits they were "5" and "00", which the
# context's "17" and "0" never met, so every correctly restated opening hour looked invented.
_HALF_DAY = r"\s?([ap])(?:\.\s?m\.|m\b)"  # "pm", "p.m." (a bare "pm." is "pm" and a full stop)
_CLOCK = re.compile(rf"\b(\d{{1,2}}):(\d{{1,2}})\b(?:{_HALF_DAY})?|\b(\d{{1,2}}){_HALF_DAY}", re.IGNORECASE)
# Inside a word: a lower-case letter followed by an upper-case one that starts a lower-case run.
_CAMEL_CUT = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
# Sentence ends: . ! ? … followed by space and an upper-case letter, digit or quote; or a newline.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"«(\[]?[A-ZА-ЯЁ0-9])|\n+")
# A full stop that is not the end of a sentence although a capital follows it: an initial ("J. R. R.
# Tolkien", "А. С. Пушкин"), a title before a name ("Dr. Smith", "г. Москва") or a Latin "e.g.". Split
# there, an answer's "Dr." or "С." was a sentence of its own, so its name's sentence lost its subject
# and the fragment was judged (and tone-scored) alone. "U.S." and "etc." still end a sentence when a
# capital follows, as often as not they do.
_WORD_BEFORE_STOP = re.compile(r"(?:^|(?<=[\s(«\"\[]))([^\W\d_]+(?:\.[^\W\d_]+)*)\.$")
_TITLES = frozenset("""mr mrs ms dr prof st jr sr mt gen col lt sgt capt rev gov sen rep pres hon messrs mme
    e.g i.e cf viz approx jan feb aug sept oct nov dec
    им ул пр просп проф акад св ген оз пос т.е т.к т.н т.о""".split())
# Before a number only: "No. 5", "Fig. 2", "ст. 15", a life's dates ("b. 1815", "c. 1500",
# "род. 1959", "ум. 1662"); "No. The capital is Paris." is two sentences.
_BEFORE_NUMBER = frozenset("no nos vol fig pp p ch art b d c ст ч п рис гл род ум mar apr jun jul sep".split())
# A numbered list item's marker ("1. ", "2) ", "Step 3: ", "Шаг 3."), at the start of a line or after a
# sentence: the item is one sentence after it, and the marker is no claim. Split at its full stop,
# "1." was a sentence of its own and "5." a number the context never gives, so item five of a good
# recipe read as invented.
_LIST_NUMBER = re.compile(r"(?<![\w.,])(?:(?:step|шаг)\s+)?\(?\d{1,2}[.)]\Z", re.IGNORECASE)
_LIST_MARKER = re.compile(r"(?:(?:step|шаг)\s+)?\(?\d{1,2}[.):]\s+(?=\S)", re.IGNORECASE)
# A month's or weekday's abbreviation ("Apr. 18", "Sat. & Sun.", "5 апр. 2015") reads as its full name, which
# is how contexts write them: read as a word of its own, "Apr" met nothing in "April 18 through April 26".
# Only capitalised (Russian: any case) and followed by a full stop that does not end a sentence, so "the Sun."
# and "He sat." keep their words.
_ABBREVIATED = {
    "jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june",
    "jul": "july", "aug": "august", "sep": "september", "sept": "september", "oct": "october",
    "nov": "november", "dec": "december", "mon": "monday", "tue": "tuesday", "tues": "tuesday",
    "wed": "wednesday", "thu": "thursday", "thur": "thursday", "thurs": "thursday", "fri": "friday",
    "sat": "saturday", "sun": "sunday",
    "янв": "январь", "фев": "февраль", "февр": "февраль", "апр": "апрель", "авг": "август",
    "сент": "сентябрь", "окт": "октябрь", "нояб": "ноябрь", "дек": "декабрь",
}
_ABBREVIATION_GOES_ON = re.compile(r"\.[ \t]*(?:[^\W_A-ZА-ЯЁ]|[&,;:(\-–])")

STOPWORDS_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves also may might must shall us one s t""".split()
)
STOPWORDS_RU = frozenset(
    """и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне
    было вот от меня еще о из ему теперь когда даже ну вдруг ли если уже или быть был него до вас
    нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их
    чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого
    какой совсем ним здесь этом один почти мой тем чтобы нее были куда зачем всех никогда можно при
    наконец два об другой хоть после над больше тот через эти нас про всего них какая много разве
    три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда
    конечно всю между это также является""".split()
)
NEGATIONS = frozenset(
    "not no never nothing none neither nor cannot can't don't doesn't didn't isn't wasn't aren't "
    "weren't won't without не нет никогда ничего ни без нельзя".split()
)


@dataclass(frozen=True, slots=True)
class Token:
    text: str  # lower-cased surface form
    stem: str
    start: int
    end: int
    is_number: bool
    is_stopword: bool
    is_capitalized: bool  # written with a capital letter in the original


# Snowball stemmers keep the word being stemmed in the instance, so threads sharing one (the
# HTTP server's pool, an engine's threaded workers) corrupt each other's words: one per thread.
_STEMMERS = threading.local()


def _stemmer(language: str) -> snowballstemmer.stemmer:
    by_language = getattr(_STEMMERS, "by_language", None)
    if by_language is None:
        by_language = _STEMMERS.by_language = {}
    if language not in by_language:
        by_language[language] = snowballstemmer.stemmer(language)
    return by_language[language]


@lru_cache(maxsize=200_000)
def _stem(language: str, word: str) -> str:
    # Snowball is pure Python and dominates long-context data prep; words repeat, so cache them.
    return _stemmer(language).stemWord(word)


def language_of(text: str) -> str:
    """'ru' when Cyrillic letters dominate the letters of `text`, else 'en'."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    cyrillic = sum(1 for ch in letters if _CYRILLIC.match(ch))
    return "ru" if cyrillic * 2 >= len(letters) else "en"


def normalize_number(text: str) -> str:
    """'1,000' and '1000' are the same number; '3,5' (ru decimal) and '3.5' too; '4.0' (a structured
    context's star rating) and '4', '4.50' and '4.5' too; '1 350' (a space between thousands) and '1350'."""
    text = _NUMBER_SPACE.sub("", text)
    if re.fullmatch(r"\d{1,3}(,\d{3})+", text):
        return text.replace(",", "")
    value = text.replace(",", ".")
    if re.fullmatch(r"\d+\.\d+", value):
        value = value.rstrip("0").rstrip(".")
    return value


def _word_parts(match: re.Match) -> Iterator[tuple[str, int, int]]:
    """A word, or the parts of a camelCase one ("RestaurantsTakeOut" -> Restaurants, Take, Out):
    structured contexts (JSON keys) write words that way and answers do not."""
    surface, start = match.group(0), match.start()
    cuts = [m.start() for m in _CAMEL_CUT.finditer(surface)]
    for left, right in zip([0, *cuts], [*cuts, len(surface)]):
        yield surface[left:right], start + left, start + right


def clock_time(match: re.Match) -> str | None:
    """'HH:MM' on a 24-hour clock for a `_CLOCK` match, None when it is no time of day ("25:61")."""
    hour, minute, half = (match.group(1), match.group(2), match.group(3)) if match.group(1) else (
        match.group(4), "0", match.group(5))
    hour, minute = int(hour), int(minute)
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half.lower() == "p" else 0)
    return f"{hour:02d}:{minute:02d}" if hour <= 24 and minute <= 59 else None


def clock_times(text: str) -> set[str]:
    """Every time of day the text states, as 'HH:MM' on a 24-hour clock ("5 p.m." -> "17:00")."""
    return {value for match in _CLOCK.finditer(text) if (value := clock_time(match))}


# A case's context and answer are read by several checks (sentence support, fact recall, context
# quality, the abstention features, specificity), each of which tokenised them again. Long texts are
# kept, the last 128: the contexts and answers of one `validate` batch (32 cases), which every
# validator reads in turn. `benchmark gate --cases out/gate_sets/dev_real.jsonl`, one case per call:
# p50 73.8 -> 69.6 ms, batched 14 -> 15 cases/s (a small gain, near the runs' noise); decisions identical.
# Tokens are frozen and the cached value a tuple, so no caller can change what the next one reads.
TOKEN_CACHE_MIN_CHARS = 200
TOKEN_CACHE_SIZE = 128


def tokenize(text: str) -> list[Token]:
    """Word and number tokens with character offsets, stems and flags."""
    if len(text) >= TOKEN_CACHE_MIN_CHARS:
        return list(_cached_tokens(text))
    return _tokenize(text)


@lru_cache(maxsize=TOKEN_CACHE_SIZE)
def _cached_tokens(text: str) -> tuple[Token, ...]:
    return tuple(_tokenize(text))


def _tokenize(text: str) -> list[Token]:
    tokens = []
    clocks = {m.start(): (m.end(), value) for m in _CLOCK.finditer(text) if (value := clock_time(m))}
    inside_clock_until = -1
    for match in _TOKEN.finditer(text):
        if match.start() < inside_clock_until:
            continue
        if match.start() in clocks:
            inside_clock_until, value = clocks[match.start()]
            tokens.append(Token(text=text[match.start():inside_clock_until].lower(), stem=value,
                                start=match.start(), end=inside_clock_until, is_number=True, is_stopword=False,
                                is_capitalized=False))
            continue
        for surface, start, end in _word_parts(match):
            # A typographic apostrophe is an apostrophe: "George’s" and "don’t" meet "George's" and "don't".
            lower = _ACCENT.sub("", surface.lower()).replace("ё", "е").replace("’", "'")
            is_number = surface[0].isdigit()
            if is_number:
                stem = normalize_number(surface)
            else:
                language = "russian" if _CYRILLIC.match(lower[0]) else "english"
                full = _ABBREVIATED.get(lower)
                if full and (surface[0].isupper() or language == "russian") and _ABBREVIATION_GOES_ON.match(text, end):
                    lower = full
                stem = _stem(language, lower)
            tokens.append(
                Token(
                    text=lower,
                    stem=stem,
                    start=start,
                    end=end,
                    is_number=is_number,
                    is_stopword=lower in STOPWORDS_EN or lower in STOPWORDS_RU,
                    is_capitalized=surface[0].isupper(),
                )
            )
    return _read_number_words(text, tokens)


def _spelt_number_run(text: str, tokens: list[Token], first: int) -> int:
    """End (exclusive) of the run of number words that starts at tokens[first]: words separated by
    spaces only, and "and" after a scale word ("two hundred and fifty")."""
    end = first + 1
    while end < len(tokens):
        if not text[tokens[end - 1].end:tokens[end].start].isspace():
            break
        if is_number_word(tokens[end].text):
            end += 1
        elif (tokens[end].text == "and" and tokens[end - 1].text in SCALE_WORDS and end + 1 < len(tokens)
              and is_number_word(tokens[end + 1].text) and text[tokens[end].end:tokens[end + 1].start].isspace()):
            end += 2
        else:
            break
    return end


def _read_number_words(text: str, tokens: list[Token]) -> list[Token]:
    """Replace each run of number words that claims a number, and each written number followed by a
    scale word, with one number token whose stem is the value."""
    read: list[Token] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        value_with_scale = (scaled(token.stem, following.text) if token.is_number and following is not None
                            and text[token.end:following.start].isspace() else None)
        if value_with_scale is not None:  # "1.5 million", "67 млн"
            read.append(Token(text=text[token.start:following.end].lower(), stem=value_with_scale,
                              start=token.start, end=following.end, is_number=True, is_stopword=False,
                              is_capitalized=False))
            index += 2
            continue
        if not is_number_word(token.text):  # digits are number tokens already
            read.append(token)
            index += 1
            continue
        end = _spelt_number_run(text, tokens, index)
        run = tokens[index:end]
        value = number_value([t.text for t in run if t.text != "and"])
        if value is None:
            read.extend(run)
        else:
            start, stop = run[0].start, run[-1].end
            read.append(Token(text=text[start:stop].lower().replace("ё", "е"), stem=str(value), start=start,
                              end=stop, is_number=True, is_stopword=False, is_capitalized=token.is_capitalized))
        index = end
    return read


def _joined_stem(words: Sequence[str]) -> str:
    word = "".join(words)
    return _stem("russian" if _CYRILLIC.match(word[0]) else "english", word)


def hyphen_joined(token: Token) -> str | None:
    """The stem of a hyphenated word's parts run together ("wi-fi" -> wifi); None for any other word."""
    if token.is_number or "-" not in token.text:
        return None
    return _joined_stem([part for part in token.text.split("-") if part])


def stems_of(tokens: Sequence[Token]) -> set[str]:
    """Every stem a text's words go by: their own, and the one word a hyphenated or camelCase word
    makes run together (a context's "take-out" or a record's "WiFi", read as "wi" "fi", is an
    answer's "takeout" or "Wi-Fi", see `is_known`). Not the parts alone: a context's "well-known"
    does not support an answer's "known"."""
    stems = {t.stem for t in tokens}
    stems.update(joined for t in tokens if (joined := hyphen_joined(t)))
    run: list[str] = []
    for token, after in zip(tokens, [*tokens[1:], None]):
        run.append(token.text)
        if after is None or after.start != token.end or token.is_number or after.is_number:
            if len(run) > 1:
                stems.add(_joined_stem(run))
            run = []
    return stems


def is_known(token: Token, stems: set[str] | frozenset[str]) -> bool:
    """The word is among `stems` (from `stems_of`): its own stem or, hyphenated, its parts run together."""
    return token.stem in stems or (joined := hyphen_joined(token)) is not None and joined in stems


def content_stems(text: str) -> set[str]:
    """Stems of the tokens that carry meaning (no stopwords)."""
    return {t.stem for t in tokenize(text) if not t.is_stopword}


@dataclass(frozen=True)
class Sentence:
    text: str
    start: int
    end: int


_SENTENCE_STARTERS = STOPWORDS_EN | STOPWORDS_RU  # built once: split_sentences reads every context


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    """Whether a candidate end (`_SENTENCE_END`) after a full stop really ends the sentence."""
    if text[match.start() - 1:match.start()] != ".":
        return True
    if _starts_list_item(text, match.start()):
        return False
    word = _WORD_BEFORE_STOP.search(text, max(0, match.start() - 20), match.start())
    if word is None:
        return True
    name = word.group(1)
    if len(name) == 1 and name.isupper():
        # An initial ("J. R. R. Tolkien"; "А. С. Пушкин", whose "С" is also the word "with"), unless a
        # sentence starts after it: "vitamin C. It helps", "Plan A. Then …".
        following = _TOKEN.match(text, match.end())
        if following is None:
            return True
        next_is_initial = len(following.group()) == 1 and text[following.end():following.end() + 1] == "."
        return not next_is_initial and following.group().lower() in _SENTENCE_STARTERS
    lowered = name.lower()
    # "г." is a city before a name ("г. Москва") but a year after a number ("в 1812 г. Он …").
    if lowered in ("г", "гг"):
        return bool(re.search(r"\d\s*$", text[max(0, word.start() - 8):word.start()]))
    return not (lowered in _TITLES or (lowered in _BEFORE_NUMBER and text[match.end():match.end() + 1].isdigit()))


def _starts_list_item(text: str, end: int) -> bool:
    """`text[:end]` ends in a list marker ("3.", "Step 3.") that opens a line or follows a sentence."""
    marker = _LIST_NUMBER.search(text, max(0, end - 12), end)
    if marker is None:
        return False
    start = marker.start()
    while start and text[start - 1] in " \t":  # look back in place: contexts are long, called per full stop
        start -= 1
    return not start or text[start - 1] in "\n.!?:;"


def split_sentences(text: str) -> list[Sentence]:
    """Sentences with character offsets, a list item's marker left out; blank pieces are dropped."""
    sentences = []
    position = 0
    for match in [m for m in _SENTENCE_END.finditer(text) if _ends_sentence(text, m)] + [None]:
        end = match.start() if match else len(text)
        piece = text[position:end]
        stripped = piece.strip()
        offset = position + len(piece) - len(piece.lstrip())
        if marker := _LIST_MARKER.match(stripped):
            stripped, offset = stripped[marker.end():], offset + marker.end()
        if stripped:
            sentences.append(Sentence(stripped, offset, offset + len(stripped)))
        position = match.end() if match else len(text)
    return sentences


def unsupported_phrases(tokens: Sequence[Token], supported: Sequence[bool], offset: int,
                        max_gap: int = 1) -> list[tuple[int, int]]:
    """Answer character ranges of unsupported content tokens, merged across gaps of at most
    `max_gap` stopword tokens (the words between "in 1998 in Berlin" belong to one claim)."""
    ranges: list[tuple[int, int]] = []
    gap = 0
    for token, ok in zip(tokens, supported):
        if not ok and not token.is_stopword:
            if ranges and gap <= max_gap:
                ranges[-1] = (ranges[-1][0], token.end + offset)
            else:
                ranges.append((token.start + offset, token.end + offset))
            gap = 0
        elif token.is_stopword:
            gap += 1
        else:
            gap = max_gap + 1  # a supported content word ends the phrase
    return ranges
