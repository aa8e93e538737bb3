"""Data for the abstention model: does an answer decline to answer (label 1) or assert (label 0)?

Three kinds of rows, each with a `family` that the split keeps whole:

- generated paraphrases (`abstention_templates`): refusal families in en and ru, rendered with
  topics, sources, courtesy wrappers and noise (typos, case, punctuation, emoji); hard negatives
  from the same families (refusal + claim), hedged claims and templated claims. Family =
  template, so dev/test hold out wordings never seen in training.
- real LLM responses (RAGTruth, HaluEval general; MIT): labelled by `real_label`, a strict rule
  (a refusal phrase, nothing offered instead, short); family = the response's normalised opening,
  so the many identical "Unable to answer based on given passages." land in one split.
- real answers (XQuAD en + ru answers and context sentences; CC BY-SA, read at prepare time, not
  copied): label 0; family = the article.

`prepare_abstention(config)` writes `train/dev/test.jsonl` and a data card to `config.out_dir`.
"""

from __future__ import annotations

import json
import logging
import random
import re
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field

from .abstention_templates import (
    CLAIMS, CONTRASTS, HEDGES, NAMES, NAMES_RU, REFUSALS, SOURCES, STREETS_RU, TOPICS, WRAP_AFTER, WRAP_BEFORE,
)
from .data_card import write_data_card
from .io import DataError, write_jsonl
from .splits import grouped_split
from .squad import iter_squad

logger = logging.getLogger(__name__)

LANGUAGES = ("en", "ru")


class AbstentionDataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data_root: str = Field("../shared/datasets", description="folder holding the public datasets")
    out_dir: str = "prepared/abstention"
    seed: int = 13
    refusals_per_family: int = Field(60, ge=1, description="rendered refusals per template")
    contrasts_per_family: int = Field(20, ge=0, description="refusal + claim negatives per refusal template")
    hedged_per_family: int = Field(40, ge=0, description="hedged claims per hedge template")
    claims_per_family: int = Field(30, ge=0, description="templated claims per claim template")
    real_answers_per_language: int = Field(1200, ge=0, description="XQuAD questions per language: each gives its answer and a context sentence")
    halueval_max_rows: int = Field(4507, ge=0, description="HaluEval responses read (all by default)")
    noise: float = Field(0.3, ge=0.0, le=1.0, description="share of rows with typos/case/punctuation noise")
    fractions: dict[str, float] = {"train": 0.6, "dev": 0.2, "test": 0.2}  # of families


# ----- generated paraphrases ---------------------------------------------------------------------

def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lc(text: str) -> str:
    # Lower-case the first letter unless it starts a name or an acronym.
    return text if text[:2].isupper() or text.split(" ", 1)[0] in {"I", *NAMES} else text[:1].lower() + text[1:]


def _slots(language: str, rng: random.Random) -> dict[str, str]:
    if language == "en":
        topic, clause = rng.choice(TOPICS["en"])
        docs, doc = rng.choice(SOURCES["en"]["docs"]), rng.choice(SOURCES["en"]["doc"])
        return {"topic": topic, "Topic": _cap(topic), "clause": clause, "docs": docs, "docs_cap": _cap(docs),
                "doc": doc, "doc_cap": _cap(doc), "name": rng.choice(NAMES)}
    nom, prep, clause = rng.choice(TOPICS["ru"])
    docs_in, docs_nom = rng.choice(SOURCES["ru"]["docs_in"]), rng.choice(SOURCES["ru"]["docs_nom"])
    return {"topic": nom, "Topic": _cap(nom), "topic_prep": prep, "clause": clause, "docs_in": docs_in,
            "docs_in_cap": _cap(docs_in), "docs_nom": docs_nom, "docs_nom_cap": _cap(docs_nom),
            "name_ru": rng.choice(NAMES_RU), "street_ru": rng.choice(STREETS_RU)}


def _numbers(rng: random.Random) -> dict[str, str]:
    return {"year": str(rng.randint(1990, 2035)), "n": str(rng.choice([12, 45, 120, 300, 1500, 20000, 3.5])),
            "small": str(rng.randint(2, 40)), "day": str(rng.randint(1, 28))}


def _noisy(text: str, rng: random.Random, rate: float) -> str:
    """Typos, case and punctuation a real answer may carry."""
    if rng.random() >= rate:
        return text
    kind = rng.randrange(6)
    if kind == 0:  # swap two letters inside a word
        words = text.split(" ")
        i = rng.randrange(len(words))
        w = words[i]
        if len(w) > 3:
            j = rng.randrange(1, len(w) - 2)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        return " ".join(words)
    if kind == 1:
        return text.rstrip(".!")
    if kind == 2:
        return text.lower()
    if kind == 3:
        return text.upper() if len(text) < 60 else text
    if kind == 4:
        return text + rng.choice([" 🙂", " 🙏", "!!", " ..."])
    return "  " + text.replace(" ", "  ", 1) + " "


