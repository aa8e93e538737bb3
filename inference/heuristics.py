"""Lexical scores computed in milliseconds, used when a trained validator is absent.

Every score is in [0, 1]. They are deliberately simple and explainable: shared content stems,
exact number matching, negation mismatch, phrase lists for noise, hedging and abstention (en, ru).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

from .records import parse_record, record_checks
from .text import (NEGATIONS, Sentence, Token, content_stems, is_known, language_of, plain_spelling,
                   split_sentences, stems_of, tokenize, unsupported_phrases)

# Stylistic filler that is neither a claim nor a hallucination.
NOISE_PATTERNS = [
    r"\bdear (customer|user|client|sir|madam)\b", r"\bthank(s| you)\b", r"\bi hope (this|that) helps\b",
    r"\bas an ai( language)? model\b", r"\bhere is (a|the) (summary|answer|overview)\b", r"\bhappy to help\b",
    r"\bfeel free to\b", r"\bbest regards\b", r"\bhave a (great|nice) day\b", r"\bgreat question\b",
    r"\bhello\b", r"\bhi there\b", r"\blet me know if\b", r"\bi'?m glad\b", r"\bsure[,!]",
    r"\bуважаем\w+ (клиент|пользовател)\w*", r"\bспасибо\b", r"\bблагодар\w+", r"\bздравствуйте\b",
    r"\bдобрый (день|вечер)\b", r"\bнадеюсь,? (это|мой ответ) помо\w+", r"\bобращайтесь\b",
    r"\bс уважением\b", r"\bхорошего дня\b", r"\bрад\w* помочь\b", r"\bвот (краткое )?(резюме|ответ)\b",
]
# A preamble that announces the answer ("Here's the summary within 84 words:", "Вот краткое
# содержание статьи:") frames it and claims nothing about the source: noise, however many words it has.
PREAMBLE_PATTERNS = [
    r"^\W*((sure|certainly|of course|okay|ok)\W+)?(here('s| is| are)|below (is|are)|the following (is|are))\b"
    r"[^.!?:]{0,120}\b(summary|summari[sz]ed|overview|answer|response|rewrite|version|list|description|report)\b"
    r"[^.!?:]{0,60}[:.]?\s*$",
    r"^\W*((конечно|хорошо)\W+)?(вот|ниже)\b[^.!?:]{0,120}\b(кратк\w+ (содержани|изложени|пересказ)\w*|резюме|"
    r"ответ\w*|обзор\w*|сводк\w+|пересказ\w*)[^.!?:]{0,60}[:.]?\s*$",
]
# The answer declines to answer: correct behaviour when the context does not support one.
ABSTENTION_PATTERNS = [
    r"\b(i|we) (do not|don't|did not|didn't) (have|find|know)\b",
    r"\b(not|no) (enough|sufficient) (information|context|data)\b",
    r"\binsufficient (information|context)\b",
    r"\b(cannot|can't|can not|unable to) (answer|determine|tell|say|find|confirm|verify)\b",
    r"\b(is|are) not (mentioned|specified|stated|provided|given|available)\b",
    r"\b(the )?(context|document|documents|passage|text|sources?) (does|do) not (say|mention|contain|specify|provide|state)\b",
    r"\bno information\b", r"\bi('m| am) not sure\b", r"\bunknown\b",
    r"\bнет (данных|информации|сведений)\b", r"\bнедостаточно (данных|информации|сведений)\b",
    r"\bне (могу|можем|удалось) (ответить|определить|сказать|найти|подтвердить)\b",
    r"\bне (знаю|известно|указан\w*|упомина\w+|сказано|говорится|назван\w*|приводится|сообщается|уточняется)\b",
    r"\bнет ответа\b",
    r"\bв (контексте|документ\w*|тексте|источник\w*) (нет|не)\b",
]
# Hedging lowers specificity: a hedged wrong answer is vague, not a confident hallucination.
HEDGE_PATTERNS = [
    r"\b(may|might|could|possibly|perhaps|probably|likely|maybe|seems?|appears?|roughly|around|approximately|generally|typically|usually)\b",
    r"\b(возможно|наверное|вероятно|кажется|примерно|около|обычно|как правило|может быть|скорее всего)\b",
]
# Words an abstaining answer may add beyond the question ("I cannot answer that question").
MAX_NEW_WORDS_IN_ABSTENTION = 4
_NOISE = re.compile("|".join(NOISE_PATTERNS), re.IGNORECASE)
_PREAMBLE = re.compile("|".join(PREAMBLE_PATTERNS), re.IGNORECASE)
_ABSTENTION = re.compile("|".join(ABSTENTION_PATTERNS), re.IGNORECASE)
_HEDGE = re.compile("|".join(HEDGE_PATTERNS), re.IGNORECASE)


@dataclass(frozen=True)
class SentenceSupport:
    sentence: Sentence
    is_noise: bool
    support: float  # weighted share of the sentence's content tokens found in the context
    unsupported_numbers: tuple[str, ...]
    negation_mismatch: bool
    record_conflicts: tuple[str, ...] = ()  # what it gets wrong about a structured context (records.py)
    unsupported_names: tuple[str, ...] = ()  # names (capitalised inside the sentence) the context never uses
    tokens: tuple[Token, ...] = ()  # the sentence's words (offsets within the sentence)
    supported: tuple[bool, ...] = ()  # per word: the context (or its record) holds it

    def unsupported_phrases(self, max_gap: int = 1, named_only: bool = False) -> list[tuple[int, int]]:
        """Answer character ranges of its unsupported content words, merged across up to `max_gap`
        stopwords: where in a flagged sentence the claim the context lacks is. `named_only`: only
        the phrases holding an unsupported number or name (`is_name`)."""
        phrases = unsupported_phrases(self.tokens, self.supported, self.sentence.start, max_gap)
        if not named_only:
            return phrases
        offset = self.sentence.start
        named = [t.start + offset for t, ok in zip(self.tokens, self.supported)
                 if not ok and (t.is_number or is_name(t, self.sentence.text))]
        return [(a, b) for a, b in phrases if any(a <= position < b for position in named)]


def claim_weight(token: Token) -> float:
    # Numbers and names carry the checkable claim; a wrong one matters more than a wrong verb.
    return 2.0 if token.is_number or token.is_capitalized else 1.0


def is_noise_sentence(sentence: Sentence) -> bool:
    """Noise when filler phrases cover most of the sentence's words, or it is a preamble."""
    text = plain_spelling(sentence.text)  # the phrase lists are written without stress marks
    if _PREAMBLE.match(text):
        return True
    covered = sum(len(m.group(0)) for m in _NOISE.finditer(text))
    if not covered:
        return False
    residue = _NOISE.sub(" ", text)
    residue_content = [t for t in tokenize(residue) if not t.is_stopword]
    return len(residue_content) <= 2


