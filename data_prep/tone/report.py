"""Agreement report: `agreement.json` for machines, `AGREEMENT.md` for people, a table for the console."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from .assess import LabelAgreement


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def write_agreement_report(out: str | Path, results: Sequence[LabelAgreement], *, review: str | Path, rows: int,
                           errors: Sequence[str], config_version: str) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "review_file": str(review),
        "config_version": config_version,
        "rows": rows,
        "bad_rows": list(errors),
        "passed": all(r.passed for r in results) and not errors,
        "labels": {r.label: asdict(r) for r in results},
    }
    (out / "agreement.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    lines = [
        "# Assessor agreement", "",
        f"Review file `{review}`: {rows} rows read, {len(errors)} bad. Config {config_version}.", "",
        "Automatic labels against the assessors. *As drawn*: every assessed row (the sample is stratified",
        "by automatic label, so positives are over-represented). *Weighted*: only rows drawn for that",
        "label, each standing for N/n rows of its stratum: an estimate for the whole labelled set.",
        "The floor applies to the as-drawn kappa.", "",
        "| label | n | kappa | precision | recall | weighted kappa | weighted P | weighted R | floor | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        w = r.weighted
        lines.append(f"| {r.label} | {r.n} | {_num(r.kappa)} | {_num(r.precision)} | {_num(r.recall)} | "
                     f"{_num(w.get('kappa'))} | {_num(w.get('precision'))} | {_num(w.get('recall'))} | "
                     f"{r.floor:.2f} | {'pass' if r.passed else 'FAIL'}: {r.reason} |")
    if errors:
        lines += ["", "## Bad rows (skipped)"] + [f"- {e}" for e in errors]
    (out / "AGREEMENT.md").write_text("\n".join(lines) + "\n", "utf-8")
    return report


def print_agreement(console, results: Sequence[LabelAgreement], errors: Sequence[str]) -> None:
    from rich.table import Table

    table = Table(title="assessor agreement (automatic vs human)")
    for column in ("label", "n", "kappa", "precision", "recall", "w.kappa", "w.P", "w.R", "floor", "verdict"):
        table.add_column(column, justify="right" if column not in ("label", "verdict") else "left")
    for r in results:
        style = "green" if r.passed else "red"
        w = r.weighted
        table.add_row(r.label, str(r.n), _num(r.kappa), _num(r.precision), _num(r.recall), _num(w.get("kappa")),
                      _num(w.get("precision")), _num(w.get("recall")), f"{r.floor:.2f}",
                      f"[{style}]{'pass' if r.passed else 'FAIL'}[/{style}] {r.reason}")
    console.print(table)
    for error in errors:
        console.print(f"[red]bad row[/red] {error}")
