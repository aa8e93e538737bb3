"""The sanity checklist: a seeded random sample of judged cases, with rationales, for a person.

Judges drift and metrics lie quietly; reading twenty judged cases with their rationales is the
cheapest check that the scores mean what the report says. Input: the per-case JSONL of
`evaluate pointwise` or `compare`; output: a Markdown checklist to fill in.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from ...data_prep.io import read_jsonl

MAX_TEXT = 600

CHECKLIST = (
    "The rationale describes this answer (not a generic or another case's text)",
    "I agree with the verdict / scores",
    "A confident wrong claim was penalised; an honest hedge was not",
    "The question's category label fits",
)


def _short(text: Any) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"


def sample_records(records: Sequence[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """`n` records chosen with a seeded RNG (all when fewer), in their original order."""
    if n >= len(records):
        return list(records)
    chosen = set(random.Random(seed).sample(range(len(records)), n))
    return [r for i, r in enumerate(records) if i in chosen]


def _render(record: dict[str, Any], number: int) -> list[str]:
    lines = [f"## {number}. `{record.get('id')}` ({record.get('category', 'uncategorized')})", ""]
    lines.append(f"**Question:** {_short(record.get('question'))}")
    lines.append("")
    if "answer_a" in record:
        lines += [f"**Answer A:** {_short(record.get('answer_a'))}", "",
                  f"**Answer B:** {_short(record.get('answer_b'))}", ""]
        lines.append(f"**Verdict:** winner {record.get('winner')} (A-then-B: {record.get('a_then_b')}, "
                     f"B-then-A: {record.get('b_then_a')}, via {record.get('source')})")
    else:
        lines += [f"**Answer:** {_short(record.get('answer'))}", ""]
        if record.get("scores"):
            scores = ", ".join(f"{k} {v}" for k, v in record["scores"].items())
            lines.append(f"**Scores:** {scores}; composite {record.get('composite')}")
        if record.get("error"):
            lines.append(f"**Judge error:** {record['error']}")
    lines += ["", f"**Rationale:** {_short(record.get('rationale'))}", ""]
    lines += [f"- [ ] {item}" for item in CHECKLIST]
    lines += ["- Notes: ", ""]
    return lines


def write_review(judged_path: str | Path, out_path: str | Path, *, n: int, seed: int) -> int:
    """Writes the checklist for `n` sampled records of `judged_path`; returns how many were written."""
    records = list(read_jsonl(judged_path))
    chosen = sample_records(records, n, seed)
    lines = [
        "# Judge sanity check",
        "",
        f"{len(chosen)} of {len(records)} judged cases from `{judged_path}`, sampled with seed {seed}.",
        "Tick what holds; anything unticked is a finding for the judge or the rubric (configs/prompts).",
        "",
    ]
    for number, record in enumerate(chosen, start=1):
        lines += _render(record, number)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines), encoding="utf-8")
    # A machine-readable twin, so review verdicts can be joined back to the cases later.
    out_path.with_suffix(".jsonl").write_text(
        "".join(json.dumps({"id": r.get("id"), "agree": None, "notes": ""}) + "\n" for r in chosen), encoding="utf-8"
    )
    return len(chosen)
