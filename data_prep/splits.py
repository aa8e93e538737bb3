"""Deterministic splits grouped by source: no context/question group ever lands in two splits."""

from __future__ import annotations

import hashlib
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


class SplitError(ValueError):
    """The requested split cannot be made (e.g. it would leave a split empty)."""


def _bucket(group: str, seed: int) -> float:
    # A hash, not a shuffled RNG: the split of a group never changes when other groups are added.
    digest = hashlib.sha256(f"{seed}:{group}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def grouped_split(
    items: Sequence[T],
    group_of: Callable[[T], str],
    fractions: dict[str, float],
    *,
    seed: int = 13,
    allow_empty: bool = False,
) -> dict[str, list[T]]:
    """Assigns every group to one split by a seeded hash, keeping item order within splits.

    Args:
        items: records to split.
        group_of: the record's group key (source document, context hash, question).
        fractions: split name -> share of groups, e.g. {"train": 0.8, "dev": 0.1, "test": 0.1}.
        seed: changes the assignment; the same seed always gives the same split.
        allow_empty: by default a split that ends up empty is an error, not a silent surprise.
    """
    if not fractions or any(f < 0 for f in fractions.values()):
        raise SplitError(f"fractions must be non-negative and non-empty, got {fractions}")
    total = sum(fractions.values())
    if total <= 0:
        raise SplitError("fractions sum to 0")
    edges, running = [], 0.0
    for name, fraction in fractions.items():
        running += fraction / total
        edges.append((running, name))
    splits: dict[str, list[T]] = {name: [] for name in fractions}
    for item in items:
        point = _bucket(group_of(item), seed)
        name = next((n for edge, n in edges if point < edge), edges[-1][1])
        splits[name].append(item)
    empty = [name for name, members in splits.items() if not members and fractions[name] > 0]
    if empty and not allow_empty:
        raise SplitError(
            f"split(s) {empty} came out empty from {len(items)} items; add data or change the fractions"
        )
    return splits
