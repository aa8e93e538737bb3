"""A data card written next to every prepared dataset: where rows came from and how many."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping


def count_by(records: Iterable[Any], key: Callable[[Any], Any]) -> dict[str, int]:
    counts = Counter(str(key(r)) for r in records)
    return dict(sorted(counts.items()))


def write_data_card(
    folder: str | Path,
    *,
    task: str,
    splits: Mapping[str, list[Any]],
    breakdowns: Mapping[str, Callable[[Any], Any]],
    sources: Mapping[str, str],
    config: Mapping[str, Any],
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Writes `data_card.json` and a readable `DATA_CARD.md` into `folder`; returns the card.

    Args:
        breakdowns: name -> function of a record, e.g. {"label": ..., "source": ..., "language": ...};
            counted per split.
        sources: dataset name -> provenance (path, licence, commit).
        config: the resolved config that produced the data, for reproducibility.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    card = {
        "task": task,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "splits": {
            name: {"rows": len(rows), **{b: count_by(rows, fn) for b, fn in breakdowns.items()}}
            for name, rows in splits.items()
        },
        "sources": dict(sources),
        "config": dict(config),
        "notes": notes or [],
    }
    (folder / "data_card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    lines = [f"# Data card: {task}", "", f"Created {card['created']}.", ""]
    for name, stats in card["splits"].items():
        lines.append(f"## {name}: {stats['rows']} rows")
        for b in breakdowns:
            lines.append(f"- by {b}: " + ", ".join(f"{k} {v}" for k, v in stats[b].items()))
        lines.append("")
    lines.append("## Sources")
    lines += [f"- {k}: {v}" for k, v in card["sources"].items()]
    if card["notes"]:
        lines += ["", "## Notes"] + [f"- {n}" for n in card["notes"]]
    (folder / "DATA_CARD.md").write_text("\n".join(lines) + "\n")
    return card
