"""Pointwise summaries: per-case rows and the means per dimension and category ("has quality changed?").

Cases whose judgement failed are listed with the error's kind and counted in `errors`; they are
left out of the means instead of being given a made-up score.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from ..case import Case
from .config import EvaluationConfig
from .pairwise import UNCATEGORIZED
from .schema import Judged, PointwiseScore

FIELDS = ("correctness", "helpfulness", "clarity", "safety", "overall")


def _means(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r.get("scores")]
    out: dict[str, Any] = {"n": len(scored)}
    for name in FIELDS:
        out[name] = sum(r["scores"][name] for r in scored) / len(scored) if scored else None
    out["composite"] = sum(r["composite"] for r in scored) / len(scored) if scored else None
    return out


def summarize_pointwise(cases: Sequence[Case], judged: Sequence[Judged], config: EvaluationConfig,
                        *, judge: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(per-case rows, summary) for `evaluate pointwise`."""
    rows = []
    for case, item in zip(cases, judged, strict=True):
        category = str(case.meta.get("category") or UNCATEGORIZED)
        row: dict[str, Any] = {"id": case.id, "category": category, "judge": judge,
                               "question": case.question, "answer": case.answer}
        if item.ok:
            scores = item.score.model_dump(exclude={"rationale"})
            row.update(scores=scores, composite=round(item.score.composite(config.composite), 4),
                       rationale=item.score.rationale)
        else:
            row.update(error=f"{item.error.kind}: {item.error}", error_kind=item.error.kind)
        rows.append(row)
    categories = sorted({r["category"] for r in rows})
    summary = {
        "judge": judge,
        "cases": len(rows),
        "scored": sum(1 for r in rows if r.get("scores")),
        "weights": config.composite.weights,
        "errors": dict(Counter(r["error_kind"] for r in rows if "error_kind" in r)),
        "means": _means(rows),
        "by_category": {name: _means([r for r in rows if r["category"] == name]) for name in categories},
    }
    return rows, summary


def load_pointwise_rows(rows: Sequence[dict[str, Any]], *, judge: str) -> dict[str, Judged]:
    """Scores from an `evaluate pointwise` file, by id, for reuse; refuses another judge's scores."""
    known: dict[str, Judged] = {}
    for number, row in enumerate(rows, start=1):
        if row.get("judge") != judge:
            raise ValueError(f"row {number} ({row.get('id')}) was scored by {row.get('judge')!r}, not {judge!r}; "
                             "scores from different judges are not comparable")
        if row.get("scores"):
            known[str(row["id"])] = Judged(str(row["id"]), score=PointwiseScore(**row["scores"],
                                                                                 rationale=row["rationale"]))
    return known
