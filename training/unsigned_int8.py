"""Stores a quantized model's int8 GEMM weights as uint8 (zero point + 128), so that every x86 CPU
computes exact integer sums (no int16 saturation).

Why: onnxruntime multiplies the uint8 activations of a dynamic-int8 model by int8 weights with
`vpmaddubsw` on x86 CPUs without VNNI (AVX2 only: AMD Zen 1-3, Intel before Ice Lake). That
instruction adds two u8 x s8 products into an int16 and saturates at 32,767 (255 x 127 x 2 is
64,770). With VNNI the products are summed in int32, exactly. One model file thus gave two sets of
scores: on an AVX2-only AMD EPYC the shipped qa_relevance and tone models moved the regression
cases past their tolerances (toxic-insult-ru: relevance 0.598 -> 0.744, tone agreement 0.738 ->
0.592) and neutral Russian statements flagged by tone rose from 0.16 to 0.166; the same files
scored as recorded elsewhere. uint8 weights with a zero point of 128 go through the u8 x u8
kernel, which widens to int16 before it multiplies: exact on every CPU. The change is lossless,
(w + 128) - 128 = w, so a model keeps the scores it was measured with on a VNNI machine.
`tests/training/test_unsigned_int8.py` shows the saturation and its absence.

What it does not give: identical scores on every CPU. The float kernels (GELU, softmax, LayerNorm)
of AVX2 and AVX-512 builds round differently and each call's activation scale carries that into
the integers: the same qa_relevance file scored 53 of 1,591 held-out pairs more than 0.01 apart on
the two (at most 0.223). What it costs: on AVX2 the exact u8 x u8 kernel is slower than the
saturating u8 x s8 one (an ad-hoc timing on an AVX2-only EPYC, one 128-token text on 2 threads:
25-31 ms against 16-21 ms for qa_relevance, 26.1 against 16.7 ms for tone; `benchmark gate`
with `--models-dir` pointing at signed copies measures it on your CPU). Re-rounding the weights
to 7 bits, the other exact route, was as fast as signed but moved tone probabilities by up to
0.56 on 800 test texts, so it was not taken.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# op type -> (input index of the weight, input index of its zero point); the ops quantize_dynamic
# writes for MatMul and Attention.
WEIGHT_SLOTS = {"MatMulInteger": (1, 3), "QAttention": (1, 7)}
SHIFT = 128


class UnsignedInt8Error(ValueError):
    """The graph cannot be converted as is (a weight shared with another kind of op)."""


def make_weights_unsigned(model) -> int:
    """Converts `model` (an onnx ModelProto) in place; returns how many tensors changed (weights
    and their zero points). A model that holds no int8 GEMM weight is left as it is (0)."""
    from onnx import TensorProto, numpy_helper

    initializers = {t.name: t for t in model.graph.initializer}
    consumers: dict[str, set[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, set()).add(node.op_type)
    converted: set[str] = set()
    for node in model.graph.node:
        if node.op_type not in WEIGHT_SLOTS:
            continue
        weight_slot, zero_point_slot = WEIGHT_SLOTS[node.op_type]
        weight = node.input[weight_slot]
        if weight not in initializers or initializers[weight].data_type != TensorProto.INT8:
            continue  # a run-time weight, or one already unsigned
        zero_point = node.input[zero_point_slot] if len(node.input) > zero_point_slot else ""
        if not zero_point:
            # No zero point means 0 in int8; in uint8 it has to say 128.
            zero_point = f"{weight}_unsigned_zero_point"
            model.graph.initializer.append(numpy_helper.from_array(np.array(0, np.int8), zero_point))
            initializers[zero_point] = model.graph.initializer[-1]
            while len(node.input) <= zero_point_slot:
                node.input.append("")
            node.input[zero_point_slot] = zero_point
        for name in (weight, zero_point):
            if name in converted:
                continue
            others = consumers.get(name, set()) - set(WEIGHT_SLOTS)
            if others:
                raise UnsignedInt8Error(f"{name}: also read by {', '.join(sorted(others))}; "
                                        "cannot store it as uint8")
            tensor = initializers[name]
            if tensor.data_type != TensorProto.INT8:
                raise UnsignedInt8Error(f"{name}: an int8 weight's zero point is not int8")
            shifted = numpy_helper.to_array(tensor).astype(np.int16) + SHIFT
            tensor.CopyFrom(numpy_helper.from_array(shifted.astype(np.uint8), name))
            converted.add(name)
    return len(converted)


def make_file_unsigned(path: str | Path) -> int:
    """Converts one .onnx file in place; returns how many tensors changed."""
    import onnx

    path = Path(path)
    model = onnx.load(str(path))
    changed = make_weights_unsigned(model)
    if changed:
        onnx.save(model, str(path))
    return changed


def signed_weights(model) -> list[str]:
    """Names of the int8 GEMM weights left in `model`: on an AVX2-only CPU their sums saturate."""
    from onnx import TensorProto

    int8 = {t.name for t in model.graph.initializer if t.data_type == TensorProto.INT8}
    return [node.input[WEIGHT_SLOTS[node.op_type][0]] for node in model.graph.node
            if node.op_type in WEIGHT_SLOTS and node.input[WEIGHT_SLOTS[node.op_type][0]] in int8]
