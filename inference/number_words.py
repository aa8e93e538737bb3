"""Cardinal numbers written as words, English and Russian: "five years", "twenty-five", "пять лет",
"двадцать пять", "две тысячи"; and digits with a scale word: "1.5 million", "67 млн".

The lexical checks compare numbers exactly ("67" against "69"); a number spelt out escaped them, so
"гарантия сроком пять лет" passed against "сроком два года". `number_value` reads a run of number
words as its value, so that spelt-out and written numbers meet as one token ("five" == "5").

Deliberately left as ordinary words:
- "one" / "один" alone: mostly a pronoun or article ("one of the reasons", "один из"); inside a
  compound ("twenty-one", "двадцать один") it counts.
- scale words alone ("thousands of users", "тысячи людей", "hundreds"): no number is claimed.
- ordinals ("second", "третий") and "семью" (also "family"): ambiguous or not a count.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation


def _forms(table: dict[int, str]) -> dict[str, int]:
    return {form: value for value, forms in table.items() for form in forms.split()}


_EN = _forms({
    0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
    8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen",
    15: "fifteen", 16: "sixteen", 17: "seventeen", 18: "eighteen", 19: "nineteen", 20: "twenty",
    30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety",
})
# Russian cardinals in every case the inflection table gives them, ё written as е (as tokens are).
_RU = _forms({
    0: "ноль нуль ноля нуля", 1: "один одна одно одного одной одному одну одним одном одною",
    2: "два две двух двум двумя", 3: "три трех трем тремя", 4: "четыре четырех четырем четырьмя",
    5: "пять пяти пятью", 6: "шесть шести шестью", 7: "семь семи", 8: "восемь восьми восемью восьмью",
    9: "девять девяти девятью", 10: "десять десяти десятью",
    11: "одиннадцать одиннадцати одиннадцатью", 12: "двенадцать двенадцати двенадцатью",
    13: "тринадцать тринадцати тринадцатью", 14: "четырнадцать четырнадцати четырнадцатью",
    15: "пятнадцать пятнадцати пятнадцатью", 16: "шестнадцать шестнадцати шестнадцатью",
    17: "семнадцать семнадцати семнадцатью", 18: "восемнадцать восемнадцати восемнадцатью",
    19: "девятнадцать девятнадцати девятнадцатью", 20: "двадцать двадцати двадцатью",
    30: "тридцать тридцати тридцатью", 40: "сорок сорока", 50: "пятьдесят пятидесяти пятьюдесятью",
    60: "шестьдесят шестидесяти шестьюдесятью", 70: "семьдесят семидесяти семьюдесятью",
    80: "восемьдесят восьмидесяти восемьюдесятью", 90: "девяносто девяноста",
    100: "сто ста", 200: "двести двухсот двумстам", 300: "триста трехсот тремстам",
    400: "четыреста четырехсот четыремстам", 500: "пятьсот пятисот пятистам",
    600: "шестьсот шестисот шестистам", 700: "семьсот семисот семистам",
    800: "восемьсот восьмисот восьмистам", 900: "девятьсот девятисот девятистам",
})
# Multipliers: they scale what precedes them ("two hundred", "две тысячи") and claim nothing alone.
_SCALES = _forms({
    100: "hundred",
    1_000: "thousand тысяча тысячи тысяч тысячу тысячей тысячам тысячами тысяче тыс",
    1_000_000: "million миллион миллиона миллионов миллиону миллионом миллионе миллионам миллионами млн",
    1_000_000_000: "billion миллиард миллиарда миллиардов миллиарду миллиардом миллиарде миллиардам млрд",
})
_VALUES = {**_EN, **_RU}
# Longer runs are lists or noise, not one number ("two hundred and fifty-three thousand four hundred
# and twelve" is 11 words); and a bound keeps "hundred hundred hundred…" from building an integer
# too long to print. Written numbers longer than this are left as they are.
MAX_RUN_WORDS = 16
MAX_SCALED_DIGITS = 30
SCALE_WORDS = frozenset(_SCALES)
_ONE = {form for form, value in _VALUES.items() if value == 1}


def is_number_word(word: str) -> bool:
    """`word` lower-cased, ё as е; a hyphenated compound ("twenty-five") counts when every part does."""
    return all(part in _VALUES or part in _SCALES for part in word.split("-"))


def number_value(words: Sequence[str]) -> int | None:
    """The value of a run of number words ("two", "hundred", "fifty" -> 250), or None when the run
    claims no number: "one"/"один" alone, scale words alone, or a word that is not a number."""
    parts = [part for word in words for part in word.split("-")]
    if not parts or len(parts) > MAX_RUN_WORDS or any(part not in _VALUES and part not in _SCALES for part in parts):
        return None
    counted = [part for part in parts if part in _VALUES]
    if not counted or (len(parts) == 1 and parts[0] in _ONE):
        return None
    total = current = 0
    for part in parts:
        if part in _VALUES:
            current += _VALUES[part]
        elif _SCALES[part] == 100:
            current = (current or 1) * 100
        else:
            total += (current or 1) * _SCALES[part]
            current = 0
    return total + current


def scaled(number: str, scale_word: str) -> str | None:
    """The canonical stem of a written number times its scale word ("1.5", "million" -> "1500000"),
    or None when `scale_word` is not one. `number` is a normalised number stem ("1.5", "1000")."""
    if scale_word not in _SCALES or len(number) > MAX_SCALED_DIGITS:
        return None
    try:
        value = Decimal(number) * _SCALES[scale_word]
    except InvalidOperation:
        return None
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")