def render_refusal(template: str, language: str, rng: random.Random) -> str:
    return template.format(**_slots(language, rng))


def render_claim(language: str, rng: random.Random) -> tuple[int, str]:
    index = rng.randrange(len(CLAIMS[language]))
    return index, CLAIMS[language][index].format(**_slots(language, rng), **_numbers(rng))


def _wrap(text: str, language: str, rng: random.Random) -> str:
    if rng.random() < 0.35:
        before = rng.choice(WRAP_BEFORE[language])
        text = before + (_lc(text) if before.endswith((", ", "but ")) else text)
    if rng.random() < 0.35:
        text = text + rng.choice(WRAP_AFTER[language])
    return text


def generated_rows(config: AbstentionDataConfig, rng: random.Random, claim_pool: dict[str, list[str]]) -> Iterator[dict]:
    """Refusals, refusal + claim, hedged claims and templated claims in en and ru."""
    for language in LANGUAGES:
        def claim() -> str:
            # Half templated (same topics as the refusals), half real sentences from XQuAD.
            pool = claim_pool.get(language) or []
            if pool and rng.random() < 0.5:
                return rng.choice(pool)
            return render_claim(language, rng)[1]

        for index, template in enumerate(REFUSALS[language]):
            family = f"{language}:refusal:{index}"
            for _ in range(config.refusals_per_family):
                text = render_refusal(template, language, rng)
                if rng.random() < 0.1:  # two refusals in a row are still one refusal
                    other = rng.choice(REFUSALS[language])
                    text = text + " " + render_refusal(other, language, rng)
                yield _row(_noisy(_wrap(text, language, rng), rng, config.noise), 1, language, "refusal", family)
            for _ in range(config.contrasts_per_family):
                refusal = render_refusal(template, language, rng)
                shape = rng.choice(CONTRASTS[language])
                c = claim()
                text = shape.format(refusal=refusal, refusal_stem=refusal.rstrip(".!"), claim=c, claim_lc=_lc(c))
                yield _row(_noisy(text, rng, config.noise), 0, language, "refusal_plus_claim", family)
        for index, hedge in enumerate(HEDGES[language]):
            family = f"{language}:hedge:{index}"
            for _ in range(config.hedged_per_family):
                c = claim()
                yield _row(_noisy(hedge.format(claim_lc=_lc(c)), rng, config.noise), 0, language, "hedged_claim", family)
        for index, template in enumerate(CLAIMS[language]):
            family = f"{language}:claim:{index}"
            for _ in range(config.claims_per_family):
                text = template.format(**_slots(language, rng), **_numbers(rng))
                yield _row(_noisy(_wrap_claim(text, language, rng), rng, config.noise), 0, language, "claim", family)


def _wrap_claim(text: str, language: str, rng: random.Random) -> str:
    # Courtesy around a claim does not make it a refusal.
    if rng.random() < 0.3:
        text = rng.choice(WRAP_BEFORE[language][:5]).replace("Sorry, ", "Sure, ").replace("К сожалению, ", "Конечно, ") + text
    if rng.random() < 0.3:
        text += rng.choice(WRAP_AFTER[language][:4])
    return text


def _row(text: str, label: int, language: str, kind: str, family: str, source: str = "generated") -> dict:
    return {"text": text, "label": label, "language": language, "kind": kind, "family": family, "source": source}


# ----- real responses ----------------------------------------------------------------------------

# A refusal phrase in the opening of the response ...
_REFUSAL = re.compile(
    r"\b(unable to (answer|determine|find|provide)|(cannot|can't|can not|could not|couldn't) (be )?"
    r"(answer|determine|determined|answered|find|provide|say|tell|generate|create|guess|calculate|access)|"
    r"(do not|don't|does not|doesn't) (have|provide|contain|mention|include|know|specify)|am not able to|"
    r"not (mentioned|specified|provided|stated|available|possible to (answer|determine))|"
    r"(no|insufficient|not enough) (information|context|data|details)|"
    r"please provide (more|the|additional)|need more (information|details|context))\b", re.IGNORECASE)
# ... and nothing offered instead: no "however, here is …", no list, no code, no long explanation.
_OFFERS = re.compile(
    r"\b(however|but|here (is|are)|here's|below|following|instead|for example|generally|typically|"
    r"in general|according to|is likely)\b|```|"
    r"\n\s*(\d+[.)]|[-*•])\s",
    re.IGNORECASE)
MAX_REFUSAL_WORDS = 70
# Labels a person set after reading the rule's calls (refusals it missed, claims it took for refusals).
OVERRIDES = Path(__file__).resolve().parent / "samples" / "abstention" / "real_label_overrides.json"