# The support a sentence keeps at most with an unsupported number, name or record conflict, and
# with a negation the context never uses. A threshold that flags sentences must lie above both.
MISSING_CLAIM_CAP = 0.3
NEGATION_CAP = 0.4


def capped_support(support: float, missing_number: bool, negation_mismatch: bool,
                   record_conflict: bool = False, missing_name: bool = False) -> float:
    """A number or name the context never states, a negation it never uses, or a claim its record
    contradicts caps a sentence's support: each flips a claim that otherwise shares all its words."""
    if missing_number or record_conflict or missing_name:
        support = min(support, MISSING_CLAIM_CAP)
    if negation_mismatch:
        support = min(support, NEGATION_CAP)
    return support


# A capital after these opens a clause, not a name ('Select "Export"', "Collect your data: Ensure …").
_CLAUSE_OPENERS = frozenset(':;"“«(\'‘-–—•*')
# A name whose first letters a context word shares is a form of it ("Venezuelan", "Singaporean").
NAME_PREFIX = 6


def is_name(token: Token, sentence: str) -> bool:
    """A word written with a capital inside its sentence, not after a clause opener: a named thing."""
    if not token.is_capitalized or token.is_number or token.is_stopword or token.start == 0:
        return False
    before = sentence[:token.start].rstrip()
    return bool(before) and before[-1] not in _CLAUSE_OPENERS


