"""Training run → shipped model folder: ONNX fp32, optional BERT fusion, dynamic int8, checks.

Rules an export must pass (from `ExportConfig`):
- fp32 ONNX logits match torch within atol/rtol (1e-4) on real dev inputs of mixed lengths;
- the fused graph (onnxruntime's transformer optimizer) is kept only if it passes the same check;
- int8 is refused when its dev main metric drops more than `int8_max_drop` below fp32;
- the shipped model file is at most `max_model_mb`.

The shipped folder holds only `model.onnx`, `tokenizer.json` and `manifest.json`; the fp32 and
fused graphs and an `export_report.json` stay in `<run>/onnx/`.
"""

from __future__ import annotations

import json
import logging
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autovalidators.inference.manifest import BENCHMARK_NAME, CARD_FILES, MANIFEST_NAME, Manifest, write_manifest
from autovalidators.inference.onnx_session import OnnxSession

from autovalidators.training.config import ExportConfig, TaskConfig
from autovalidators.training.tasks.base import TaskSpec
from autovalidators.training.trainer import load_records, predict_logits
from autovalidators.training.unsigned_int8 import make_file_unsigned

logger = logging.getLogger(__name__)

# What an export replaces in a model folder. The old model's benchmark.json goes too: a new model
# has no numbers until `benchmark <task> --update-manifest` measures it.
SHIPPED_FILES = ("model.onnx", "tokenizer.json", MANIFEST_NAME, BENCHMARK_NAME)


class ExportError(RuntimeError):
    """An export that failed one of its rules; the message names the rule and the numbers."""


def pad_batch(features: Sequence[dict], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Right-pads `names` of each feature to the batch's longest, as int64 arrays."""
    width = max(len(f["input_ids"]) for f in features)
    return {name: np.array([f[name] + [0] * (width - len(f[name])) for f in features], dtype=np.int64)
            for name in names}


def onnx_logits(session: OnnxSession, features: Sequence[dict], names: Sequence[str], batch_size: int = 64
                ) -> np.ndarray:
    """Logits from an ONNX session, batched like `predict_logits` (length-sorted)."""
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    rows: list[Any] = [None] * len(features)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        logits = session.run(pad_batch([features[i] for i in chunk], names))["logits"]
        for row, index in enumerate(chunk):
            rows[index] = logits[row][: len(features[index]["input_ids"])] if logits.ndim == 3 else logits[row]
    if rows and np.ndim(rows[0]) == 2:  # token logits: ragged, kept as an object array (as predict_logits)
        ragged = np.empty(len(rows), dtype=object)
        ragged[:] = rows
        return ragged
    return np.stack(rows)


def export_fp32(model, spec: TaskSpec, example: dict[str, np.ndarray], path: Path, opset: int) -> None:
    """TorchScript-based export (`dynamo=False`): needs only `onnx`, works offline on torch 2.x."""
    import torch

    class LogitsOnly(torch.nn.Module):
        # ONNX wants plain tensors out, not a ModelOutput.
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).logits

    model.eval()
    axes = {name: {0: "batch", 1: "sequence"} for name in spec.input_names}
    axes["logits"] = {0: "batch", 1: "sequence"} if spec.problem_type == "token" else {0: "batch"}
    inputs = tuple(torch.tensor(example[name]) for name in spec.input_names)
    torch.onnx.export(LogitsOnly(model), inputs, str(path), input_names=list(spec.input_names),
                      output_names=list(spec.output_names), dynamic_axes=axes, opset_version=opset,
                      do_constant_folding=True, dynamo=False)


