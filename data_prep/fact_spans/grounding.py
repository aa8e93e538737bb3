"""`autovalidators prepare grounding`: judged texts -> answer records and cross-encoder pairs.

Writes into `out_dir`:
- `answers/{train,dev,test}.jsonl`: one judged text per line (`JudgedText` fields) for the
  sentence combiner; `unsupported` holds character ranges for span-granular sets only.
- `heldout/{ragtruth,faithbench}.jsonl`: span records never trained on (`SpanRecord` format,
  the same held-out split as `prepare fact-spans` with the same seed); the benchmark reads them.
- `pairs/{train,dev}.jsonl`: `{evidence, claim, label, source, group}` for the cross-encoder:
  every NLI pair, and every judged claim with its best context chunk as evidence
  (`inference.grounding`), labels balanced per source.
- `data_card.json` / `DATA_CARD.md`: rows per set, split, granularity and label.

How a judged text becomes sentence claims (`sentence_claims`): a span-granular text labels each
sentence by whether it overlaps an unsupported range; a supported response labels every sentence
supported; an unsupported response of one sentence labels it, of several labels only its least
supported sentence (the others are unknown, so left out). Splits are grouped by source document.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Iterable, Sequence

from pydantic import Field

from autovalidators.inference.config import StrictModel
from autovalidators.inference.grounding import ContextIndex, SentenceSignals, sentence_signals
from autovalidators.inference.text import content_stems

from ..data_card import write_data_card
from ..io import DataError, write_jsonl
from ..splits import grouped_split
from .build import read_sources
from .config import FactSpansPrepConfig, FaithBenchSource, RagTruthSource
from .judged import (LICENCES, Judged, JudgedText, read_begin, read_binary_nli, read_esnli, read_faithdial,
                     read_fib, read_summedits, read_wice_claims, read_wice_tokens, read_xsumfaith)
from .schema import SpanLabel, SpanRecord

logger = logging.getLogger(__name__)
ROOT = "../shared/datasets"


class GroundingSources(StrictModel):
    """Paths of the judged sets (null skips one)."""

    xsumfaith: str | None = f"{ROOT}/xsum_hallucination/xsumfaith_joined_with_docs.jsonl"
    wice_tokens: str | None = f"{ROOT}/wice/data/non_supported_tokens"
    wice_claims: str | None = f"{ROOT}/wice/data/entailment_retrieval/claim"
    summedits: str | None = f"{ROOT}/summedits/data/summedits"
    # Read an inconsistent summary's edit (its diff from `original_summary`) as its unsupported span,
    # so SummEdits teaches where, not only whether. Off by default: the shipped recipe predates it.
    summedits_spans: bool = False
    fib: str | None = f"{ROOT}/fib/multiple_choice-dataset"
    begin: str | None = f"{ROOT}/begin"
    faithdial: str | None = f"{ROOT}/faithdial_audit/data-audit"
    docnli: str | None = f"{ROOT}/docnli_repo_nli/Data"
    esnli: str | None = f"{ROOT}/snli_devtest/dataset/eSNLI"


class GroundingPrepareConfig(StrictModel):
    seed: int = Field(13, description="one seed for holding out and splitting")
    out_dir: str = "prepared/grounding"
    ragtruth: RagTruthSource = RagTruthSource()
    # Half of FaithBench's documents are trained on now; the other half stays held out.
    faithbench: FaithBenchSource = FaithBenchSource(heldout_fraction=0.5)
    sources: GroundingSources = GroundingSources()
    splits: dict[str, float] = {"train": 0.8, "dev": 0.1, "test": 0.1}
    # The trainable RAGTruth rows are the target domain: a larger dev share picks thresholds.
    ragtruth_splits: dict[str, float] = {"train": 0.6, "dev": 0.4}
    max_nli_pairs: dict[str, int] = Field(
        default_factory=lambda: {"fever_nli": 3000, "mnli": 4000, "esnli": 3000, "mctest_nli": 1500},
        description="NLI pairs per set in pairs/train (the rest unused); dev gets a tenth")
    max_claim_pairs: int = Field(6000, description="judged-claim pairs per source in pairs/train, at most")
    max_majority_ratio: float = Field(1.5, description="per source, the larger label is cut to this times the smaller")


def span_record_as_judged(record: SpanRecord) -> JudgedText:
    unsupported = [(s.start, s.end) for s in record.spans if s.label is SpanLabel.HALLUCINATION]
    return JudgedText(id=record.id, source=record.source, group=record.group, granularity="span",
                      context=record.context, text=record.answer, label=0 if unsupported else 1,
                      unsupported=unsupported, language=record.language, question=record.question)


def sentence_labels(judged: dict, claims: Sequence[SentenceSignals]) -> list[int]:
    """Per claim sentence of a judged text (dict form): 1 supported, 0 unsupported, -1 unknown.

    Span-granular: unsupported when the sentence overlaps an unsupported range. Response-level:
    the label goes to the least supported sentence (by the lexical support feature) only, whatever
    the label: a response is supported exactly when its weakest sentence is. Labelling every
    sentence of a supported response would teach "more sentences = supported" (an unsupported
    response gives one labelled sentence), a quirk of the labelling, not of the texts.
    """
    if judged["granularity"] in ("span",):
        return [0 if any(a < s.sentence.end and b > s.sentence.start for a, b in judged["unsupported"]) else 1
                for s in claims]
    if not claims:
        return []
    worst = min(range(len(claims)), key=lambda i: float(claims[i].features[0]))
    return [int(judged["label"]) if i == worst else -1 for i in range(len(claims))]


def sentence_claims(judged: JudgedText) -> list[tuple[str, str, int]]:
    """(claim sentence, evidence chunk, label) pairs of a judged text for the cross-encoder.

    Unlike `sentence_labels` (the combiner's), every sentence of a supported response is a
    positive pair: the cross-encoder sees one sentence at a time, so it cannot learn a count.
    """
    index = ContextIndex.build(judged.context)
    if judged.granularity == "nli":
        evidence = judged.context if len(index.chunks) <= 1 else index.best_chunks(content_stems(judged.text), 1)[0].text
        return [(judged.text, evidence, judged.label)]
    claims = [s for s in sentence_signals(judged.text, index) if not s.is_noise]
    labels = [1] * len(claims) if judged.granularity != "span" and judged.label == 1 \
        else sentence_labels(judged.to_dict(), claims)
    return [(s.sentence.text, s.evidence, label) for s, label in zip(claims, labels) if label >= 0]


def _pair_rows(records: Iterable[JudgedText]) -> list[dict]:
    return [{"evidence": evidence, "claim": claim, "label": label, "source": r.source, "group": r.group}
            for r in records for claim, evidence, label in sentence_claims(r)]


def _balance(rows: list[dict], ratio: float, cap: int, rng: random.Random) -> list[dict]:
    by_label = {label: [r for r in rows if r["label"] == label] for label in (0, 1)}
    smaller = min(len(v) for v in by_label.values())
    if smaller == 0:
        return rng.sample(rows, min(cap, len(rows)))
    kept = []
    for members in by_label.values():
        rng.shuffle(members)
        kept += members[:int(min(len(members), smaller * ratio, cap / 2 if cap else len(members)))]
    rng.shuffle(kept)
    return kept


def read_judged(sources: GroundingSources) -> tuple[dict[str, Judged], list[str]]:
    """Every judged set that is configured, by name; missing paths are errors naming the key."""
    def existing(key: str, value: str) -> Path:
        path = Path(value)
        if not path.exists():
            raise DataError(f"sources.{key}: {path} does not exist (set it to null to skip this set)")
        return path

    readers = {
        "xsumfaith": lambda p: read_xsumfaith(p),
        "wice_tokens": lambda p: _concat(read_wice_tokens(p / f"{s}.jsonl") for s in ("train", "dev", "test")),
        "wice_claims": lambda p: _concat(read_wice_claims(p / f"{s}.jsonl") for s in ("dev", "test")),
        "summedits": lambda p: read_summedits(p, spans=sources.summedits_spans), "fib": read_fib, "begin": read_begin, "faithdial": read_faithdial,
        "docnli": lambda p: _concat([read_binary_nli(p / "binary-FEVER-NLI" / f"{s}.txt", "fever_nli") for s in ("dev", "test")]
                                    + [read_binary_nli(p / "binary-MNLI" / f"{s}.txt", "mnli") for s in ("dev", "test")]
                                    + [read_binary_nli(f, "mctest_nli") for f in sorted((p / "MCTest-NLI").glob("*.txt"))]),
        "esnli": lambda p: _concat(read_esnli(p, s) for s in ("dev", "test")),
    }
    judged, errors = {}, []
    for key, reader in readers.items():
        value = getattr(sources, key)
        if value:
            result = reader(existing(key, value))
            judged[key] = result
            errors += result.errors
            logger.info("%s: %d judged texts, %d rows skipped", key, len(result.records), len(result.errors))
    return judged, errors


def _concat(parts: Iterable[Judged]) -> Judged:
    out = Judged()
    for part in parts:
        out.records += part.records
        out.errors += part.errors
    return out


def prepare(config: GroundingPrepareConfig) -> dict:
    out = Path(config.out_dir)
    spans_config = FactSpansPrepConfig(seed=config.seed, ragtruth=config.ragtruth, faithbench=config.faithbench,
                                       reading=[])
    heldout, human, _, errors = read_sources(spans_config)
    judged, judged_errors = read_judged(config.sources)
    errors += judged_errors
    rng = random.Random(config.seed)

    answers: dict[str, list[JudgedText]] = {"train": [], "dev": [], "test": []}
    ragtruth_rows = [span_record_as_judged(r) for r in human if r.source == "ragtruth"]
    if ragtruth_rows:
        for name, rows in grouped_split(ragtruth_rows, lambda r: r.group, config.ragtruth_splits,
                                        seed=config.seed, allow_empty=True).items():
            answers[name] += rows
    others = [span_record_as_judged(r) for r in human if r.source != "ragtruth"]
    others += [r for key, result in judged.items() if key not in ("docnli", "esnli") for r in result.records]
    for name, rows in grouped_split(others, lambda r: r.group, config.splits, seed=config.seed).items():
        answers[name] += rows

    pairs: dict[str, list[dict]] = {"train": [], "dev": []}
    for split in pairs:
        claim_rows = _pair_rows(answers[split])
        by_source: dict[str, list[dict]] = {}
        for row in claim_rows:
            by_source.setdefault(row["source"], []).append(row)
        cap = config.max_claim_pairs if split == "train" else max(1, config.max_claim_pairs // 10)
        for rows in by_source.values():
            pairs[split] += _balance(rows, config.max_majority_ratio, cap, rng)
    nli = [r for key in ("docnli", "esnli") if key in judged for r in judged[key].records]
    nli_split = grouped_split(nli, lambda r: r.group, {"train": 0.9, "dev": 0.1}, seed=config.seed, allow_empty=True)
    for split, rows in nli_split.items():
        for source, limit in config.max_nli_pairs.items():
            members = [r for r in rows if r.source == source]
            rng.shuffle(members)
            pairs[split] += _pair_rows(members[:limit if split == "train" else limit // 10])
    for rows in pairs.values():
        rng.shuffle(rows)

    for name, rows in answers.items():
        write_jsonl(out / "answers" / f"{name}.jsonl", [r.to_dict() for r in rows])
    for name, rows in pairs.items():
        write_jsonl(out / "pairs" / f"{name}.jsonl", rows)
    for dataset, records in heldout.items():
        write_jsonl(out / "heldout" / f"{dataset}.jsonl", [r.model_dump(mode="json") for r in records])

    splits = {f"answers/{k}": [r.to_dict() for r in v] for k, v in answers.items()}
    splits.update({f"pairs/{k}": v for k, v in pairs.items()})
    splits.update({f"heldout/{k}": [span_record_as_judged(r).to_dict() for r in v] for k, v in heldout.items()})
    card = write_data_card(
        out, task="grounding", splits=splits,
        breakdowns={"source": lambda r: r["source"], "label": lambda r: r["label"],
                    "granularity": lambda r: r.get("granularity", "pair")},
        sources={name: LICENCES.get(name, "see ../shared/datasets/README.md") for name in
                 sorted({r["source"] for rows in splits.values() for r in rows})},
        config=config.model_dump(),
        notes=[f"{len(errors)} source rows skipped; first: {errors[0]}" if errors else "no source row skipped",
               "heldout/* is benchmark data: never train on it",
               "label 1 = supported by the context; XSumFaith: a character is unsupported when >= 2 of 3 "
               "annotators marked it; response-level labels are never turned into spans"])
    card["errors"] = errors
    return card
