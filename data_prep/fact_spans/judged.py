"""Converters for texts written by models and judged by people against their source (issue 12).

Each set keeps the granularity it really has; nothing pretends a response label is a span:

| set | granularity | label rule |
|---|---|---|
| XSumFaith | `span` (characters) | a character is unsupported when at least 2 of its 3 annotators marked it (`XSUM_MIN_VOTES`) |
| WiCE (non-supported tokens) | `span` (tokens mapped to characters) | the annotated "not supported" tokens |
| WiCE (claim level) | `claim` | supported = 1; partially / not supported = 0 |
| SummEdits | `response` | consistent 0/1 |
| FIB | `response` | the faithful summary 1, the distractor 0 (one pair shares a group) |
| BEGIN | `response` | fully attributable 1, not 0; generic skipped |
| FaithDial audit | `response` | entailment 1; hallucination / partial 0; generic, uncooperative-only skipped |
| FEVER/MNLI/MCTest binary NLI, e-SNLI | `nli` | entailment 1, else 0 |

A `JudgedText` is one judged text with its source; `unsupported` holds character ranges for
`span` granularity only. Every converter reads what it can: a bad row becomes one message in the
returned errors (file, row, what was wrong) and the rest are still read.
"""

from __future__ import annotations

import ast
import csv
import difflib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Literal

from .converters import text_key

logger = logging.getLogger(__name__)

Granularity = Literal["span", "claim", "response", "nli"]
XSUM_MIN_VOTES = 2  # of 3 annotators: a character marked by at least this many is unsupported
LICENCES = {"xsumfaith": "CC BY 4.0", "wice": "ODC-BY", "summedits": "Apache-2.0", "fib": "CC BY 4.0",
            "begin": "CC BY 4.0 / CDLA-Sharing-1.0", "faithdial": "MIT", "fever_nli": "CC BY-SA",
            "mnli": "OANC / CC BY-SA", "mctest_nli": "BSD-3", "esnli": "CC BY-SA 4.0"}


@dataclass
class JudgedText:
    """One model-written text, its source and the human judgement of its support."""

    id: str
    source: str  # dataset name, a key of LICENCES
    group: str  # source-document key: never split across splits
    granularity: Granularity
    context: str
    text: str
    label: int  # 1 = supported by the context, 0 = not
    unsupported: list[tuple[int, int]] = field(default_factory=list)  # char ranges into text (span only)
    language: str = "en"
    question: str = ""  # the prompt the text answers, where the set has one (RAGTruth, FaithBench)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Judged:
    records: list[JudgedText] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _read_rows(path: Path, judged: Judged, parse: Callable[[int, object], JudgedText | None],
               rows: Iterator[object]) -> None:
    """Applies `parse` to every row; a row that fails is named in `judged.errors`, the rest kept."""
    for number, row in enumerate(rows, start=1):
        if row is None:
            continue  # a blank line
        try:
            if isinstance(row, json.JSONDecodeError):
                raise row  # a malformed JSONL line: one error, the rest still read
            record = parse(number, row)
        except (KeyError, TypeError, ValueError, SyntaxError, IndexError, AttributeError) as exc:
            judged.errors.append(f"{path}:{number}: skipped ({exc!r})")
            continue
        if record is not None:
            judged.records.append(record)


def _jsonl(path: Path) -> Iterator[object]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                yield json.loads(line) if line.strip() else None
            except json.JSONDecodeError as exc:
                yield exc


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


# --------------------------------------------------------------------------------------- XSumFaith


def xsum_unsupported(summary: str, spans: list[dict], min_votes: int = XSUM_MIN_VOTES) -> list[tuple[int, int]]:
    """Character ranges of `summary` that at least `min_votes` distinct annotators marked."""
    votes = [set() for _ in summary]
    for span in spans:
        if span.get("start") is None or span.get("end") is None:
            continue  # "NULL": this annotator marked nothing
        start, end = max(0, int(span["start"])), min(len(summary), int(span["end"]))
        for i in range(start, end):
            votes[i].add(span.get("worker_id", ""))
    ranges, start = [], None
    for i, voters in enumerate(votes + [set()]):
        marked = len(voters) >= min_votes and (i < len(summary) and not summary[i].isspace() or start is not None)
        if marked and start is None:
            start = i
        elif not marked and start is not None:
            end = i
            while end > start and summary[end - 1].isspace():
                end -= 1
            ranges.append((start, end))
            start = None
    return [r for r in ranges if r[1] > r[0]]


def read_xsumfaith(path: Path) -> Judged:
    judged = Judged()

    def parse(number: int, row: object) -> JudgedText | None:
        if not isinstance(row, dict) or not row.get("doc"):
            raise ValueError("no source article (doc)")
        summary = row["summary"]
        unsupported = xsum_unsupported(summary, row.get("spans") or [])
        return JudgedText(id=f"xsumfaith-{row['bbcid']}-{row['system']}", source="xsumfaith",
                          group=f"xsum:{row['bbcid']}", granularity="span", context=row["doc"], text=summary,
                          label=0 if unsupported else 1, unsupported=unsupported)

    _read_rows(path, judged, parse, _jsonl(path))
    return judged


