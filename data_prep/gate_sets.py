"""Labelled gate cases from the public sets in `../shared/datasets`: `autovalidators prepare gate-sets`.

What `benchmark gate` and `calibrate` read. Each line of `dev.jsonl` / `test.jsonl` is a case
(`id`, `question`, `context`, `answer`) with `label` good or bad and `meta`: dataset, task (QA,
Summary, Data2txt), language, kind (why a bad answer is bad) and group. `tone.jsonl` holds texts
alone, neutral or abusive, for the tone check's flag and catch rates.

Answers, and where their labels come from:
- RAGTruth (`ragtruth_600` + `ragtruth_extra_423`, deduplicated by response, rows without context
  dropped): LLM answers; bad = a person marked a hallucinated span. The real thing.
- FaithBench: LLM summaries; bad = an annotator marked an unwanted span.
- XQuAD en/ru, TyDi ru: good = the context sentence that holds the gold answer; bad = that sentence
  with the answer swapped for another question's answer of the same kind (a number for a number),
  or a sentence answering another question from another article (off-topic). Extractive and
  constructed, so friction here is a floor; it is what this repository has in Russian. A swapped
  answer's `meta.unsupported` holds the swapped-in characters (`benchmark heuristic-spans`).
- WikiQA: good = a sentence people judged to answer the question; bad = one from the same article
  that does not (grounded but off the question). Context = the article's sentences.

Written answers (`written_ru_<split>.jsonl`, `written_en_longform_<split>.jsonl`, files of their own
so each can be benchmarked apart and named to `calibrate` beside `dev_real.jsonl`): answers written the way LLMs
answer, faithful (good) or with marked errors (bad), from `samples/fact_spans/` (`fact_spans.written_errors`):
Russian answers to TyDi-ru questions, split as TyDi-ru's articles are here, and English long-form
answers over TyDi-en articles, split by article.

Tone texts: neutral sentences of XQuAD, SQuAD2 and TyDi-ru contexts and RAGTruth answers, abusive
OLID, Davidson and Russian toxic comments (`tone_texts`), 50 ordinary assistant answers a
language on sensitive subjects, written for this project (`samples/tone/ordinary_answers.jsonl`),
150 more a language by other writers, half on such subjects and half mundane
(`samples/tone/ordinary_answers_v2.jsonl`), about 150 more a language of the same kind written
later still (`samples/tone/ordinary_answers_v3.jsonl`), and Russian forum and Q&A messages every annotator of
the s-nlp appropriateness set called appropriate, from the text groups the tone prep holds out
(`appropriate_unseen`).

Splits are by group (source document / question), half and half by a stable hash, so no source is
in both: `calibrate` fits on dev (the shipped config on `dev_real.jsonl` and the two written dev files),
`benchmark gate` reports test.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from autovalidators.inference.text import language_of, split_sentences

from .fact_spans.converters import read_faithbench, read_ragtruth_subset, read_squad
from .fact_spans.schema import SpanLabel
from .fact_spans.written_errors import WRITTEN_SETS, read_written_errors
from .io import read_jsonl
from .squad import iter_squad

DATASETS = Path("../shared/datasets")
# Answers written by LLMs or people and judged by people: what the shipped gate config is fitted on
# (`dev_real.jsonl`). The constructed XQuAD/TyDi answers only measure.
REAL_ANSWERS = ("ragtruth", "faithbench", "wikiqa")
APPROPRIATENESS = Path("ru_sensitive_topics") / "Version1" / "appropriateness"
ORDINARY_ANSWERS = Path(__file__).parent / "samples" / "tone" / "ordinary_answers.jsonl"
# 150 a language more, written later by separate writers (2026-12-07): 50 a language cannot tell a
# 0.5% flag rate from 4% (one answer is 2%).
ORDINARY_ANSWERS_V2 = ORDINARY_ANSWERS.with_name("ordinary_answers_v2.jsonl")
ORDINARY_ANSWERS_V3 = ORDINARY_ANSWERS.with_name("ordinary_answers_v3.jsonl")
TYDIQA_RU = Path("tydiqa_goldp") / "language_data" / "russian" / "russian_tydiqa_dev.json"
_NUMBER = re.compile(r"\d")
# Lengths (characters) of a text the tone check is measured on, or trained on from these sources.
TONE_TEXT_LENGTH = range(20, 601)


def split_of(group: str) -> str:
    """dev or test, by a stable hash of the group key (the same on every machine and run)."""
    return "dev" if hashlib.sha1(group.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def squad_paragraphs_by_split(path: Path, source: str, language: str) -> dict[str, list[str]]:
    """A SQuAD-format file's paragraphs on each side of the gate sets' split (`split_of` of the
    paragraph's group, as its QA cases are split). "test" leaves out paragraphs of an article that
    also has a "dev" paragraph, so text trained on from the dev side (the tone source
    `tydiqa_ru_sentences`) shares no article with the held-out side the tone check is measured on."""
    paragraphs = {item.context: item for item in read_squad(path, source=source, language=language).records}
    title = {q.context: q.title for q in iter_squad(path)}
    sides: dict[str, list[str]] = {"dev": [], "test": []}
    for context, item in paragraphs.items():
        sides[split_of(item.group_keys[-1])].append(context)
    dev_titles = {title[c] for c in sides["dev"]}
    sides["test"] = [c for c in sides["test"] if title[c] not in dev_titles]
    return sides


def side_sentences(paragraphs: Iterable[str]) -> list[str]:
    """The sentences of `paragraphs` a tone text may be (TONE_TEXT_LENGTH characters), stripped."""
    texts = (x.text.strip() for c in paragraphs for x in split_sentences(c))
    return [t for t in texts if len(t) in TONE_TEXT_LENGTH]


def _case(case_id: str, question: str, context: str, answer: str, label: str, *, dataset: str, task: str,
          language: str, kind: str, group: str) -> dict[str, Any]:
    return {"id": case_id, "question": question, "context": context, "answer": answer, "label": label,
            "meta": {"dataset": dataset, "task": task, "language": language, "kind": kind, "group": group}}


def ragtruth_cases(root: Path) -> Iterable[dict[str, Any]]:
    folder = root / "ragtruth_subset"
    seen: set[str] = set()
    # The extra file first: 132 of its responses are also in the 600 file, there without context.
    for name in ("ragtruth_extra_423.jsonl", "ragtruth_600.jsonl"):
        for record in read_ragtruth_subset(folder / name).records:
            if not record.context.strip() or record.answer in seen:
                continue
            seen.add(record.answer)
            bad = any(s.label is SpanLabel.HALLUCINATION for s in record.spans)
            yield _case(record.id, record.question, record.context, record.answer, "bad" if bad else "good",
                        dataset="ragtruth", task=record.task_type.value, language="en",
                        kind="hallucinated" if bad else "faithful", group=record.group)


def faithbench_cases(root: Path, limit: int) -> Iterable[dict[str, Any]]:
    records = read_faithbench(root / "faithbench" / "data_for_release").records
    for record in random.Random(0).sample(records, min(limit, len(records))):
        bad = any(s.label is SpanLabel.HALLUCINATION for s in record.spans)
        yield _case(record.id, record.question, record.context, record.answer, "bad" if bad else "good",
                    dataset="faithbench", task="Summary", language="en",
                    kind="hallucinated" if bad else "faithful", group=record.group)


def _sentence_with(context: str, start: int, end: int) -> str:
    """The context's sentence (or run of sentences, when the answer spans several) around [start, end)."""
    sentences = split_sentences(context)
    first = next((x for x in sentences if x.end > start), None)
    last = next((x for x in reversed(sentences) if x.start < end), None)
    return context[first.start:last.end].strip() if first and last else context.strip()


def reading_cases(path: Path, source: str, language: str, limit: int) -> Iterable[dict[str, Any]]:
    """Per question: the gold sentence (good), then alternately a swapped answer or an off-topic one.
    Every third question also meets a retrieval miss (another article's paragraph as context), where
    the gold sentence, asserted without support, is bad. (A refusal there is not labelled good: the
    gate's policy sends it to REVIEW poor_retrieval, to retrieve again, by design.)"""
    items = [i for i in read_squad(path, source=source, language=language, parallel_key=source == "xquad").records
             if len(i.answer) >= 2]
    rng = random.Random(f"{source}-{language}")
    rng.shuffle(items)
    numeric = [i for i in items if _NUMBER.search(i.answer)]
    wordy = [i for i in items if not _NUMBER.search(i.answer)]
    for index, item in enumerate(items[:limit]):
        group = item.group_keys[-1]
        sentence = _sentence_with(item.context, item.answer_start, item.answer_start + len(item.answer))
        common = dict(dataset=source, task="QA", language=language, group=group)
        yield _case(f"{item.id}-gold", item.question, item.context, sentence, "good", kind="extractive", **common)
        if index % 2 == 0:
            pool = numeric if _NUMBER.search(item.answer) else wordy
            other = next((o for o in (rng.choice(pool) for _ in range(20))
                          if o.answer.lower() not in item.context.lower()), None)
            if other is not None and item.answer in sentence:
                at = sentence.index(item.answer)
                swapped = sentence[:at] + other.answer + sentence[at + len(item.answer):]
                case = _case(f"{item.id}-swap", item.question, item.context, swapped, "bad", kind="swapped", **common)
                case["meta"]["unsupported"] = [[at, at + len(other.answer)]]  # the swapped-in answer's characters
                yield case
        else:
            other = next((o for o in (rng.choice(items) for _ in range(20)) if o.group_keys[-1] != group), None)
            if other is not None:
                answer = _sentence_with(other.context, other.answer_start, other.answer_start + len(other.answer))
                yield _case(f"{item.id}-off", item.question, item.context, answer, "bad", kind="off_topic", **common)
        if index % 3 == 0:
            other = next((o for o in (rng.choice(items) for _ in range(20)) if o.group_keys[-1] != group), None)
            if other is not None:
                yield _case(f"{item.id}-miss-assert", item.question, other.context, sentence, "bad",
                            kind="should_abstain", **common)


def wikiqa_cases(root: Path, limit: int) -> Iterable[dict[str, Any]]:
    path = root / "wikiqa" / "WikiQA_data" / "WikiQA-dev.tsv"
    by_question: dict[str, list[dict[str, str]]] = defaultdict(list)
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            by_question[row["QuestionID"]].append(row)
    questions = sorted(q for q, rows in by_question.items() if any(r["Label"] == "1" for r in rows)
                       and any(r["Label"] == "0" for r in rows))
    rng = random.Random("wikiqa")
    for qid in rng.sample(questions, min(limit, len(questions))):
        rows = by_question[qid]
        context = " ".join(r["Sentence"] for r in rows)
        good = next(r for r in rows if r["Label"] == "1")
        bad = rng.choice([r for r in rows if r["Label"] == "0"])
        common = dict(dataset="wikiqa", task="QA", language="en", group=f"wikiqa:{rows[0]['DocumentID']}")
        yield _case(f"wikiqa-{qid}-good", good["Question"], context, good["Sentence"], "good", kind="answers", **common)
        yield _case(f"wikiqa-{qid}-bad", bad["Question"], context, bad["Sentence"], "bad", kind="off_topic", **common)


def stable_sample(texts: Iterable[str], size: int, *, salt: str) -> list[str]:
    """The `size` distinct texts of lowest salted hash. Unlike a random draw over the list, a change
    to some texts (how `split_sentences` cuts a context, say) moves only those in or out of the sample."""
    return sorted(set(texts), key=lambda t: hashlib.sha256(f"{salt}\n{t}".encode()).hexdigest())[:size]


def tone_unseen(texts: Iterable[str], source: str, config: Any) -> list[str]:
    """The `texts` of tone source `source` that its data prep never trains or tunes on: those whose
    text group (`tone.records.text_group`) it holds out as a benchmark (`holdout_fraction`) or puts in
    its test split. Both are a hash of the group, so they are computed here without the prep."""
    from .splits import grouped_split
    from .tone.records import text_group

    by_group: dict[str, list[str]] = {}
    for text in texts:
        by_group.setdefault(text_group(text), []).append(text)
    groups, seed = list(by_group), config.splits.seed
    unseen: list[str] = []
    fraction = config.sources[source].holdout_fraction
    if fraction > 0:
        parts = grouped_split(groups, str, {"keep": 1 - fraction, "holdout": fraction}, seed=seed, allow_empty=True)
        unseen += parts["holdout"]
        groups = parts["keep"]
    unseen += grouped_split(groups, str, config.splits.fractions, seed=seed, allow_empty=True).get("test", [])
    return [text for group in unseen for text in by_group[group]]


def tone_texts(root: Path, neutral_per_set: int, abusive_per_set: int) -> Iterable[dict[str, Any]]:
    """Neutral sentences (encyclopaedic contexts, LLM answers) and abusive ones, per language.
    Neutral sets are sampled five times larger than abusive ones: the bound on neutral flags is 0.5%
    per language, one text in 200, so 200 neutral texts a set could not tell 0.5% from 2%.

    None is a text the shipped tone model was trained or tuned on (configs/tone.yaml): the Davidson
    and OLID texts come from what the tone data prep holds out (`tone_unseen`), and no English
    sentence is one of QNLI's, which are SQuAD's and a neutral training source. Until 2026-12-06
    they were not filtered: 357 of the 400 English abusive texts (339 trained or tuned on) and 232 of
    the 2,000 XQuAD/SQuAD2 sentences were rows of the tone data."""
    from .tone.config import load_tone_config
    from .tone.records import text_group

    tone_config = load_tone_config()
    with open(root / "qnli_dev" / "data" / "QNLI" / "dev.tsv", encoding="utf-8") as handle:
        qnli = {text_group(r["sentence"]) for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}

    def sample(texts: list[str], label: str, dataset: str, language: str) -> Iterable[dict[str, Any]]:
        texts = [t.strip() for t in texts if len(t.strip()) in TONE_TEXT_LENGTH]
        if language == "en":
            texts = [t for t in texts if text_group(t) not in qnli]
        per_set = neutral_per_set if label == "neutral" else abusive_per_set
        for index, text in enumerate(stable_sample(texts, per_set, salt=dataset)):
            yield {"id": f"{dataset}-{index}", "text": text, "label": label, "dataset": dataset, "language": language}

    def sentences(path: Path, language: str, source: str) -> list[str]:
        contexts = {i.context for i in read_squad(path, source=source, language=language).records}
        return [x.text for c in contexts for x in split_sentences(c)]

    yield from sample(sentences(root / "xquad" / "xquad.en.json", "en", "xquad"), "neutral", "xquad_en", "en")
    yield from sample(sentences(root / "squad2_dev_half_cs224n" / "data" / "dev-v2.0.json", "en", "squad2"),
                      "neutral", "squad2_en", "en")
    ragtruth = [row["response"] for row in read_jsonl(root / "ragtruth_subset" / "ragtruth_600.jsonl")]
    yield from sample(ragtruth, "neutral", "ragtruth_answers_en", "en")
    yield from sample(sentences(root / "xquad" / "xquad.ru.json", "ru", "xquad"), "neutral", "xquad_ru", "ru")
    with open(root / "olid_en" / "data" / "olid-training-v1.0.tsv", encoding="utf-8") as handle:
        olid = [r["tweet"] for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
                if r["subtask_a"] == "OFF" and r["subtask_b"] == "TIN"]
    yield from sample(tone_unseen(olid, "olid", tone_config), "abusive", "olid_targeted_insult_en", "en")
    with open(root / "davidson_hate" / "data" / "labeled_data.csv", encoding="utf-8") as handle:
        hate = [r["tweet"] for r in csv.DictReader(handle) if r["class"] == "0"]
    yield from sample(tone_unseen(hate, "davidson", tone_config), "abusive", "davidson_hate_en", "en")
    with open(root / "ru_toxic_2ch_pikabu" / "data" / "val.csv", encoding="utf-8") as handle:
        toxic = [r["comment"] for r in csv.DictReader(handle) if r["labels"].strip().startswith("1")]
    yield from sample(toxic, "abusive", "ru_toxic_val_ru", "ru")
    # TyDi-ru: the held-out side only, as the tone model trains on the dev side (`tydiqa_ru_sentences`
    # in configs/tone.yaml). Sampled last: a change to this side moves no other set's sample.
    tydiqa = squad_paragraphs_by_split(root / TYDIQA_RU, "tydiqa", "ru")["test"]
    yield from sample(side_sentences(tydiqa), "neutral", "tydiqa_ru", "ru")
    # Answers an assistant gives every day on subjects a topic filter would stop (first aid, crime
    # news, sex education, drugs, religion, war history, peoples, butchery, `kill -9`), 50 a language,
    # written for this project and in no training file: the genre the encyclopaedic sets above lack.
    yield from read_jsonl(ORDINARY_ANSWERS)
    # Russian forum and Q&A messages judged appropriate (medical questions, advice, crime talk), the
    # rows `ru_appropriate` in configs/tone.yaml trains on, from both files of the set and only the
    # text groups the tone prep puts in its test split: the register of the toxic comments, none abusive.
    yield from sample(appropriate_unseen(root, tone_config), "neutral", "appropriate_forum_ru", "ru")
    # 150 ordinary answers a language more (datasets `ordinary_answers_v2_en/_ru`), by writers who saw
    # neither the training instructions nor the answers above; last, so no sample above moves.
    yield from read_jsonl(ORDINARY_ANSWERS_V2)
    # About 150 a language more (`ordinary_answers_v3_en/_ru`), written after seven tone candidates had
    # seen the sets above, so the next candidate meets answers no choice was made on; last again.
    yield from read_jsonl(ORDINARY_ANSWERS_V3)


def appropriate_unseen(root: Path, tone_config: Any) -> list[str]:
    """The appropriateness set's rows that `ru_appropriate` (configs/tone.yaml) keeps, from both of its
    files, in the text groups the tone prep never trains or tunes on. The same bounds as the tone prep
    (`SourceSpec.keeps_row`): a cell that is no number stops the build with its file, line and column."""
    spec = tone_config.sources["ru_appropriate"]
    texts = []
    for name in ("val.csv", "test.csv"):
        path = root / APPROPRIATENESS / name
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            texts += [row["text"] for row in reader if spec.keeps_row(row, f"{path}:{reader.line_num}")]
    return tone_unseen(texts, "ru_appropriate", tone_config)


def written_cases(split: str, name: str = "written/ru") -> list[dict[str, Any]]:
    """The written answers of one set (`WRITTEN_SETS`) and `split` as gate cases (bad: the writer
    marked an error; `meta.error_kinds` says which kinds)."""
    dataset = name.replace("/", "_")
    cases = []
    for record in read_written_errors(WRITTEN_SETS[name], split=split):
        bad = bool(record["errors"])
        case = _case(record["id"], record["question"], record["context"], record["answer"], "bad" if bad else "good",
                     dataset=dataset, task="QA", language=language_of(record["answer"]),
                     kind="hallucinated" if bad else "faithful", group=record["title"])
        case["meta"]["error_kinds"] = sorted({e["kind"] for e in record["errors"]})
        cases.append(case)
    return cases


def build_gate_sets(out: Path, root: Path = DATASETS, *, per_reading_set: int = 150, faithbench: int = 300,
                    wikiqa: int = 120, tone_neutral_per_set: int = 1000, tone_abusive_per_set: int = 200
                    ) -> dict[str, Any]:
    """Writes dev.jsonl (and its real answers alone, dev_real.jsonl), test.jsonl, tone.jsonl and the
    written answers (`<set>_<split>.jsonl` per WRITTEN_SETS) under `out`; returns counts per split and set."""
    out.mkdir(parents=True, exist_ok=True)
    cases = [*ragtruth_cases(root), *faithbench_cases(root, faithbench),
             *reading_cases(root / "xquad" / "xquad.en.json", "xquad", "en", per_reading_set),
             *reading_cases(root / "xquad" / "xquad.ru.json", "xquad", "ru", per_reading_set),
             *reading_cases(root / TYDIQA_RU,
                            "tydiqa", "ru", per_reading_set),
             *wikiqa_cases(root, wikiqa)]
    counts: dict[str, Any] = {}
    for split in ("dev", "test"):
        rows = [c for c in cases if split_of(c["meta"]["group"]) == split]
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        if split == "dev":
            with open(out / "dev_real.jsonl", "w", encoding="utf-8") as handle:
                for row in rows:
                    if row["meta"]["dataset"] in REAL_ANSWERS:
                        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        tally: dict[str, int] = defaultdict(int)
        for row in rows:
            tally[f"{row['meta']['dataset']}/{row['meta']['language']}/{row['label']}"] += 1
        counts[split] = dict(sorted(tally.items()))
        for name in WRITTEN_SETS:
            written = written_cases(split, name)
            stem = f"{name.replace('/', '_')}_{split}"
            with open(out / f"{stem}.jsonl", "w", encoding="utf-8") as handle:
                for row in written:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            counts[stem] = {label: sum(c["label"] == label for c in written) for label in ("good", "bad")}
    texts = list(tone_texts(root, tone_neutral_per_set, tone_abusive_per_set))
    with open(out / "tone.jsonl", "w", encoding="utf-8") as handle:
        for row in texts:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts["tone"] = len(texts)
    (out / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return counts
