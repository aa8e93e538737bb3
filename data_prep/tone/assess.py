"""The assessor check: a stratified sample for people to label, and their agreement with the machine.

1. `draw_sample` picks, per label and independently, a simple random sample of the rows the
   automatic labels call positive and of those they call negative (rare labels would otherwise get
   no positives at all); a row drawn for several labels is written once. `write_review_csv` writes
   them with empty `human_<label>` columns for a person to fill with 1, 0, or leave blank.
2. `read_review_csv` reads the filled file back; a bad cell is an error naming the line and column,
   and the row is skipped while the rest are used.
3. `agreement` computes per label Cohen's kappa, precision and recall of the automatic labels
   against the human ones (scikit-learn), on the sample as drawn, and re-weighted to the population:
   for label L only the rows drawn for L count, each standing for N/n rows of its stratum
   (`weight_<L>`), which makes the weighted precision/recall/kappa estimates for the whole set.
   A label passes when its as-drawn kappa reaches the floor with at least `min_assessed` rows.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..io import DataError
from .config import LabelSpec
from .records import ToneRecord

AUTO, HUMAN, WEIGHT = "auto_", "human_", "weight_"
BASE_COLUMNS = ["review_id", "id", "source", "language", "drawn_for", "text"]


@dataclass
class ReviewRow:
    review_id: str
    id: str
    source: str
    language: str
    drawn_for: list[str]  # labels whose stratified sample picked this row
    text: str
    auto: dict[str, int | None]
    human: dict[str, int | None]
    # label -> population rows this row stands for in that label's stratum (drawn_for labels only)
    weights: dict[str, float] = field(default_factory=dict)
    comment: str = ""
    line: int = 0


def synthetic_labels(record: ToneRecord) -> dict[str, int | None]:
    """The labels the automatic labellers decided (gold-decided labels are not theirs to check)."""
    return {label: (value if (p := record.provenance.get(label)) is not None and p.labeller != "gold" else None)
            for label, value in record.labels.items()}


def auto_source(name: str) -> Callable[[ToneRecord], dict[str, int | None]]:
    """`synthetic` (merged, non-gold) or one labeller's raw votes ("lexicon", "llm", "gold")."""
    if name == "synthetic":
        return synthetic_labels
    return lambda record: {label: record.votes.get(name, {}).get(label) for label in record.labels}


def draw_sample(
    records: Sequence[ToneRecord],
    labels: Sequence[str],
    auto_of: Callable[[ToneRecord], dict[str, int | None]],
    *,
    positives: int,
    negatives: int,
    seed: int,
    human_of: Callable[[ToneRecord], dict[str, int | None]] | None = None,
) -> list[ReviewRow]:
    """Per label, up to `positives` rows with automatic value 1 and `negatives` with 0.

    Each label's strata are sampled independently (so each is a simple random sample and the
    weighted estimates are unbiased); a row drawn for several labels appears once. With `human_of`
    (gold standing in for people) only rows with a human value for the label are candidates, and the
    human columns are pre-filled.
    """
    rng = random.Random(seed)
    autos = [auto_of(r) for r in records]
    humans = [human_of(r) for r in records] if human_of else None
    drawn: dict[int, dict[str, float]] = {}  # record index -> label -> weight
    for label in labels:
        for stratum, wanted in ((1, positives), (0, negatives)):
            pool = [i for i, a in enumerate(autos) if a.get(label) == stratum
                    and (humans is None or humans[i].get(label) is not None)]
            chosen = rng.sample(pool, min(wanted, len(pool)))
            for i in chosen:
                drawn.setdefault(i, {})[label] = round(len(pool) / len(chosen), 4)
    rows: list[ReviewRow] = []
    for i in sorted(drawn):
        record = records[i]
        rows.append(ReviewRow(
            review_id=f"r{len(rows) + 1:05d}", id=record.id, source=record.source, language=record.language,
            drawn_for=[n for n in labels if n in drawn[i]], text=record.text,
            auto={n: autos[i].get(n) for n in labels},
            human={n: (humans[i].get(n) if humans else None) for n in labels}, weights=drawn[i],
        ))
    return rows


def _cell(value: int | None) -> str:
    return "" if value is None else str(value)