# -------------------------------------------------------------------------------------------- WiCE


def _literal(raw: object) -> object:
    """WiCE fields are JSON lists/objects, or their Python repr in some exports."""
    return ast.literal_eval(raw) if isinstance(raw, str) else raw


def _evidence_text(raw: object) -> str:
    sentences = _literal(raw)
    return "\n".join(s for s in sentences if not s.startswith("(meta data)"))


def read_wice_tokens(path: Path) -> Judged:
    """Claims with per-token "not supported" flags: tokens are found in the claim in order."""
    judged = Judged()

    def parse(number: int, row: object) -> JudgedText | None:
        assert_dict(row)
        claim = row["claim"]
        tokens = _literal(row["claim_tokens"])
        flags = _literal(row["non_supported_spans"])
        if len(tokens) != len(flags):
            raise ValueError(f"{len(tokens)} tokens but {len(flags)} flags")
        ranges, position = [], 0
        for token, flag in zip(tokens, flags):
            start = claim.find(token, position)
            if start < 0:
                raise ValueError(f"token {token!r} not found in the claim")
            position = start + len(token)
            if flag:
                ranges.append((start, position))
        # Adjacent unsupported tokens ("ex - pats") form one range, spaces included.
        joined = _merge([(s, e + 1) if e < len(claim) and claim[e] == " " else (s, e) for s, e in ranges])
        unsupported = [(s, e - 1) if claim[e - 1] == " " else (s, e) for s, e in joined]
        meta = _literal(row.get("meta") or {})
        return JudgedText(id=f"wice-{meta.get('id', number)}", source="wice",
                          group=f"wice:{meta.get('claim_title') or text_key(claim)}", granularity="span",
                          context=_evidence_text(row["evidence"]), text=claim,
                          label=0 if unsupported else 1, unsupported=unsupported)

    _read_rows(path, judged, parse, _jsonl(path))
    return judged


def read_wice_claims(path: Path) -> Judged:
    judged = Judged()
    labels = {"supported": 1, "partially_supported": 0, "not_supported": 0}

    def parse(number: int, row: object) -> JudgedText | None:
        assert_dict(row)
        meta = _literal(row.get("meta") or {})
        return JudgedText(id=f"wice-claim-{meta.get('id', number)}", source="wice",
                          group=f"wice:{meta.get('claim_title') or text_key(row['claim'])}", granularity="claim",
                          context=_evidence_text(row["evidence"]), text=row["claim"], label=labels[row["label"]])

    _read_rows(path, judged, parse, _jsonl(path))
    return judged


def assert_dict(row: object) -> None:
    if not isinstance(row, dict):
        raise TypeError(f"expected a JSON object, got {type(row).__name__}")


# ------------------------------------------------------------------------- response-level summaries


_WORD = re.compile(r"\S+")


def edited_ranges(original: str, edited: str) -> list[tuple[int, int]]:
    """Character ranges of `edited` whose words differ from `original` (inserted or replaced words,
    adjacent ones joined): where a SummEdits edit put its change. Deleted words leave no range."""
    old_words = [m.group(0) for m in _WORD.finditer(original)]
    new_matches = list(_WORD.finditer(edited))
    ranges: list[tuple[int, int]] = []
    matcher = difflib.SequenceMatcher(a=old_words, b=[m.group(0) for m in new_matches], autojunk=False)
    for tag, _, _, first, last in matcher.get_opcodes():
        if tag in ("replace", "insert") and last > first:
            ranges.append((new_matches[first].start(), new_matches[last - 1].end()))
    return ranges


def read_summedits(folder: Path, *, spans: bool = False) -> Judged:
    """SummEdits rows: consistent (1) or not (0) per (document, summary). With `spans`, an
    inconsistent summary whose `original_summary` differs from it becomes span-labelled: the
    edited words are the unsupported ranges (what the annotators judged was the edit)."""
    judged = Judged()
    for path in sorted(folder.glob("summedits_*.json")):
        domain = path.stem.removeprefix("summedits_")

        def parse(number: int, row: object, domain: str = domain) -> JudgedText | None:
            assert_dict(row)
            label = int(row["label"])
            if label not in (0, 1):
                raise ValueError(f"label {label} is not 0/1")
            edited = edited_ranges(str(row.get("original_summary") or ""), row["summary"]) \
                if spans and label == 0 and row.get("original_summary") else []
            return JudgedText(id=f"summedits-{domain}-{row['id']}", source="summedits",
                              group=f"summedits:{domain}:{text_key(row['doc'])}",
                              granularity="span" if edited else "response",
                              context=row["doc"], text=row["summary"], label=label, unsupported=edited)

        _read_rows(path, judged, parse, iter(json.loads(path.read_text(encoding="utf-8"))))
    return judged


