"""`autovalidators base-model from-onnx MODEL_DIR --to FOLDER`: a shipped encoder back as torch weights.

A shipped validator keeps only its int8 ONNX graph; the torch run it was exported from is often
gone (another machine, another session). To fine-tune it again, this reads the graph's weights back:
int8 matrices as (q - zero_point) * scale, the 4-bit word-embedding table block by block, the fused
attention's one QKV matrix split into query, key and value, every fp32 tensor (biases, layer norms,
positions) as it is. The result is a `BertForSequenceClassification` folder that `train` accepts as
`base_model`; its weights carry the int8 rounding of the graph they came from (the parity check
below says how far its logits are from the graph's).

The head: a plain classifier is read as it is. A refitted head (`train tone-head`: the pooled vector
and the mean of the last hidden states) keeps the pooled half as the classifier, so the torch model's
first logits differ from the graph's; fine-tuning trains the classifier again, and the parity is
measured on the encoder's pooled output and on the full refitted head computed beside it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from autovalidators.inference.manifest import Manifest, load_manifest
from autovalidators.training.base_models.e5 import PROVENANCE_FILE, TOKENIZER_CONFIG, bert_config

_LAYER = re.compile(r"/encoder/layer\.(\d+)/")
_PREFIX = "inner."  # export.py wraps the Hugging Face model as `inner`


class FromOnnxError(ValueError):
    """A graph this reader does not know how to turn back into torch weights."""


def _array(initializers: dict[str, Any], name: str) -> np.ndarray:
    from onnx import numpy_helper

    if name not in initializers:
        raise FromOnnxError(f"initializer {name!r} not found")
    return numpy_helper.to_array(initializers[name])


def _dequantised(initializers: dict[str, Any], weight: str, scale: str, zero_point: str) -> np.ndarray:
    q = _array(initializers, weight).astype(np.float32)
    zp = _array(initializers, zero_point).astype(np.float32) if zero_point else 0.0
    return ((q - zp) * _array(initializers, scale).astype(np.float32)).astype(np.float32)


def _block_dequantised(initializers: dict[str, Any], data: str, scales: str, block: int) -> np.ndarray:
    """GatherBlockQuantized's table (signed 4-bit, no zero point, one scale per `block` columns)."""
    q = _array(initializers, data).astype(np.int8).astype(np.float32)
    s = np.repeat(_array(initializers, scales).astype(np.float32), block, axis=1)[:, : q.shape[1]]
    return q * s


def _torch_path(node_name: str) -> str:
    """'/inner/bert/encoder/layer.0/attention/output/dense/MatMul_quant' -> 'bert.encoder.layer.0.attention.output.dense'."""
    parts = [p for p in node_name.split("/") if p]
    if parts and parts[0] == "inner":
        parts = parts[1:]
    return ".".join(parts[:-1])


