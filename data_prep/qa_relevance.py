"""Question–answer relevance pairs: (question, answer, label, source, group, language).

Sources and how each becomes pairs:
- WikiQA (answer-sentence selection): its own 0/1 labels. WikiQA **dev** is the benchmark and is
  written to `wikiqa_dev.jsonl` only; its questions are removed from every other split.
- QNLI dev: `entailment` = the sentence answers the question (1), else 0.
- SQuAD-format sets (XQuAD en/ru, TyDi GoldP en/ru, SQuAD2 dev half): the context sentence holding
  the answer is a positive; other sentences of the same context are hard negatives; the answer
  sentence of a question about another context is an easy negative; SQuAD2 unanswerable questions
  give the sentence holding their *plausible* answer as a (hard) negative.
- User data: JSONL or CSV with a column mapping (e.g. support chats: question, reply, label).

Pairs are deduplicated on (normalised question, normalised answer), split by question with
`grouped_split`, and described by a data card.
"""

from __future__ import annotations

import csv
import logging
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Literal

from pydantic import Field

from autovalidators.inference.config import StrictModel
from autovalidators.inference.text import language_of, split_sentences

from .data_card import write_data_card
from .io import DataError, iter_jsonl, write_jsonl
from .splits import grouped_split
from .squad import iter_squad

logger = logging.getLogger(__name__)

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


class SquadSource(StrictModel):
    """A SQuAD-format JSON file (v1 or v2)."""

    name: str
    path: str
    language: Literal["en", "ru", "auto"] = "auto"


class UserSource(StrictModel):
    """Your own pairs, e.g. support chats: one row per (question, reply) with a 0/1 label."""

    name: str
    path: str
    format: Literal["jsonl", "csv"] = "jsonl"
    # Column (JSONL key) names in your file for each field we need.
    question: str = "question"
    answer: str = "answer"
    label: str = "label"
    language: Literal["en", "ru", "auto"] = "auto"


class QARelevancePrepareConfig(StrictModel):
    """How `autovalidators prepare qa-relevance` builds its pairs; every default explained."""

    # WikiQA folder holding WikiQASent-train.txt and WikiQA-dev.tsv (None = skip WikiQA).
    wikiqa_dir: str | None = str(DATASETS / "wikiqa" / "WikiQA_data")
    # Keep only WikiQA train questions with at least one correct sentence: questions without any
    # add thousands of negatives that teach little and cost CPU time.
    wikiqa_only_answered: bool = True
    # GLUE QNLI dev.tsv (None = skip).
    qnli_path: str | None = str(DATASETS / "qnli_dev" / "data" / "QNLI" / "dev.tsv")
    squad_sources: list[SquadSource] = [
        SquadSource(name="xquad_en", path=str(DATASETS / "xquad" / "xquad.en.json"), language="en"),
        SquadSource(name="xquad_ru", path=str(DATASETS / "xquad" / "xquad.ru.json"), language="ru"),
        SquadSource(name="tydi_en_train",
                    path=str(DATASETS / "tydiqa_goldp/language_data/english/english_tydiqa_train.json"),
                    language="en"),
        SquadSource(name="tydi_en_dev",
                    path=str(DATASETS / "tydiqa_goldp/language_data/english/english_tydiqa_dev.json"),
                    language="en"),
        SquadSource(name="tydi_ru_dev",
                    path=str(DATASETS / "tydiqa_goldp/language_data/russian/russian_tydiqa_dev.json"),
                    language="ru"),
        SquadSource(name="squad2_dev_half",
                    path=str(DATASETS / "squad2_dev_half_cs224n/data/dev-v2.0.json"), language="en"),
    ]
    user_sources: list[UserSource] = []
    # Other sentences of the same context per question (hard negatives); more = harder, slower.
    hard_negatives: int = Field(2, ge=0)
    # Answer sentences of other questions per question (easy negatives: clearly off topic).
    easy_negatives: int = Field(1, ge=0)
    # Cap on pairs per source (None = all): keeps one big source from drowning the others.
    max_pairs_per_source: dict[str, int] = {}
    # Share of questions per split; split by question so no question is in two splits.
    fractions: dict[str, float] = {"train": 0.85, "dev": 0.075, "test": 0.075}
    seed: int = 13
    output_dir: str = "prepared/qa_relevance"


@dataclass
class Pair:
    question: str
    answer: str
    label: int
    source: str
    group: str
    language: str
    qid: str = ""


def normalize(text: str) -> str:
    """Lower-case, spaces collapsed, spaces before punctuation dropped: WikiQA's tokenised text
    and the same sentence elsewhere then compare equal."""
    text = re.sub(r"\s+", " ", text.strip().lower())
    return re.sub(r"\s+([?.!,;:)'])", r"\1", text)


def _lang(language: str, text: str) -> str:
    return language_of(text) if language == "auto" else language