def read_fib(folder: Path) -> Judged:
    """Each FIB row gives two summaries of one article: `correct_choice` faithful, the other not."""
    judged = Judged()
    for path in sorted(folder.glob("*/fib/*.jsonl")):
        corpus = path.parent.parent.name

        def parse(number: int, row: object, path: Path = path, corpus: str = corpus) -> list[JudgedText]:
            assert_dict(row)
            correct = row["correct_choice"].strip()
            choices = [c.strip() for c in row["list_choices"]]
            if correct not in choices or len(choices) != 2:
                raise ValueError("correct_choice is not one of two list_choices")
            group = f"fib:{corpus}:{row['id']}"
            return [JudgedText(id=f"fib-{corpus}-{path.stem}-{row['id']}-{i}", source="fib", group=group,
                               granularity="response", context=row["input"], text=choice,
                               label=int(choice == correct)) for i, choice in enumerate(choices)]

        pairs = Judged()
        _read_rows(path, pairs, parse, _jsonl(path))  # type: ignore[arg-type]
        judged.errors += pairs.errors
        judged.records += [r for pair in pairs.records for r in pair]  # type: ignore[union-attr]
    return judged


# -------------------------------------------------------------------------- knowledge-grounded dialogue

BEGIN_LABELS = {"fully attributable": 1, "not fully attributable": 0}


def read_begin(folder: Path) -> Judged:
    judged = Judged()
    for path in sorted(folder.glob("*/*.tsv")):
        def parse(number: int, row: object, path: Path = path) -> JudgedText | None:
            assert_dict(row)
            label = row["begin_label"].strip().lower()
            if label == "generic":
                return None  # neither supported nor a claim
            return JudgedText(id=f"begin-{path.stem}-{number}", source="begin",
                              group=f"begin:{text_key(row['knowledge'])}", granularity="response",
                              context=row["knowledge"], text=row["response"], label=BEGIN_LABELS[label])

        with path.open(encoding="utf-8", newline="") as handle:
            _read_rows(path, judged, parse, csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return judged


def faithdial_label(raw: str) -> int | None:
    """entailment -> 1; any hallucination (full or partial) -> 0; generic/uncooperative-only -> None."""
    parts = {p.strip().rstrip("t").lower() for p in raw.replace(".", ",").split(",") if p.strip()}
    if any("hallucinat" in p for p in parts):
        return 0
    if any(p.startswith("entailmen") for p in parts):
        return 1
    return None


def read_faithdial(folder: Path) -> Judged:
    judged = Judged()
    for path in sorted(folder.glob("*/*.csv")):
        def parse(number: int, row: object, path: Path = path) -> JudgedText | None:
            assert_dict(row)
            context = row.get("knowledge") or row.get("evidence") or ""
            response_key = next((k for k in row if k in ("response", "ctrl", "doha", "gpt2")), None)
            if response_key is None:
                raise KeyError("no response column (response, ctrl, doha or gpt2)")
            label = faithdial_label(row.get("begin_label") or row.get("BEGIN") or "")
            if label is None or not context.strip() or not row[response_key].strip():
                return None
            return JudgedText(id=f"faithdial-{path.parent.name}-{path.stem}-{number}", source="faithdial",
                              group=f"faithdial:{text_key(context)}", granularity="response",
                              context=context, text=row[response_key], label=label)

        with path.open(encoding="utf-8", newline="") as handle:
            _read_rows(path, judged, parse, csv.DictReader(handle))
    return judged


# ---------------------------------------------------------------------------------------------- NLI


def read_binary_nli(path: Path, source: str) -> Judged:
    """DocNLI's TSV files: label<TAB>premise<TAB>hypothesis, label entailment / not_entailment."""
    judged = Judged()

    def parse(number: int, line: object) -> JudgedText | None:
        fields = str(line).rstrip("\n").split("\t")
        if len(fields) < 3:
            raise ValueError(f"expected label<TAB>premise<TAB>hypothesis, got {len(fields)} field(s)")
        label, premise, hypothesis = fields[:3]
        if label not in ("entailment", "not_entailment", "non_entailment"):
            raise ValueError(f"unknown label {label!r}")
        return JudgedText(id=f"{source}-{path.stem}-{number}", source=source, group=f"{source}:{text_key(premise)}",
                          granularity="nli", context=premise, text=hypothesis, label=int(label == "entailment"))

    with path.open(encoding="utf-8") as handle:
        _read_rows(path, judged, parse, (line if line.strip() else None for line in handle))
    return judged


def read_esnli(folder: Path, split: str) -> Judged:
    judged = Judged()
    files = [folder / f"{name}.{split}" for name in ("s1", "s2", "labels")]
    columns = [p.read_text(encoding="utf-8").splitlines() for p in files]
    if len({len(c) for c in columns}) != 1:
        judged.errors.append(f"{folder}: s1/s2/labels .{split} differ in length; skipped")
        return judged

    def parse(number: int, row: object) -> JudgedText | None:
        premise, hypothesis, label = row  # type: ignore[misc]
        if label not in ("entailment", "neutral", "contradiction"):
            raise ValueError(f"unknown label {label!r}")
        return JudgedText(id=f"esnli-{split}-{number}", source="esnli", group=f"esnli:{text_key(premise)}",
                          granularity="nli", context=premise.strip(), text=hypothesis.strip(),
                          label=int(label == "entailment"))

    _read_rows(files[0], judged, parse, zip(*columns))
    return judged