def read_state(model_file: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The torch state dict (BertForSequenceClassification names) and the graph facts config needs."""
    import onnx
    from onnx import helper

    graph = onnx.load(str(model_file)).graph
    init = {t.name: t for t in graph.initializer}
    state: dict[str, np.ndarray] = {}
    facts: dict[str, Any] = {"heads": None, "layer_norm_eps": None, "head": None}
    for name in init:  # fp32 tensors saved under their torch names: biases, norms, position tables
        if name.startswith(_PREFIX) and init[name].data_type == onnx.TensorProto.FLOAT:
            if not name.endswith(("_scale", "_scales", "_zero_point")):
                state[name[len(_PREFIX):]] = _array(init, name)
        # Quantised under their own names (small graphs: embedding tables, even layer norms); the
        # `_Transposed` ones belong to a MatMulInteger and are read from the node below.
        elif name.startswith(_PREFIX) and name.endswith("_quantized") and "_Transposed" not in name:
            stem = name[: -len("_quantized")]
            state[stem[len(_PREFIX):]] = _dequantised(init, name, f"{stem}_scale", f"{stem}_zero_point")
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "GatherBlockQuantized":
            state["bert.embeddings.word_embeddings.weight"] = _block_dequantised(
                init, node.input[0], node.input[2], int(attrs.get("block_size", 32)))
        elif node.op_type == "QAttention":
            layer = _LAYER.search(node.output[0])
            if layer is None:
                raise FromOnnxError(f"{node.name}: cannot tell which layer it belongs to")
            qkv = _dequantised(init, node.input[1], node.input[4], node.input[7])  # [hidden, 3 * hidden]
            bias = _array(init, node.input[2])
            prefix = f"bert.encoder.layer.{layer.group(1)}.attention.self"
            for part, (w, b) in zip(("query", "key", "value"), zip(np.split(qkv, 3, axis=1), np.split(bias, 3))):
                state[f"{prefix}.{part}.weight"] = np.ascontiguousarray(w.T)
                state[f"{prefix}.{part}.bias"] = b
            facts["heads"] = int(attrs["num_heads"])
        elif node.op_type == "MatMulInteger":
            weight = node.input[1]
            if not weight.endswith("_quantized"):
                raise FromOnnxError(f"{node.name}: weight {weight!r} is not a quantised initializer")
            stem = weight[: -len("_quantized")]
            matrix = _dequantised(init, weight, f"{stem}_scale", node.input[3] if len(node.input) > 3 else "")
            state[f"{_torch_path(node.name)}.weight"] = np.ascontiguousarray(matrix.T)
        elif node.op_type in ("SkipLayerNormalization", "LayerNormalization") and "epsilon" in attrs:
            facts["layer_norm_eps"] = float(attrs["epsilon"])
        elif node.op_type == "MatMul" and "head_weight" in node.input:
            facts["head"] = {"weight": _array(init, "head_weight"), "bias": _array(init, "head_bias")}
    if facts["head"] is not None:
        hidden = state["bert.pooler.dense.weight"].shape[0]
        weight = facts["head"]["weight"]  # [features, labels]; features = pooled (+ mean) of `hidden` each
        state["classifier.weight"] = np.ascontiguousarray(weight[:hidden].T)
        state["classifier.bias"] = facts["head"]["bias"]
    missing = [k for k in ("bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight") if k not in state]
    if missing:
        raise FromOnnxError(f"{model_file}: no {missing[0]} in the graph")
    return state, facts


def _bert_config(state: dict[str, np.ndarray], facts: dict[str, Any], tokenizer, labels: list[str]) -> dict[str, Any]:
    """`e5.bert_config` with every size read off the recovered tensors, and the task's labels."""
    vocab, hidden = state["bert.embeddings.word_embeddings.weight"].shape
    layers = 1 + max(int(m.group(1)) for k in state if (m := re.match(r"bert\.encoder\.layer\.(\d+)\.", k)))
    config = bert_config(
        vocab_size=int(vocab), hidden=int(hidden), layers=layers, heads=facts["heads"],
        ffn=int(state["bert.encoder.layer.0.intermediate.dense.weight"].shape[0]),
        max_positions=int(state["bert.embeddings.position_embeddings.weight"].shape[0]),
        type_rows=int(state["bert.embeddings.token_type_embeddings.weight"].shape[0]),
        layer_norm_eps=facts["layer_norm_eps"] or 1e-12, pad_id=tokenizer.token_to_id("<pad>") or 0,
        bos_id=tokenizer.token_to_id("<s>"), eos_id=tokenizer.token_to_id("</s>"))
    # the task's trainer sets problem_type
    return config | {"architectures": ["BertForSequenceClassification"], "num_labels": len(labels),
                     "id2label": dict(enumerate(labels)), "label2id": {label: i for i, label in enumerate(labels)}}


def parity(folder: Path, model_dir: Path, manifest: Manifest, texts: list[str],
           head: dict[str, np.ndarray] | None) -> dict[str, Any]:
    """Logits of the graph vs the recovered weights, one text per call (no batch-mates in the int8
    activations). With a refitted head, the torch side applies that head to its pooled and mean vectors."""
    import torch
    from tokenizers import Tokenizer
    from transformers import BertForSequenceClassification

    from autovalidators.inference.onnx_session import OnnxSession

    session = OnnxSession(model_dir / manifest.model_file, threads=2)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    model = BertForSequenceClassification.from_pretrained(str(folder)).eval()
    gaps = []
    for text in texts:
        ids = tokenizer.encode(text).ids[: manifest.window.max_length]
        feed = {"input_ids": np.array([ids]), "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64)}
        graph = session.run(feed)["logits"][0]
        with torch.no_grad():
            out = model(**{k: torch.tensor(v) for k, v in feed.items()}, output_hidden_states=True)
            if head is None:
                mine = out.logits[0].numpy()
            else:
                last = out.hidden_states[-1]
                features = np.concatenate([model.bert.pooler(last)[0].numpy(), last[0].numpy().mean(axis=0)])
                mine = features @ head["weight"] + head["bias"]
        gaps.append(float(np.abs(mine - graph).max()))
    return {"texts": len(texts), "max_abs_logit_gap": max(gaps), "median_abs_logit_gap": float(np.median(gaps))}


def recover(model_dir: str | Path, to: str | Path, *, parity_texts: list[str] | None = None) -> dict[str, Any]:
    """Write `to/` (config.json, model.safetensors, tokenizer files, base_model.json); returns the record."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer

    model_dir, out = Path(model_dir), Path(to)
    manifest = load_manifest(model_dir)
    model_file = model_dir / manifest.model_file
    state, facts = read_state(model_file)
    tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer_file))
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(_bert_config(state, facts, tokenizer, manifest.labels), indent=2) + "\n")
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
    source = manifest.training.get("base_model_source") or {}
    record: dict[str, Any] = {
        "model": f"{manifest.name} {manifest.version} read back from its int8 graph; first from "
                 f"{source.get('model', manifest.base_model)}",
        "source": source.get("source"), "layers": source.get("layers"), "vocabulary": source.get("vocabulary"),
        "corpus": source.get("corpus", {}),
        "from_onnx": {"model_dir": str(model_dir), "model_file": manifest.model_file,
                      "sha256": manifest.model_sha256, "version": manifest.version,  # verified on load
                      "refitted_head": facts["head"] is not None},
    }
    if parity_texts:
        record["from_onnx"]["parity"] = parity(out, model_dir, manifest, parity_texts, facts["head"])
    (out / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record