def says_what_the_source_lacks(sentence: str, unknown: Sequence[Token], question: str) -> bool:
    """The sentence only reports what the passage does not say ("В отрывке точная дата выпуска не
    указана."): an abstention phrase, and no number or name that neither the context nor the
    question holds (`unknown`: the sentence's numbers and names the context lacks). It makes no
    claim about the world a lexical check could verify, so it is read as noise, not as an
    unsupported claim."""
    if not _ABSTENTION.search(plain_spelling(sentence)):
        return False
    return all(map(named_in(question), unknown))


def named_in(question: str) -> Callable[[Token], bool]:
    """Whether the question holds a number (the same one) or a name (a form of it, `NAME_PREFIX`)."""
    asked = {t.stem for t in tokenize(question)}
    asked_prefixes = {stem[:NAME_PREFIX] for stem in asked}
    return lambda t: t.stem in asked if t.is_number else t.stem[:NAME_PREFIX] in asked_prefixes


# The gate reads a case's sentence support twice: the heuristic fact-span validator, then the
# specifics_grounding signal, on the same texts. The last results are kept (a `validate` batch is 32
# cases) so the second read costs a lookup; the value is a tuple of frozen records, which no caller
# can change for the next. `benchmark gate --cases out/gate_sets/dev_real.jsonl --repeat 3
# --latency-cases 40`, run back to back without and with it (2026-12-08, 2 threads): p50 74.2 -> 71.5
# ms, batched 11 -> 13 cases/s, 338 MB both; decisions identical.
SUPPORT_CACHE_SIZE = 64


def sentence_support(answer: str, context: str, question: str = "",
                     source_lacks_languages: frozenset[str] = frozenset()) -> list[SentenceSupport]:
    """Per answer sentence: how much of it the context supports. In the answer languages of
    `source_lacks_languages`, a sentence that only says what the passage lacks
    (`says_what_the_source_lacks`) is noise."""
    return list(_cached_support(answer, context, question, frozenset(source_lacks_languages)))


@lru_cache(maxsize=SUPPORT_CACHE_SIZE)
def _cached_support(answer: str, context: str, question: str,
                    source_lacks_languages: frozenset[str]) -> tuple[SentenceSupport, ...]:
    return tuple(_sentence_support(answer, context, question, source_lacks_languages))


