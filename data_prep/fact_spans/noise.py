"""Stylistic filler ("noise"): phrases an answer wraps around its content, in English and Russian.

The same lists serve two jobs: the synthesiser wraps generated answers in them, and
`find_noise` marks them in human-labelled answers (RAGTruth) whose annotators only marked
hallucinations, so such filler is not taught as FACT.
"""

from __future__ import annotations

import re

# Openers are whole sentences: a lead-in like "Based on the passages," would need the copied
# sentence after it lower-cased, and then the copy would no longer match the context.
OPENERS = {
    "en": (
        "Sure!",
        "Sure, here is the answer.",
        "Certainly!",
        "Of course!",
        "Great question!",
        "Here is a brief answer based on the provided context:",
        "As an AI language model, I can only rely on the text provided.",
        "Thank you for your question.",
    ),
    "ru": (
        "Конечно!",
        "Конечно, вот ответ.",
        "Хороший вопрос!",
        "Вот краткий ответ на основе предоставленного контекста:",
        "Как языковая модель, я опираюсь только на предоставленный текст.",
        "Спасибо за вопрос.",
    ),
}
CLOSERS = {
    "en": (
        "I hope this helps!",
        "Let me know if you have any other questions.",
        "Feel free to ask if you need more details.",
        "Hope that answers your question.",
        "Thank you!",
    ),
    "ru": (
        "Надеюсь, это поможет!",
        "Если у вас есть другие вопросы, спрашивайте.",
        "Обращайтесь, если нужны подробности.",
        "Спасибо!",
    ),
}
# Filler seen in real LLM answers beyond the fixed phrases above (RAGTruth responses).
_PATTERNS = (
    r"\b(?:Sure|Certainly|Of course|Absolutely)[!,.]",
    r"\bHere(?: is|'s) (?:a |an |the )?(?:brief |short |concise |possible )?(?:summary|answer|overview|response|description)\b[^:.\n]{0,60}[:.]",
    r"\b(?:Based on|According to) the (?:given |provided |above )?(?:passages?|context|information|text|data|structured data|reviews|article|news)(?: provided| above| given)?,",
    r"\bAs an AI(?: language)? model,[^.\n]{0,80}\.",
    r"\bI hope (?:this|that) (?:helps|answers your question)[.!]?",
    r"\bLet me know if you (?:have|need) any (?:other|further|more) (?:questions|information|help)[.!]?",
    r"\bThank you(?: for your question)?[.!]",
    r"\bВот (?:краткий |короткий )?(?:ответ|обзор|пересказ)[^:.\n]{0,60}[:.]",
    r"\b(?:Согласно|Судя по) (?:приведённому |предоставленному |данному )?(?:тексту|контексту|информации),",
    r"\bНадеюсь, это (?:поможет|помогло)[.!]?",
)


def _phrase_pattern(phrase: str) -> str:
    # Fixed phrases match literally, but tolerate different spacing.
    return r"\s+".join(re.escape(word) for word in phrase.split())


_MATCHER = re.compile(
    "|".join(
        [_phrase_pattern(p) for lang in (OPENERS, CLOSERS) for phrases in lang.values() for p in phrases]
        + list(_PATTERNS)
    ),
    re.IGNORECASE,
)


def find_noise(answer: str) -> list[tuple[int, int]]:
    """Character ranges of filler phrases in `answer`, non-overlapping, in order."""
    return [(m.start(), m.end()) for m in _MATCHER.finditer(answer) if m.end() > m.start()]
