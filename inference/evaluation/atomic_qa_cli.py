"""`autovalidators prepare atomic-qa` and `autovalidators benchmark atomic-qa`.

Exit codes of the benchmark: 0 every triple had a prediction and every line was readable,
1 scores were written but some lines were bad or some predictions missing (listed), 2 the
command could not run.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from ..cli import _fail, benchmark_app, console, prepare_app

DEFAULT_SAMPLE = Path("data_prep/samples/atomic_qa/atomic_qa_triples.jsonl")


@prepare_app.command("atomic-qa")
def prepare_atomic_qa(
    datasets_dir: Path = typer.Option(Path("../shared/datasets"), help="the shared datasets folder"),
    output_dir: Path = typer.Option(Path("out/atomic_qa"), help="writes atomic_qa_triples.jsonl + data card here"),
    per_source: int = typer.Option(60, min=1, help="triples per (source, language) file"),
    max_per_context: int = typer.Option(1, min=1, help="most questions taken from one paragraph"),
    seed: int = typer.Option(13, help="sampling seed; the same seed gives the same triples"),
) -> None:
    """Build context–question–answer triples from XQuAD and TyDi QA GoldP (en, ru)."""
    from ...data_prep.atomic_qa import SOURCES, build_atomic_qa
    from ...data_prep.data_card import write_data_card
    from ...data_prep.io import DataError, write_jsonl

    try:
        triples = build_atomic_qa(datasets_dir, per_source=per_source, max_per_context=max_per_context, seed=seed)
    except DataError as exc:
        raise _fail(str(exc)) from None
    output = output_dir / "atomic_qa_triples.jsonl"
    count = write_jsonl(output, triples)
    write_data_card(
        output_dir, task="atomic_qa", splits={"benchmark": triples},
        breakdowns={"source": lambda t: t["source"], "language": lambda t: t["language"]},
        sources={f"{s.source}/{s.language}": f"{s.path} ({s.licence})" for s in SOURCES},
        config={"per_source": per_source, "max_per_context": max_per_context, "seed": seed},
        notes=["Only answerable questions; gold answers deduplicated; XQuAD en/ru are the same questions."],
    )
    console.print(f"wrote {count} triples to {output} (+ data card)")


@benchmark_app.command("atomic-qa")
def benchmark_atomic_qa(
    predictions: Path = typer.Option(..., help="JSONL of {id, prediction} from the system under test"),
    triples: Path = typer.Option(DEFAULT_SAMPLE, help="JSONL of triples (default: the shipped sample)"),
    embedding: str = typer.Option("auto", help="cosine from: auto (MiniLM if installed), minilm, lexical"),
    missing_as_empty: bool = typer.Option(
        False, help="score missing predictions as empty answers instead of leaving them out"),
    json_out: Path = typer.Option(Path("out/benchmarks/atomic_qa.json"), "--json", help="where to write the JSON"),
) -> None:
    """Exact match, token F1, BLEU and cosine similarity of short answers, per language and source."""
    from .atomic_qa import read_predictions, read_triples, score_atomic_qa

    for path in (triples, predictions):
        if not path.is_file():
            raise _fail(f"{path}: no such file")
    gold, triple_errors = read_triples(triples)
    predicted, prediction_errors = read_predictions(predictions)
    if not gold:
        raise _fail(f"{triples}: no valid triples" + (f" (first error: {triple_errors[0]})" if triple_errors else ""))
    try:
        with console.status(f"scoring {len(predicted)} predictions against {len(gold)} triples"):
            report = score_atomic_qa(gold, predicted, embedding=embedding, missing_as_empty=missing_as_empty,
                                     errors=[*triple_errors, *prediction_errors])
    except (ImportError, ValueError) as exc:
        raise _fail(str(exc)) from None
    table = Table(title=f"atomic-fact QA: {predictions.name} vs {triples.name}")
    for column in ("group", "triples", "scored", "missing", "EM", "F1", "BLEU", "sent. BLEU", "cosine"):
        table.add_column(column, justify="left" if column == "group" else "right")
    fmt = lambda v: "-" if v != v else f"{v:.3f}"  # noqa: E731 - NaN when a group has nothing scored
    for name, g in report.groups.items():
        table.add_row(name, str(g["triples"]), str(g["scored"]), str(g["missing"]), fmt(g["em"]), fmt(g["f1"]),
                      f"{g['bleu']:.1f}" if g["bleu"] == g["bleu"] else "-", f"{g['sentence_bleu']:.1f}"
                      if g["sentence_bleu"] == g["sentence_bleu"] else "-", fmt(g["cosine"]))
    console.print(table)
    console.print(f"cosine: {report.cosine}")
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    if report.missing:
        console.print(f"[yellow]missing predictions ({len(report.missing)}):[/yellow] " + ", ".join(report.missing[:20])
                      + (" …" if len(report.missing) > 20 else ""))
    if report.unknown:
        console.print(f"[yellow]predictions for unknown ids ({len(report.unknown)}):[/yellow] "
                      + ", ".join(report.unknown[:20]))
    for error in report.errors:
        console.print(f"[red]bad line[/red] {error}")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"triples": str(triples), "predictions": str(predictions), "embedding": embedding, **report.to_dict()}
    json_out.write_text(json.dumps(payload, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    console.print(f"wrote {json_out}")
    if report.errors or report.missing:
        raise typer.Exit(code=1)