def _sentence_support(answer: str, context: str, question: str,
                      source_lacks_languages: frozenset[str]) -> list[SentenceSupport]:
    reads_source_lacks = language_of(answer) in source_lacks_languages
    context_tokens = tokenize(context)
    context_stems = stems_of(context_tokens)
    context_prefixes: set[str] | None = None  # built on the first name the context lacks
    context_numbers = {t.stem for t in context_tokens if t.is_number}
    context_negated = bool(NEGATIONS & {t.text for t in context_tokens})
    record = parse_record(context)
    results = []
    for sentence in split_sentences(answer):
        if is_noise_sentence(sentence):
            results.append(SentenceSupport(sentence, True, 1.0, (), False))
            continue
        tokens = tokenize(sentence.text)
        content = [t for t in tokens if not t.is_stopword]
        checks = record_checks(sentence.text, record)
        # The weighted share reads every word against the context's stems; the caps read a number
        # against its numbers (and the record's numbers in other words).
        in_context = [is_known(t, context_stems) or t.stem in checks.supported_stems for t in tokens]
        supported = tuple((t.stem in context_numbers or t.stem in checks.explained_numbers) if t.is_number else ok
                          for t, ok in zip(tokens, in_context))
        total = sum(claim_weight(t) for t in content)
        found = sum(claim_weight(t) for t, ok in zip(tokens, in_context) if ok and not t.is_stopword)
        support = found / total if total else 1.0
        number_tokens = [t for t, ok in zip(tokens, supported) if t.is_number and not t.is_stopword and not ok]
        missing_numbers = tuple(t.text for t in number_tokens)
        negated = bool(NEGATIONS & {t.text for t in tokens})
        # A negation the context never uses flips a claim that otherwise shares all its words,
        # unless it restates a record's false attribute ("does not take reservations").
        mismatch = negated and not context_negated and not checks.explains_negation
        # A name the context never uses ("Perth" for "Sydney") is as checkable as a wrong number,
        # though it moves the weighted share of a long sentence by a word or two.
        candidates = [t for t, ok in zip(tokens, supported) if not ok and is_name(t, sentence.text)]
        if candidates and context_prefixes is None:
            context_prefixes = {t.stem[:NAME_PREFIX] for t in context_tokens if len(t.stem) >= NAME_PREFIX}
        name_tokens = [t for t in candidates if t.stem[:NAME_PREFIX] not in context_prefixes]
        missing_names = tuple(t.text for t in name_tokens)
        if reads_source_lacks and says_what_the_source_lacks(sentence.text, number_tokens + name_tokens, question):
            results.append(SentenceSupport(sentence, True, 1.0, (), False))
            continue
        support = capped_support(support, bool(missing_numbers), mismatch, bool(checks.conflicts), bool(missing_names))
        results.append(SentenceSupport(sentence, False, support, missing_numbers, mismatch, checks.conflicts,
                                       missing_names, tuple(tokens), supported))
    return results


def specifics_grounding(answer: str, context: str, question: str = "",
                        source_lacks_languages: frozenset[str] = frozenset()) -> float:
    """The worst answer sentence's share of its numbers and names (`is_name`) that the context or the
    question states; 1.0 when no sentence holds one. Noise sentences are not read.

    Why a check of its own: a wrong number or name is the claim a reader acts on, and in a long answer
    one such sentence moves the length-weighted grounding by a few points. On the dev real answers a
    sentence holding one is in 77% of hallucinated and 13% of faithful RAGTruth QA answers; a sentence
    of low support alone in 92% and 42% (inference/GATE_HISTORY.md). The question counts as known: an
    answer naming what was asked ("a worn USA flag") adds nothing the context must hold."""
    asked = named_in(question)
    worst = 1.0
    for item in sentence_support(answer, context, question, source_lacks_languages):
        if item.is_noise:
            continue
        text = item.sentence.text
        specifics = [t for t in item.tokens if not t.is_stopword and (t.is_number or is_name(t, text))]
        if not specifics:
            continue
        unknown = set(item.unsupported_numbers) | set(item.unsupported_names)
        missing = [t for t in specifics if t.text in unknown and not asked(t)]
        worst = min(worst, 1.0 - len(missing) / len(specifics))
    return worst


def atomic_facts(context: str) -> list[Sentence]:
    """The context's atomic facts: its sentences, split further at ';' (en and ru alike)."""
    facts = []
    for sentence in split_sentences(context):
        position = sentence.start
        for piece in re.split(r"(?<=;)\s+", sentence.text):
            if piece.strip():
                start = context.index(piece, position)
                facts.append(Sentence(piece, start, start + len(piece)))
                position = start + len(piece)
    return facts


def fact_recall(answer: str, context: str, covered_at: float = 0.5) -> float:
    """Share of the context's atomic facts whose content stems the answer mostly repeats."""
    return recall_of_facts(content_stems(answer), [content_stems(f.text) for f in atomic_facts(context)], covered_at)


def recall_of_facts(answer_stems: set[str], fact_stems: Sequence[set[str] | frozenset[str]],
                    covered_at: float = 0.5) -> float:
    """`fact_recall` from stems already computed (facts without content stems do not count)."""
    facts = [f for f in fact_stems if f]
    if not facts:
        return 0.0
    covered = sum(1 for f in facts if len(f & answer_stems) / len(f) >= covered_at)
    return covered / len(facts)


