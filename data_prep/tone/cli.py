"""`autovalidators label tone | sample-for-review | agreement | distill` (registered via COMMAND_MODULES).

Only typer and the standard library at import time: the CLI starts fast and without the train extra.

Exit codes follow the CLI's: 0 done (and, for `agreement`, every checked label passed its floor),
1 some rows were bad or a label is under its floor / not assessed (the training pipeline stops),
2 the command could not run (bad config, missing file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from autovalidators.inference.cli import console, label_app

_CONFIG_HELP = "labelling config YAML (default: configs/tone.yaml)"


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _config(path: Optional[Path]):
    from autovalidators.inference.config import ConfigError

    from .config import load_tone_config

    try:
        return load_tone_config(path)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _names(value: Optional[str]) -> list[str] | None:
    return [n.strip() for n in value.split(",") if n.strip()] if value else None


@label_app.command("tone")
def label_tone(
    out: Path = typer.Option(..., "--out", help="folder for <split>.jsonl, benchmark_*.jsonl and the data card"),
    config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    data_root: Optional[Path] = typer.Option(None, help="folder with the shared datasets (default: config data_root)"),
    sources: Optional[str] = typer.Option(None, help="comma-separated subset of the config's sources"),
    llm: Optional[bool] = typer.Option(None, "--llm/--no-llm", help="run the LLM labeller (default: config llm.enabled)"),
) -> None:
    """Label the configured sources (gold mappings, lexicon, optional LLM), merge, split, write."""
    from ..io import DataError
    from ..splits import SplitError
    from .pipeline import build

    cfg = _config(config)
    try:
        report = build(cfg, out, data_root=data_root, sources=_names(sources), use_llm=llm)
    except (DataError, SplitError, ValueError) as exc:
        raise _fail(str(exc)) from None
    from rich.table import Table

    table = Table(title=f"tone labels ({cfg.version})")
    table.add_column("split")
    table.add_column("rows", justify="right")
    for name, count in report["splits"].items():
        table.add_row(name, str(count))
    console.print(table)
    top = list(report["disagreements"].items())[:8]
    if top:
        console.print("most frequent labeller disagreements (winner first): "
                      + "; ".join(f"{k} ×{v}" for k, v in top))
    console.print(f"wrote {out}/ (labelling_report.json, DATA_CARD.md)")
    if report["bad_rows"]:
        for error in report["bad_rows"][:10]:
            console.print(f"[red]bad row[/red] {error}")
        console.print(f"{len(report['bad_rows'])} bad source row(s) skipped; all are listed in labelling_report.json")
        raise typer.Exit(code=1)


def _read_inputs(paths: list[Path], sources: list[str] | None):
    from .records import read_records

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.jsonl"))
        elif path.is_file():
            files.append(path)
        else:
            raise _fail(f"{path}: no such file or folder")
    if not files:
        raise _fail(f"no .jsonl files in {', '.join(map(str, paths))}")
    return [r for f in files for r in read_records(f) if sources is None or r.source in sources]


@label_app.command("sample-for-review")
def sample_for_review(
    input: list[Path] = typer.Option(..., "--input", help="tone JSONL file(s) or a folder from `label tone`"),
    out: Path = typer.Option(..., "--out", help="CSV to write for the assessors"),
    config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    auto: str = typer.Option("synthetic", help="automatic labels to check: synthetic (merged, non-gold), lexicon, llm"),
    labels: Optional[str] = typer.Option(None, help="comma-separated labels (default: all)"),
    sources: Optional[str] = typer.Option(None, help="only records from these sources"),
    prefill_human: Optional[str] = typer.Option(
        None, help="fill human_<label> from this labeller's votes (e.g. gold standing in for assessors)"),
    positives: Optional[int] = typer.Option(None, help="rows per label the automatic labels call positive"),
    negatives: Optional[int] = typer.Option(None, help="rows per label the automatic labels call negative"),
    seed: Optional[int] = typer.Option(None, help="sampling seed (default: config review.seed)"),
    silent_as_negative: bool = typer.Option(
        False, help="count the labeller's silence as 0, to measure a positive-only labeller as a full classifier"),
) -> None:
    """Draw a stratified sample (per label, automatic positives and negatives) into a CSV to fill in."""
    from ..io import DataError
    from .assess import auto_source, draw_sample, write_review_csv

    cfg = _config(config)
    if auto not in ("synthetic", "lexicon", "llm", "gold"):
        raise _fail(f"--auto {auto!r}: choose synthetic, lexicon, llm or gold")
    if prefill_human not in (None, "gold", "lexicon", "llm"):
        raise _fail(f"--prefill-human {prefill_human!r}: choose gold, lexicon or llm")
    chosen = _names(labels) or list(cfg.labels)
    unknown = sorted(set(chosen) - set(cfg.labels))
    if unknown:
        raise _fail(f"unknown label(s) {unknown}; the config has {', '.join(cfg.labels)}")
    try:
        records = _read_inputs(input, _names(sources))
    except DataError as exc:
        raise _fail(str(exc)) from None
    human_of = auto_source(prefill_human) if prefill_human else None
    auto_of = auto_source(auto)
    if silent_as_negative:
        if auto == "synthetic":
            raise _fail("--silent-as-negative needs one labeller (--auto lexicon or llm), not the merged labels")
        labeller_of = auto_of
        auto_of = lambda record: {k: 0 if v is None else v for k, v in labeller_of(record).items()}  # noqa: E731
    rows = draw_sample(records, chosen, auto_of,
                       positives=cfg.review.positives_per_label if positives is None else positives,
                       negatives=cfg.review.negatives_per_label if negatives is None else negatives,
                       seed=cfg.review.seed if seed is None else seed, human_of=human_of)
    write_review_csv(out, rows, chosen)
    for label in chosen:
        pos = sum(label in r.drawn_for and r.auto[label] == 1 for r in rows)
        neg = sum(label in r.drawn_for and r.auto[label] == 0 for r in rows)
        note = "" if pos and neg else "  [yellow](a stratum is empty: no such automatic labels)[/yellow]"
        console.print(f"{label}: {pos} automatic positives, {neg} automatic negatives{note}")
    console.print(f"wrote {len(rows)} rows from {len(records)} records to {out}; fill the human_* columns "
                  "with 1, 0 or leave blank, then run `autovalidators label agreement`")


@label_app.command("agreement")
def label_agreement(
    review: Path = typer.Option(..., "--review", help="the filled review CSV"),
    out: Path = typer.Option(..., "--out", help="folder for agreement.json and AGREEMENT.md"),
    config: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    labels: Optional[str] = typer.Option(None, help="labels that must pass (default: every label in the CSV)"),
) -> None:
    """Cohen's kappa, precision and recall per label against the assessors; exit 1 under a floor."""
    from ..io import DataError
    from .assess import agreement, read_review_csv
    from .report import print_agreement, write_agreement_report

    cfg = _config(config)
    try:
        rows, csv_labels, errors = read_review_csv(review)
    except DataError as exc:
        raise _fail(str(exc)) from None
    chosen = _names(labels) or [n for n in csv_labels if n in cfg.labels]
    missing = sorted((set(chosen) - set(csv_labels)) | (set(chosen) - set(cfg.labels)))
    if missing:
        raise _fail(f"label(s) {missing} are not both in {review} and in the config")
    results = agreement(rows, cfg.labels, chosen)
    write_agreement_report(out, results, review=review, rows=len(rows), errors=errors, config_version=cfg.version)
    print_agreement(console, results, errors)
    failed = [r.label for r in results if not r.passed]
    if failed or errors:
        console.print(f"[red]assessor check failed[/red]: {', '.join(failed) or 'bad rows'}; do not train on these labels")
        raise typer.Exit(code=1)
    console.print("[green]assessor check passed[/green] for " + ", ".join(chosen))