_APOLOGY_BUT = re.compile(r"\b(sorry|apologi[sz]e|afraid),? but\b", re.IGNORECASE)


def real_label(text: str) -> int:
    """1 when a real response declines (a refusal phrase, nothing offered instead, short), else 0."""
    words = len(text.split())
    offers = _OFFERS.search(_APOLOGY_BUT.sub("sorry", text))
    return int(bool(_REFUSAL.search(text[:400])) and not offers and words <= MAX_REFUSAL_WORDS)


def _opening(text: str) -> str:
    return re.sub(r"[^a-zа-я]+", " ", text.lower())[:60].strip()


def _real_row(text: str, ref: str, overrides: dict[str, int]) -> dict:
    label = overrides.get(ref, real_label(text))
    row = _row(text, label, "en", "real_refusal" if label else "real_answer", f"real:{_opening(text)}",
               ref.split(":", 1)[0])
    return {**row, "ref": ref, "label_by": "person" if ref in overrides else "rule"}


def real_rows(config: AbstentionDataConfig) -> Iterator[dict]:
    overrides = {k: int(v) for k, v in json.loads(OVERRIDES.read_text(encoding="utf-8"))["labels"].items()}
    root = Path(config.data_root)
    ragtruth = root / "ragtruth_subset" / "ragtruth_600.jsonl"
    halueval = root / "halueval_general" / "data" / "general_data.json"
    for path in (ragtruth, halueval):
        if not path.is_file():
            raise DataError(f"{path}: missing; set data_root to the folder holding the public datasets")
    with open(ragtruth, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            yield _real_row(record["response"], f"ragtruth:{record['id']}", overrides)
    with open(halueval, encoding="utf-8") as handle:
        for count, line in enumerate(handle):
            if count >= config.halueval_max_rows:
                break
            record = json.loads(line)
            yield _real_row(record["chatgpt_response"], f"halueval:{record['ID']}", overrides)


def xquad_answers(config: AbstentionDataConfig, rng: random.Random) -> tuple[list[dict], dict[str, list[str]]]:
    """Real answers (label 0) and a pool of real claim sentences per language."""
    rows, pool = [], {}
    for language in LANGUAGES:
        path = Path(config.data_root) / "xquad" / f"xquad.{language}.json"
        questions = list(iter_squad(path))
        rng.shuffle(questions)
        sentences = []
        for q in questions:
            sentences.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", q.context) if 30 <= len(s) <= 220)
        pool[language] = sorted(set(sentences))
        for q in questions[: config.real_answers_per_language]:
            answer = q.answers[0]["text"] if q.answers else ""
            if answer:  # short answers ("Paris", "1889") are the commonest non-refusal of all
                rows.append(_row(answer, 0, language, "answer", f"{language}:xquad:{q.article}", "xquad"))
            sentence = next((s for s in re.split(r"(?<=[.!?])\s+", q.context) if 30 <= len(s) <= 300), "")
            if sentence:
                rows.append(_row(sentence, 0, language, "answer", f"{language}:xquad:{q.article}", "xquad"))
    return rows, pool


def build(config: AbstentionDataConfig) -> dict[str, list[dict]]:
    """All rows, split by family (generated, real) with one seeded hash."""
    rng = random.Random(config.seed)
    answers, pool = xquad_answers(config, rng)
    rows = list(generated_rows(config, rng, pool)) + answers + list(real_rows(config))
    splits = grouped_split(rows, lambda r: r["family"], config.fractions, seed=config.seed)
    for name, members in splits.items():
        for index, row in enumerate(members):
            row["id"] = f"{name}-{index}"
            row["split"] = name
    return splits


def prepare_abstention(config: AbstentionDataConfig) -> dict[str, Any]:
    splits = build(config)
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, members in splits.items():
        write_jsonl(out / f"{name}.jsonl", members)
    return write_data_card(
        out, task="abstention", splits=splits,
        breakdowns={"label": lambda r: r["label"], "language": lambda r: r["language"], "kind": lambda r: r["kind"],
                    "source": lambda r: r["source"]},
        sources={"generated": "data_prep/abstention_templates.py (this project)",
                 "ragtruth": f"{config.data_root}/ragtruth_subset/ragtruth_600.jsonl (MIT), labelled by real_label",
                 "halueval": f"{config.data_root}/halueval_general/data/general_data.json (MIT), labelled by real_label",
                 "xquad": f"{config.data_root}/xquad/xquad.{{en,ru}}.json (CC BY-SA 4.0)"},
        config=config.model_dump(),
        notes=["split by family: a refusal template, hedge template, claim template, XQuAD article or the "
               "opening of a real response never spans two splits",
               "real responses carry rule labels (real_label), not human ones",
               "templated hard negatives borrow XQuAD context sentences as claims; they carry the family of "
               "their refusal or hedge template"],
    )