def _pair(question: str, answer: str, label: int, source: str, language: str, qid: str = "") -> Pair:
    return Pair(question.strip(), answer.strip(), int(label), source, normalize(question),
                _lang(language, question), qid)


def read_wikiqa_train(folder: Path, only_answered: bool) -> list[Pair]:
    """WikiQASent-train.txt: question TAB sentence TAB label."""
    path = folder / "WikiQASent-train.txt"
    by_question: dict[str, list[Pair]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[2] not in ("0", "1"):
                raise DataError(f"{path}:{number}: expected question<TAB>sentence<TAB>0|1")
            by_question.setdefault(parts[0], []).append(_pair(parts[0], parts[1], int(parts[2]), "wikiqa_train", "en"))
    return [p for pairs in by_question.values() if not only_answered or any(p.label for p in pairs) for p in pairs]


def read_wikiqa_dev(folder: Path) -> list[Pair]:
    """WikiQA-dev.tsv (header: QuestionID Question ... Sentence Label): the benchmark set."""
    path = folder / "WikiQA-dev.tsv"
    pairs = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for number, row in enumerate(reader, start=2):
            try:
                pairs.append(_pair(row["Question"], row["Sentence"], int(row["Label"]), "wikiqa_dev", "en",
                                   qid=row["QuestionID"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{path}:{number}: bad WikiQA row ({exc})") from None
    return pairs


def read_qnli(path: Path) -> list[Pair]:
    pairs = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for number, row in enumerate(reader, start=2):
            label = row.get("label")
            if label not in ("entailment", "not_entailment") or not row.get("question"):
                raise DataError(f"{path}:{number}: expected question, sentence, label (entailment|not_entailment)")
            pairs.append(_pair(row["question"], row["sentence"], int(label == "entailment"), "qnli_dev", "en"))
    return pairs


def _sentence_at(sentences, char: int) -> int | None:
    for index, sentence in enumerate(sentences):
        if sentence.start <= char < sentence.end:
            return index
    return None


def read_squad(source: SquadSource, hard_negatives: int, rng: random.Random) -> list[Pair]:
    """Answer sentence → positive, other sentences → hard negatives, SQuAD2 plausible → negative.

    Easy negatives (other questions' answers) are added later over all sources at once.
    """
    pairs = []
    sentences_of: dict[tuple[int, int], list] = {}
    for qa in iter_squad(source.path):
        key = (qa.article, qa.paragraph)
        if key not in sentences_of:
            sentences_of[key] = split_sentences(qa.context)
        sentences = sentences_of[key]
        answers = qa.plausible_answers if qa.is_impossible else qa.answers
        hits = {_sentence_at(sentences, a["answer_start"]) for a in answers} - {None}
        if not hits:
            continue  # answer offsets outside any sentence: nothing reliable to pair
        for index in sorted(hits):
            pairs.append(_pair(qa.question, sentences[index].text, 0 if qa.is_impossible else 1, source.name,
                               source.language, qid=qa.id))
        if qa.is_impossible:
            continue  # the plausible sentence is the hard negative; others add little
        others = [s.text for i, s in enumerate(sentences) if i not in hits and len(s.text) > 20]
        for text in rng.sample(others, min(hard_negatives, len(others))):
            pairs.append(_pair(qa.question, text, 0, source.name, source.language, qid=qa.id))
    return pairs


def _rows(source: UserSource) -> Iterator[tuple[int, dict | None, str | None]]:
    """`(line number, row, problem)` per row of a user file; CSV rows number from 2 (after the header)."""
    path = Path(source.path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (user source {source.name!r})")
    if source.format == "jsonl":
        yield from iter_jsonl(path)
        return
    with open(path, encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.DictReader(handle), start=2):
            yield number, row, None


def read_user_source(source: UserSource) -> tuple[list[Pair], list[str]]:
    """Pairs from your file via the column mapping; bad rows are skipped and reported, not fatal."""
    pairs, errors = [], []
    for number, row, problem in _rows(source):
        where = f"{source.path}:{number}"
        if problem is not None:
            errors.append(f"{where}: {problem}")
            continue
        try:
            question, answer, label = row[source.question], row[source.answer], row[source.label]
        except (KeyError, TypeError) as exc:
            errors.append(f"{where}: missing field {exc} (columns mapped: question={source.question!r}, "
                          f"answer={source.answer!r}, label={source.label!r})")
            continue
        label_text = str(label).strip().lower()
        if label_text not in ("0", "1", "true", "false"):
            errors.append(f"{where}: field {source.label!r} must be 0/1 or true/false, got {label!r}")
            continue
        if not str(question).strip() or not str(answer).strip():
            errors.append(f"{where}: empty {source.question!r} or {source.answer!r}")
            continue
        pairs.append(_pair(str(question), str(answer), int(label_text in ("1", "true")), source.name, source.language))
    return pairs, errors


def add_easy_negatives(pairs: list[Pair], per_question: int, rng: random.Random) -> list[Pair]:
    """For SQuAD-style questions, pair a positive answer of a different question as a negative."""
    positives = [p for p in pairs if p.label == 1]
    if per_question == 0 or len(positives) < 2:
        return []
    questions = {p.group: p for p in positives if p.source not in ("wikiqa_train", "qnli_dev")}
    extra = []
    for group, pair in questions.items():
        for _ in range(per_question):
            other = rng.choice(positives)
            if other.group != group and other.language == pair.language:
                extra.append(Pair(pair.question, other.answer, 0, pair.source, group, pair.language, pair.qid))
    return extra


def deduplicate(pairs: Iterable[Pair]) -> tuple[list[Pair], int, int]:
    """First copy of each (question, answer) wins; returns pairs, duplicates, label conflicts."""
    seen: dict[tuple[str, str], Pair] = {}
    duplicates = conflicts = 0
    for pair in pairs:
        key = (pair.group, normalize(pair.answer))
        if key in seen:
            duplicates += 1
            conflicts += seen[key].label != pair.label
            continue
        seen[key] = pair
    return list(seen.values()), duplicates, conflicts


def _cap(pairs: list[Pair], caps: dict[str, int], rng: random.Random) -> list[Pair]:
    """Keeps whole questions of a capped source until its cap, so ranking structure survives."""
    kept = []
    for source in sorted({p.source for p in pairs}):
        members = [p for p in pairs if p.source == source]
        cap = caps.get(source)
        if cap is None or len(members) <= cap:
            kept += members
            continue
        groups: dict[str, list[Pair]] = {}
        for p in members:
            groups.setdefault(p.group, []).append(p)
        order = sorted(groups)
        rng.shuffle(order)
        taken: list[Pair] = []
        for group in order:
            if len(taken) >= cap:
                break
            taken += groups[group]
        kept += taken
    return kept


def build_pairs(config: QARelevancePrepareConfig) -> tuple[dict[str, list[Pair]], dict]:
    """All splits (train/dev/test + wikiqa_dev benchmark) and statistics for the data card."""
    rng = random.Random(config.seed)
    pairs: list[Pair] = []
    benchmark: list[Pair] = []
    notes: list[str] = []
    if config.wikiqa_dir:
        folder = Path(config.wikiqa_dir)
        pairs += read_wikiqa_train(folder, config.wikiqa_only_answered)
        benchmark = read_wikiqa_dev(folder)
    if config.qnli_path:
        pairs += read_qnli(Path(config.qnli_path))
    for source in config.squad_sources:
        pairs += read_squad(source, config.hard_negatives, rng)
    for source in config.user_sources:
        user_pairs, errors = read_user_source(source)
        pairs += user_pairs
        for error in errors:
            logger.warning("skipped bad row: %s", error)
        if errors:
            notes.append(f"{source.name}: {len(errors)} bad row(s) skipped, first: {errors[0]}")
    pairs += add_easy_negatives(pairs, config.easy_negatives, rng)
    pairs, duplicates, conflicts = deduplicate(pairs)
    # The benchmark's questions must never be trained on, whatever source they came from.
    held_out = {p.group for p in benchmark}
    leaked = sum(p.group in held_out for p in pairs)
    pairs = [p for p in pairs if p.group not in held_out]
    pairs = _cap(pairs, config.max_pairs_per_source, rng)
    splits = grouped_split(pairs, lambda p: p.group, config.fractions, seed=config.seed)
    if benchmark:
        splits["wikiqa_dev"] = benchmark
    notes += [f"{duplicates} duplicate pairs dropped ({conflicts} with conflicting labels; first copy kept)",
              f"{leaked} pairs whose question is a WikiQA dev question were removed (benchmark kept clean)"]
    return splits, {"duplicates": duplicates, "conflicts": conflicts, "benchmark_leaks_removed": leaked,
                    "notes": notes}


def prepare(config: QARelevancePrepareConfig) -> dict:
    """Builds the pairs, writes `<split>.jsonl` files and the data card; returns the card."""
    splits, stats = build_pairs(config)
    out = Path(config.output_dir)
    for name, rows in splits.items():
        write_jsonl(out / f"{name}.jsonl", (asdict(p) for p in rows))
    sources = {s.name: s.path for s in config.squad_sources} | {s.name: s.path for s in config.user_sources}
    if config.wikiqa_dir:
        sources["wikiqa"] = f"{config.wikiqa_dir} (Microsoft Research data licence)"
    if config.qnli_path:
        sources["qnli_dev"] = f"{config.qnli_path} (GLUE terms)"
    return write_data_card(
        out, task="qa_relevance", splits=splits,
        breakdowns={"label": lambda p: p.label, "source": lambda p: p.source, "language": lambda p: p.language},
        sources=sources, config=config.model_dump(mode="json"), notes=stats["notes"],
    )