# Dates count like numbers: "in January", "on Monday", "в марте" make a claim as checkable as "in 1793".
_DATE_WORD = re.compile(
    r"^(?:(?:january|february|march|april|june|july|august|september|october|november|december|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|(?:январ|феврал|март|апрел|июн|июл|август|сентябр|октябр|ноябр|"
    r"декабр|понедельник|вторник|четверг|пятниц|суббот|воскресень)[а-яё]{0,2}|ма[йяе])$", re.IGNORECASE)
# A long word is mostly a term ("cyclooxygenase", "тромбоксан"): definite technical claims are made of them.
TERM_LETTERS = 10


def specificity(answer: str) -> float:
    """How concrete and assertive the answer is: numbers and dates, named things (a capitalised word
    not opening its sentence), technical terms (long words), less for each hedge."""
    tokens = tokenize(answer)
    content = [t for t in tokens if not t.is_stopword]
    if not content:
        return 0.0
    sentence_starts = {s.start for s in split_sentences(answer)}
    numbers = sum(1 for t in content if t.is_number or _DATE_WORD.match(t.text))
    names = sum(1 for t in content if t.is_capitalized and t.start not in sentence_starts and not t.is_number
                and not _DATE_WORD.match(t.text))
    terms = sum(1 for t in content if not t.is_number and len(t.text) >= TERM_LETTERS)
    hedges = len(_HEDGE.findall(plain_spelling(answer)))
    density = (2 * numbers + names + 0.5 * terms) / len(content)
    # A few numbers or names in a short answer already make it checkable; saturate early.
    score = 1.0 - math.exp(-4.0 * density) - 0.15 * hedges
    return max(0.0, min(1.0, score))


def abstains(answer: str, question: str = "") -> bool:
    """The answer declines to answer and asserts nothing new.

    Outside the abstention phrases, the answer may restate the question ("…about the Mars
    office", "…the two main risks") but not add numbers or more than a few new content words: "I don't know, but the
    Mars office opens in 2027" still asserts a checkable claim.
    """
    answer = plain_spelling(answer)  # "Не зна́ю" is the phrase list's "не знаю"
    if not _ABSTENTION.search(answer):
        return False
    residue = _NOISE.sub(" ", _ABSTENTION.sub(" ", answer))
    content = [t for t in tokenize(residue) if not t.is_stopword]
    asked = content_stems(question)
    # A number the question already holds is restated ("…the two main risks"), not asserted.
    if any(t.is_number and t.stem not in asked for t in content):
        return False
    novel = {t.stem for t in content} - asked
    return len(novel) <= MAX_NEW_WORDS_IN_ABSTENTION


def _cosine(a: Counter, b: Counter) -> float:
    shared = set(a) & set(b)
    dot = sum(a[k] * b[k] for k in shared)
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


def lexical_relevance(question: str, answer: str) -> float:
    """Does the answer talk about what the question asks? Overlap of content stems.

    Both texts are counted over one shared vocabulary (their own stems), so equal texts give 1.
    A short answer ("Paris.") shares few words with its question yet answers it, so the score is
    the larger of the question's coverage and a length-robust cosine, floored for short answers.
    """
    q = Counter(t.stem for t in tokenize(question) if not t.is_stopword)
    a = Counter(t.stem for t in tokenize(answer) if not t.is_stopword)
    if not q or not a:
        return 0.5 if a else 0.0
    coverage = len(set(q) & set(a)) / len(set(q))
    score = max(coverage, _cosine(q, a))
    if sum(a.values()) <= 3:
        score = max(score, 0.5)  # too short to judge lexically: neutral, not off-topic
    return min(1.0, score)


def context_quality(question: str, context: str) -> float:
    """Share of the question's content stems that the context contains (0 for no context)."""
    q = content_stems(question)
    if not context.strip():
        return 0.0
    if not q:
        return 1.0
    return len(q & content_stems(context)) / len(q)


def spread(scores: list[float]) -> float:
    """Max - min of the validators' quality scores: large when they tell different stories."""
    return max(scores) - min(scores) if len(scores) >= 2 else 0.0