def write_review_csv(path: str | Path, rows: Sequence[ReviewRow], labels: Sequence[str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (BASE_COLUMNS + [HUMAN + n for n in labels] + [AUTO + n for n in labels]
              + [WEIGHT + n for n in labels] + ["comment"])
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow([row.review_id, row.id, row.source, row.language, ";".join(row.drawn_for), row.text]
                            + [_cell(row.human[n]) for n in labels] + [_cell(row.auto[n]) for n in labels]
                            + [row.weights.get(n, "") for n in labels] + [row.comment])


def _binary(value: str, where: str, column: str) -> int | None:
    value = (value or "").strip()
    if value in ("", "?"):
        return None  # not assessed / cannot tell
    if value in ("0", "1"):
        return int(value)
    raise DataError(f"{where}: column {column} = {value!r}; expected 1, 0, or blank (not assessed)")


def read_review_csv(path: str | Path) -> tuple[list[ReviewRow], list[str], list[str]]:
    """(rows, labels, errors): a row with a bad cell is skipped and its error names file:line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        labels = [c[len(HUMAN):] for c in header if c.startswith(HUMAN)]
        missing = [c for c in BASE_COLUMNS if c not in header] + [
            prefix + n for n in labels for prefix in (AUTO, WEIGHT) if prefix + n not in header]
        if missing or not labels:
            raise DataError(f"{path}:1: header lacks {missing or 'any human_<label> column'}; "
                            "write the file with `autovalidators label sample-for-review`")
        rows, errors = [], []
        line = reader.line_num
        for raw in reader:
            where, start = f"{path}:{line + 1}", line + 1
            line = reader.line_num
            try:
                if None in raw:
                    raise DataError(f"{where}: {len(header) + len(raw[None])} fields, the header has {len(header)}")
                rows.append(ReviewRow(
                    review_id=raw["review_id"], id=raw["id"], source=raw["source"], language=raw["language"],
                    drawn_for=[n for n in (raw["drawn_for"] or "").split(";") if n], text=raw["text"],
                    auto={n: _binary(raw[AUTO + n], where, AUTO + n) for n in labels},
                    human={n: _binary(raw[HUMAN + n], where, HUMAN + n) for n in labels},
                    weights={n: _float(raw[WEIGHT + n], where, WEIGHT + n) for n in labels
                             if (raw[WEIGHT + n] or "").strip()},
                    comment=raw.get("comment") or "", line=start,
                ))
            except DataError as exc:
                errors.append(str(exc))
    return rows, labels, errors


def _float(value: str, where: str, column: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: column {column} = {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise DataError(f"{where}: column {column} = {value!r} must be a finite number >= 0")
    return number


@dataclass
class LabelAgreement:
    label: str
    n: int
    kappa: float | None
    precision: float | None
    recall: float | None
    human_positive: int
    auto_positive: int
    confusion: dict[str, int]
    weighted: dict[str, float | None] = field(default_factory=dict)
    floor: float = 0.0
    min_assessed: int = 0
    passed: bool = False
    reason: str = ""


def _metrics(auto: list[int], human: list[int], weights: list[float] | None) -> tuple[float | None, float, float]:
    from sklearn.metrics import cohen_kappa_score, precision_score, recall_score

    if len(set(auto) | set(human)) < 2:
        kappa = None  # one class only: kappa is undefined (0/0), not perfect
    else:
        kappa = float(cohen_kappa_score(human, auto, sample_weight=weights))
        kappa = None if math.isnan(kappa) else kappa
    precision = float(precision_score(human, auto, sample_weight=weights, zero_division=0))
    recall = float(recall_score(human, auto, sample_weight=weights, zero_division=0))
    return kappa, precision, recall


def agreement(rows: Sequence[ReviewRow], specs: dict[str, LabelSpec], labels: Sequence[str]) -> list[LabelAgreement]:
    """Per label: kappa/precision/recall of automatic against human labels, and the floor verdict."""
    results = []
    for label in labels:
        pairs = [(r.auto[label], r.human[label], r) for r in rows
                 if r.auto.get(label) is not None and r.human.get(label) is not None]
        auto = [a for a, _, _ in pairs]
        human = [h for _, h, _ in pairs]
        spec = specs[label]
        confusion = {"tp": sum(a == h == 1 for a, h in zip(auto, human)),
                     "fp": sum(a == 1 and h == 0 for a, h in zip(auto, human)),
                     "fn": sum(a == 0 and h == 1 for a, h in zip(auto, human)),
                     "tn": sum(a == h == 0 for a, h in zip(auto, human))}
        result = LabelAgreement(label, len(pairs), None, None, None, sum(human), sum(auto), confusion,
                                floor=spec.kappa_floor, min_assessed=spec.min_assessed)
        if pairs:
            result.kappa, result.precision, result.recall = _metrics(auto, human, None)
            drawn = [(a, h, r.weights[label]) for a, h, r in pairs if r.weights.get(label, 0) > 0]
            if drawn:
                k, p, rc = _metrics([a for a, _, _ in drawn], [h for _, h, _ in drawn], [w for _, _, w in drawn])
                result.weighted = {"n": len(drawn), "kappa": k, "precision": p, "recall": rc}
        if result.n < spec.min_assessed:
            result.reason = f"only {result.n} assessed rows, {spec.min_assessed} needed"
        elif result.kappa is None:
            result.reason = "kappa undefined: the assessed rows have a single class"
        elif result.kappa < spec.kappa_floor:
            result.reason = f"kappa {result.kappa:.3f} < floor {spec.kappa_floor:.2f}"
        else:
            result.passed = True
            result.reason = f"kappa {result.kappa:.3f} >= floor {spec.kappa_floor:.2f}"
        results.append(result)
    return results
