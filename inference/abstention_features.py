"""Text -> hashed n-gram features for the abstention model, shared by training and inference.

Pure Python + numpy (no scikit-learn at inference). A text becomes a bag of features, each hashed
(crc32) into `hash_dim` buckets:

- character n-grams (`char_ngrams`, default 2-5) of the normalised text, words padded with spaces,
  so "don't have enough information" and "do not have sufficient information" share most features;
- word unigrams and bigrams (`w:` prefix);
- a few whole-answer markers: a digit, a contrast word ("but", "however", "но", "однако"), the
  phrase list of `heuristics.ABSTENTION_PATTERNS` matching (kept as a feature, not a rule), and
  the answer's length bucket (a long answer rarely only declines).

Normalisation makes odd input harmless and common tricks visible: NFKC, lower case, zero-width and
control characters and stress marks dropped, digits folded to `0`, and look-alike letters in a word
that mixes scripts read in its majority script ("нет дaнных" with a Latin `a`, "dоn't" with a
Cyrillic `о`). Texts longer than `max_chars` are read as their head and tail (`max_chars / 2` each)
plus a `long` marker: a 5 MB answer costs what a 4 kB one does, and it is not a refusal anyway.

Values are log(1 + count), L2-normalised per text; the model multiplies them with one weight row
per bucket (an ONNX Gather + ReduceSum), so the batch is fed as padded (indices, values) pairs.
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from autovalidators.inference.text import plain_spelling

_INVISIBLE = re.compile(r"[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u00ad\u200b-\u200f\u202a-\u202e"
                        r"\u2060-\u2064\ufeff]")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_DIGIT = re.compile(r"\d")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[a-z]")
# Latin letters that look like Cyrillic ones, as they appear after lower-casing.
_TO_CYRILLIC = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "k": "к", "m": "м", "t": "т",
                "h": "н", "b": "в"}
_LOOKALIKES = str.maketrans(_TO_CYRILLIC)
_LOOKALIKES_BACK = str.maketrans({cyrillic: latin for latin, cyrillic in _TO_CYRILLIC.items()})
_CONTRAST = frozenset({"but", "however", "although", "though", "yet", "still", "но", "однако", "хотя", "зато",
                       "впрочем", "тем"})


@dataclass(frozen=True)
class FeatureSpec:
    """How texts become features; written to the model folder as `featurizer.json`."""

    hash_dim: int = 1 << 18  # buckets; collisions are rare at this size for a few thousand n-grams
    char_ngrams: tuple[int, int] = (2, 5)  # smallest and largest character n-gram
    word_ngrams: int = 2  # word unigrams up to this n
    max_chars: int = 4000  # longer texts: head and tail of max_chars / 2 each
    version: int = 1

    def to_dict(self) -> dict:
        return {**asdict(self), "char_ngrams": list(self.char_ngrams)}

    @classmethod
    def from_dict(cls, data: dict) -> "FeatureSpec":
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"featurizer: unknown key(s) {sorted(unknown)}")
        values = dict(data)
        if "char_ngrams" in values:
            values["char_ngrams"] = tuple(values["char_ngrams"])
        spec = cls(**values)
        low, high = spec.char_ngrams
        if not (1 <= low <= high) or spec.hash_dim < 2 or spec.max_chars < 2 or spec.word_ngrams < 1:
            raise ValueError(f"featurizer: invalid settings {spec.to_dict()}")
        return spec


def _fix_lookalikes(word: str) -> str:
    """A word mixing scripts is read in the script most of its letters use."""
    cyrillic, latin = len(_CYRILLIC.findall(word)), len(_LATIN.findall(word))
    if cyrillic and latin:
        return word.translate(_LOOKALIKES if cyrillic >= latin else _LOOKALIKES_BACK)
    return word


def cut(text: str, max_chars: int) -> str:
    """`text`, or its head and tail of `max_chars / 2` characters each when it is longer."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + " " + text[-half:]


def normalize(text: str, max_chars: int) -> tuple[str, bool]:
    """The text as the model reads it, and whether it was cut to its head and tail."""
    long = len(text) > max_chars
    text = cut(text, max_chars)
    # NFKC composes "e" + acute into "é"; an acute or grave left after it is a Russian stress mark
    # ("не́т дáнных"), which plain_spelling drops with the soft hyphens, as the other validators do.
    text = _INVISIBLE.sub("", plain_spelling(unicodedata.normalize("NFKC", text))).lower().replace("ё", "е")
    return text, long


def words_of(normalized: str) -> list[str]:
    return [_DIGIT.sub("0", _fix_lookalikes(w)) for w in _WORD.findall(normalized)]


def feature_strings(text: str, spec: FeatureSpec, *, phrase_hit: bool) -> list[str]:
    """Every feature of `text` (with repeats); `phrase_hit`: the abstention phrase list matched."""
    normalized, long = normalize(text, spec.max_chars)
    words = words_of(normalized)
    low, high = spec.char_ngrams
    features: list[str] = []
    for word in words:
        padded = f" {word} "
        for n in range(low, high + 1):
            features.extend(padded[i:i + n] for i in range(len(padded) - n + 1))
    for n in range(1, spec.word_ngrams + 1):
        features.extend("w:" + " ".join(words[i:i + n]) for i in range(len(words) - n + 1))
    features.append(f"#len:{min(12, int(math.log2(1 + len(words))))}")
    if _DIGIT.search(normalized):
        features.append("#digit")
    if _CONTRAST & set(words):
        features.append("#contrast")
    if phrase_hit:
        features.append("#phrase")
    if long:
        features.append("#long")
    if not words:
        features.append("#empty")
    return features


def hashed(features: Sequence[str], hash_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique bucket ids and their L2-normalised log(1 + count) values."""
    buckets = np.fromiter((zlib.crc32(f.encode("utf-8")) % hash_dim for f in features), dtype=np.int64,
                          count=len(features))
    ids, counts = np.unique(buckets, return_counts=True)
    values = np.log1p(counts.astype(np.float32))
    norm = float(np.sqrt((values * values).sum()))
    return ids, (values / norm if norm else values).astype(np.float32)


def featurize(texts: Sequence[str], spec: FeatureSpec, phrase_hits: Sequence[bool]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One (bucket ids, values) pair per text."""
    return [hashed(feature_strings(t, spec, phrase_hit=h), spec.hash_dim) for t, h in zip(texts, phrase_hits)]


def pad(rows: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Padded (n, k) indices and values; padding points at bucket 0 with value 0, so it adds nothing."""
    width = max((len(ids) for ids, _ in rows), default=1) or 1
    indices = np.zeros((len(rows), width), dtype=np.int64)
    values = np.zeros((len(rows), width), dtype=np.float32)
    for row, (ids, vals) in enumerate(rows):
        indices[row, :len(ids)] = ids
        values[row, :len(vals)] = vals
    return indices, values