@label_app.command("distill")
def label_distill(
    input_path: Path = typer.Option(..., "--input", help="training JSONL (text + labels), e.g. prepared/tone_e5_v2/train_sampled.jsonl"),
    output: Path = typer.Option(..., "--output", help="JSONL with soft targets, for train.train_file"),
    teacher: list[Path] = typer.Option(..., "--teacher", help="a trained tone model folder; repeat for several"),
    weight: float = typer.Option(0.5, help="the teachers' share of each known target, in (0, 0.5]"),
    threads: Optional[int] = typer.Option(None, help="onnxruntime threads per teacher"),
    labels: Optional[str] = typer.Option(None, help="comma-separated labels to soften (default: every label the teachers score)"),
    sources: Optional[str] = typer.Option(None, help="comma-separated sources (the records' `source`) to soften; the others keep their gold targets (default: all)"),
) -> None:
    """Soft targets: each known label mixed towards the mean score of the teachers that read the text."""
    from ..io import DataError
    from .distill import distill_file

    try:
        report = distill_file(input_path, output, teacher, weight, threads, _names(labels), _names(sources))
    except (DataError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    for line in report.bad_lines:
        console.print(f"[yellow]skipped[/yellow] {line}")
    scored = ", ".join(f"{name}: {n}" for name, n in report.teachers.items())
    console.print(f"wrote {output}: {report.softened} of {report.records} records softened "
                  f"({report.gold_only} read by no teacher and {report.other_sources} of other sources keep their gold targets, "
                  f"{report.records - report.softened - report.gold_only - report.other_sources} hold no softened label; "
                  f"scored per teacher: {scored})")
    if report.bad_lines:
        console.print(f"[red]{len(report.bad_lines)} bad line(s) skipped[/red]")
        raise typer.Exit(code=1)
