"""Identity statements (`identity_statements.yaml`) as tone records with a fixed split.

Each `{group}` template of a language is crossed with every group of that language; a statement's
split is the later of its group's and its template's (train < dev < test), so test statements
always hold a wording or a group that training never saw. Records carry gold votes like any
source's, with `source = "identity_statements"` and the kind (hateful / neutral) in `row`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from autovalidators.inference.config import StrictModel

from ..io import DataError
from .records import ToneRecord, add_votes, merge, new_record

SOURCE = "identity_statements"
DEFAULT_PATH = Path(__file__).with_name("identity_statements.yaml")
SPLITS = ("train", "dev", "test")
ABUSIVE = ("toxicity", "obscenity", "insult", "threat", "identity_hate")
GOLD = {"hateful": {"toxicity": 1, "identity_hate": 1}, "neutral": {label: 0 for label in ABUSIVE}}

BySplit = dict[str, list[str]]  # split -> texts


class _Sentences(StrictModel):
    hateful: dict[str, BySplit]
    neutral: dict[str, BySplit]


class StatementsFile(StrictModel):
    version: str
    groups: dict[str, BySplit]
    hateful: dict[str, BySplit]
    neutral: dict[str, BySplit]
    sentences: _Sentences


def load_statements(path: str | Path) -> StatementsFile:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        parsed = StatementsFile.model_validate(raw)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not YAML ({exc})") from None
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise DataError(f"{path}: {problem}") from None
    for section, by_language in (("groups", parsed.groups), ("hateful", parsed.hateful), ("neutral", parsed.neutral),
                                 ("sentences.hateful", parsed.sentences.hateful),
                                 ("sentences.neutral", parsed.sentences.neutral)):
        for language, by_split in by_language.items():
            unknown = sorted(set(by_split) - set(SPLITS))
            if unknown:
                raise DataError(f"{path}: {section}.{language}: split(s) {unknown}; use {list(SPLITS)}")
    for kind in ("hateful", "neutral"):
        for language, by_split in getattr(parsed, kind).items():
            for split, templates in by_split.items():
                for template in templates:
                    if "{group}" not in template:
                        raise DataError(f"{path}: {kind}.{language}.{split}: {template!r} has no {{group}} slot")
            if language not in parsed.groups:
                raise DataError(f"{path}: {kind}.{language} has templates but groups.{language} is missing")
    return parsed


def _later(a: str, b: str) -> str:
    return SPLITS[max(SPLITS.index(a), SPLITS.index(b))]


def statement_records(path: str | Path, labels: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every statement as a tone record (JSON dict, as the prepared files hold them) with its split."""
    parsed = load_statements(path)
    rows: list[tuple[str, str, str, str]] = []  # text, language, kind, split
    for kind in ("hateful", "neutral"):
        for language, by_split in getattr(parsed, kind).items():
            for template_split, templates in by_split.items():
                for template in templates:
                    for group_split, groups in parsed.groups[language].items():
                        for group in groups:
                            text = template.replace("{group}", group)
                            rows.append((text[0].upper() + text[1:], language, kind, _later(template_split, group_split)))
        for language, by_split in getattr(parsed.sentences, kind).items():
            for split, sentences in by_split.items():
                rows.extend((sentence, language, kind, split) for sentence in sentences)
    records: list[dict[str, Any]] = []
    for number, (text, language, kind, split) in enumerate(rows, start=1):
        record: ToneRecord = new_record(text, language=language, source=SOURCE, row=f"{kind}:{number}", labels=labels)
        add_votes(record, "gold", {k: v for k, v in GOLD[kind].items() if k in labels},
                  {k: f"{kind} statement ({parsed.version})" for k in GOLD[kind]})
        merge(record, ["gold"])
        record.split = split
        records.append(record.model_dump(mode="json"))
    return records