def try_optimize(fp32: Path, out: Path, model_config, fuse_embeddings: bool = True) -> dict[str, int] | None:
    """onnxruntime's BERT fusion (attention, LayerNorm, GELU); returns the fused-op counts.

    `fuse_embeddings=False` leaves the embedding lookups as plain Gathers: the fused
    EmbedLayerNormalization op has no 4-bit form, a Gather has (`embedding_bits: 4`)."""
    try:
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:  # pragma: no cover - part of onnxruntime wheels
        logger.warning("onnxruntime transformer optimizer unavailable: %s", exc)
        return None
    options = FusionOptions("bert")
    options.enable_embed_layer_norm = fuse_embeddings
    optimized = optimize_model(str(fp32), model_type="bert", num_heads=model_config.num_attention_heads,
                               hidden_size=model_config.hidden_size, opt_level=1, use_gpu=False,
                               optimization_options=options)
    optimized.save_model_to_file(str(out))
    return {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}


def vocabulary_gathers(model) -> list[str]:
    """Names of the Gather nodes that read the graph's largest lookup table: the vocabulary.

    The position (512 rows) and token-type (2 rows) tables are small and stay float."""
    rows = {t.name: t.dims[0] for t in model.graph.initializer if len(t.dims) == 2}
    gathers = [(rows[n.input[0]], n.name) for n in model.graph.node if n.op_type == "Gather" and n.input[0] in rows]
    largest = max((count for count, _ in gathers), default=0)
    return [name for count, name in gathers if count == largest]


def quantize_int8(source: Path, out: Path, per_channel: bool = True, embedding_bits: int = 8,
                  embedding_block_size: int = 32) -> None:
    import onnx
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # int8 weights, activations quantized at run time (dynamic): the standard CPU recipe for BERT
    # encoders. Per-channel weight scales kept the QA model's dev F1 within 0.1 point of fp32 where
    # per-tensor scales lost 2 points (measured on MiniLM-L6, see the export report).
    # Shape inference cannot type the outputs of fused contrib ops (Attention, SkipLayerNorm);
    # they are float tensors, which DefaultTensorType tells the quantizer.
    options = {"DefaultTensorType": TensorProto.FLOAT}
    if embedding_bits == 8:
        quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8, per_channel=per_channel,
                         extra_options=options)
        make_file_unsigned(out)  # the same scores on CPUs with and without VNNI (see unsigned_int8)
        return
    # 4-bit vocabulary table: on a multilingual base the embeddings are two thirds of the weights
    # (66.5k-72.3k pieces x 384); 4 bits per weight plus one fp32 scale per block put the 12-layer
    # QA model at 38.4 MB (blocks of 64; 40.1 MB with blocks of 32), under the 40 MB limit.
    # The matrices stay dynamic int8 (MatMulNBits is slower than int8 GEMM on this CPU).
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    tables = vocabulary_gathers(onnx.load(str(source), load_external_data=False))
    if not tables:
        raise ExportError(f"{source.name}: export.embedding_bits 4 found no vocabulary Gather to quantize "
                          "(is the embedding fused? fusion keeps it unfused when embedding_bits is 4)")
    int8 = out.with_name(out.stem + "_matmuls.onnx")
    quantize_dynamic(str(source), str(int8), weight_type=QuantType.QInt8, per_channel=per_channel,
                     op_types_to_quantize=["MatMul", "Attention"], extra_options=options)
    config = DefaultWeightOnlyQuantConfig(block_size=embedding_block_size, is_symmetric=True,
                                          op_types_to_quantize=("Gather",), quant_axes=(("Gather", 1),))
    matmuls = onnx.load(str(int8))
    # The quantizer takes every node of the listed op types; the small tables are excluded by name.
    small_tables = [n.name for n in matmuls.graph.node if n.op_type == "Gather" and n.name not in tables]
    quantizer = MatMulNBitsQuantizer(matmuls, nodes_to_exclude=small_tables, algo_config=config)
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)  # a line per node
    quantizer.process()
    quantizer.model.save_model_to_file(str(out), False)
    int8.unlink()
    make_file_unsigned(out)


