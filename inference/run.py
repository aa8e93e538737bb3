"""The validate job without the command line: cases through the Gate in batches, one JSON line
per record in input order, and the summary table. Shared by `autovalidators validate` and the
quickstart, so neither imports the other's module.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import IO, Iterable

from rich.console import Console
from rich.table import Table

from .case import Case, CaseError
from .gate import Gate
from .results import Decision, FailureType, NextAction, Result

# Rich wraps at 80 columns when output is not a terminal; decisions and reasons need more.
console = Console(stderr=True, width=max(140, shutil.get_terminal_size((140, 24)).columns))
BATCH_SIZE = 32
_DECISION_STYLE = {Decision.ACCEPT: "green", Decision.REVIEW: "yellow", Decision.REJECT: "bold red"}


def _batches(items: Iterable[Case | CaseError], size: int) -> Iterable[list[Case | CaseError]]:
    batch: list[Case | CaseError] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass(frozen=True, slots=True)
class Decided:
    """What the summary shows of one result. A whole `Result` (spans, every validator's output) is
    written out and let go: a log of any length is validated in the memory of one batch."""

    id: str
    decision: Decision
    failure_type: FailureType
    next_action: NextAction
    confidence: int
    reason: str

    @classmethod
    def of(cls, result: Result) -> "Decided":
        return cls(result.id, result.decision, result.failure_type, result.next_action, result.confidence,
                   result.reason)


def run_validation(gate: Gate, records: Iterable[Case | CaseError], sink: IO[str]) -> tuple[list[Decided], list[CaseError]]:
    """Validates records in batches, writing one JSON line per record in input order."""
    results: list[Decided] = []
    errors: list[CaseError] = []
    for batch in _batches(records, BATCH_SIZE):
        cases = [r for r in batch if isinstance(r, Case)]
        by_position = iter(gate.validate_batch(cases))
        for record in batch:
            if isinstance(record, CaseError):
                errors.append(record)
                sink.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            else:
                result = next(by_position)
                results.append(Decided.of(result))
                sink.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    return results, errors


def print_summary(results: list[Decided], errors: list[CaseError], gate: Gate) -> None:
    table = Table(title="autovalidators", show_lines=False)
    for column in ("id", "decision", "failure", "next action", "conf"):
        table.add_column(column, no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=1)
    for r in results:
        style = _DECISION_STYLE[r.decision]
        table.add_row(r.id, f"[{style}]{r.decision.value}[/{style}]", r.failure_type.value,
                      r.next_action.value, str(r.confidence), r.reason)
    console.print(table)
    counts = {d.value: sum(1 for r in results if r.decision is d) for d in Decision}
    console.print("decisions: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; bad records: {len(errors)}")
    for error in errors:
        console.print(f"[red]bad record[/red] {error}")
    if gate.judge is not None and gate.judge.stats:
        console.print("LLM judge: " + ", ".join(f"{k} {v}" for k, v in sorted(gate.judge.stats.items())))
    if gate.uses_fallback:
        fallback = ", ".join(gate.fallbacks)
        console.print(f"[yellow]note:[/yellow] {fallback} ran as heuristic(s): no trained model, or the gate "
                      "config's heuristics.prefer")