def _parity(reference: np.ndarray, candidate: np.ndarray, config: ExportConfig) -> dict[str, Any]:
    reference = np.concatenate([np.ravel(r) for r in reference]).astype(np.float64)
    candidate = np.concatenate([np.ravel(c) for c in candidate]).astype(np.float64)
    return {"max_abs_diff": float(np.max(np.abs(reference - candidate))),
            "passed": bool(np.allclose(candidate, reference, atol=config.parity_atol, rtol=config.parity_rtol))}


def _clean_target(to: Path, dry_run: bool = False) -> None:
    """Removes a previous export's files (its model card stays: regenerate it with `autovalidators
    card`); refuses to touch a folder holding anything else."""
    if not to.exists():
        if not dry_run:
            to.mkdir(parents=True)
        return
    strangers = [p.name for p in to.iterdir() if p.name not in SHIPPED_FILES and p.name not in CARD_FILES]
    if strangers:
        raise ExportError(f"{to} holds files an export did not write ({', '.join(strangers)}); "
                          "choose an empty folder or remove them")
    if dry_run:
        return
    for name in SHIPPED_FILES:
        (to / name).unlink(missing_ok=True)


def export(spec: TaskSpec, run_dir: str | Path, to: str | Path, task_config: TaskConfig) -> Manifest:
    """Exports `<run_dir>/best` into `to`; returns the written manifest. Raises ExportError."""
    import torch

    config = task_config.export
    run_dir, to = Path(run_dir), Path(to)
    best = run_dir / "best"
    if not (best / "run.json").is_file():
        raise FileNotFoundError(f"{best}: no trained model (run.json missing); train first")
    run = json.loads((best / "run.json").read_text())
    _clean_target(to, dry_run=True)  # fail before minutes of work, not after
    for field, named in (("lexicon_labels", config.lexicon_labels), ("lexicon_required", config.lexicon_required)):
        unknown = sorted(set(named) - set(spec.labels or ()))
        if unknown:
            raise ExportError(f"export.{field} {unknown}: not labels of the {spec.name} model ({spec.labels})")
    if config.fallback_languages and not spec.language_fallback:
        raise ExportError(f"export.fallback_languages is set, but the {spec.name} validator has no "
                          "heuristic routing by language; remove it from the config")
    work = run_dir / "onnx"
    work.mkdir(exist_ok=True)

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(best / "tokenizer.json"))
    # Eager attention exports the plain MatMul/Softmax pattern that onnxruntime's optimizer fuses
    # into one Attention op (the SDPA export does not match it); the maths is the same.
    model = spec.model_class().from_pretrained(str(best), attn_implementation="eager").eval()
    max_length = run["config"]["max_length"]
    dev_records = load_records(run["data"]["dev"]["file"], config.max_dev_examples, run["config"]["seed"])
    dev = [spec.encode(tokenizer, r, max_length) for r in dev_records]
    example = pad_batch(dev[:8], spec.input_names)

    fp32 = work / "model_fp32.onnx"
    export_fp32(model, spec, example, fp32, config.opset)
    with torch.no_grad():
        torch_logits = predict_logits(model, dev, batch_size=64)
    report: dict[str, Any] = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    fp32_logits = onnx_logits(OnnxSession(fp32), dev, spec.input_names)
    report["parity_fp32"] = _parity(torch_logits, fp32_logits, config)
    if not report["parity_fp32"]["passed"]:
        raise ExportError(f"fp32 ONNX differs from torch: max |diff| {report['parity_fp32']['max_abs_diff']:.2e} "
                          f"> atol {config.parity_atol}")

    to_quantize = fp32
    if config.optimize:
        fused = work / "model_fused.onnx"
        report["fusion"] = try_optimize(fp32, fused, model.config, fuse_embeddings=config.embedding_bits == 8)
        if report["fusion"]:
            report["parity_fused"] = _parity(torch_logits, onnx_logits(OnnxSession(fused), dev, spec.input_names),
                                             config)
            if report["parity_fused"]["passed"]:
                to_quantize = fused
            else:
                logger.warning("fused graph fails parity (%.2e); quantizing the plain fp32 graph",
                               report["parity_fused"]["max_abs_diff"])
    report["quantized_from"] = to_quantize.name
    int8 = work / "model_int8.onnx"
    quantize_int8(to_quantize, int8, per_channel=config.int8_per_channel, embedding_bits=config.embedding_bits,
                  embedding_block_size=config.embedding_block_size)

    int8_logits = onnx_logits(OnnxSession(int8), dev, spec.input_names)
    fp32_thresholds = spec.thresholds(fp32_logits, dev_records, config)
    int8_thresholds = spec.thresholds(int8_logits, dev_records, config)
    report["dev_fp32"] = spec.metrics(fp32_logits, dev_records, fp32_thresholds)
    report["dev_int8"] = spec.metrics(int8_logits, dev_records, int8_thresholds)
    drop = report["dev_fp32"][spec.main_metric] - report["dev_int8"][spec.main_metric]
    report["int8_drop"] = {"metric": spec.main_metric, "drop": float(drop), "max_drop": config.int8_max_drop}
    ship_int8 = config.ship_int8
    (work / "export_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if ship_int8 and drop > config.int8_max_drop:
        raise ExportError(f"int8 dev {spec.main_metric} {report['dev_int8'][spec.main_metric]:.4f} is "
                          f"{drop:.4f} below fp32 ({report['dev_fp32'][spec.main_metric]:.4f}); the limit is "
                          f"{config.int8_max_drop}. Set export.ship_int8: false to ship fp32 instead")
    shipped, thresholds = (int8, int8_thresholds) if ship_int8 else (to_quantize, fp32_thresholds)
    size_mb = shipped.stat().st_size / 1e6
    if size_mb > config.max_model_mb:
        raise ExportError(f"{shipped.name} is {size_mb:.1f} MB, over export.max_model_mb {config.max_model_mb}")
    (work / "export_report.json").write_text(json.dumps(report, indent=2) + "\n")

    _clean_target(to)
    shutil.copyfile(shipped, to / "model.onnx")
    shutil.copyfile(best / "tokenizer.json", to / "tokenizer.json")
    fields = {
        "name": spec.name,
        "task": spec.name,
        "version": datetime.now(timezone.utc).strftime("%Y.%m.%d-%H%M"),
        "base_model": run["base_model"],
        "labels": list(spec.labels),
        "thresholds": thresholds,
        "window": {"max_length": max_length, "stride": spec.window_stride,
                   "aggregation": spec.window_aggregation},
        "metrics": {"dev": report["dev_int8" if ship_int8 else "dev_fp32"], "dev_fp32": report["dev_fp32"],
                    "parity_fp32_max_abs_diff": report["parity_fp32"]["max_abs_diff"],
                    "precision": "int8" if ship_int8 else "fp32", "model_mb": round(size_mb, 2)},
        "training": {"run_dir": str(run_dir), "best_step": run.get("best_step"), "data": run["data"],
                     "config": run["config"], "task": spec.manifest_extra(),
                     "export": config.model_dump(mode="json"), "quantized_from": report["quantized_from"],
                     "fusion": report.get("fusion"), "base_model_source": run.get("base_model_source"),
                     "vocabulary_swap": run.get("vocabulary_swap"), "config_source": run.get("config_source"),
                     "warm_start": run.get("warm_start"), "weight_average": run.get("weight_average")},
        "fallback_languages": list(config.fallback_languages),
        "lexicon_labels": list(config.lexicon_labels),
        "lexicon_required": {label: list(languages) for label, languages in config.lexicon_required.items()},
    }
    manifest = write_manifest(to, fields)
    logger.info("exported %s (%.1f MB, %s) to %s", spec.name, size_mb, "int8" if ship_int8 else "fp32", to)
    return manifest
