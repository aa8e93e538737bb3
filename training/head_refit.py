"""A shipped classifier's output layer, refitted on its own frozen int8 encoder: graph surgery.

Why: a tone model's mistakes on neutral text (Russian encyclopaedic sentences flagged as toxic)
come from what its head was shown, not from what the encoder can tell apart. Fine-tuning the whole
encoder again needs its torch weights and hours of CPU; refitting the head on the encoder's
features needs one forward pass per text through the shipped int8 graph and seconds of
scikit-learn. The features are read from exactly the graph that serves, so the new head sees at
training time what it will see in production.

The surgery (`encoder_outputs`, `with_head`):
- the encoder's pooled vector is the output of the graph's last `Tanh` (BERT's pooler) and its
  last hidden state is what the pooler's `Gather` reads; both are found by op, not by name;
- everything downstream of the pooled vector (the old classifier: quantise, integer MatMul, scale,
  bias) is removed;
- the features are `[pooled ; masked mean of the last hidden state]` (the mean over real tokens:
  padding does not move it), and the new head is one fp32 `MatMul` + `Add` producing `logits`, so
  the model keeps its signature and every runtime that read the old file reads the new one.
The head is fp32: 768 x 6 weights cost 18 KB, and an fp32 layer has no per-call activation scale
that batch-mates could move.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FEATURES = "head_features"
LOGITS = "logits"


class SurgeryError(ValueError):
    """The graph does not have the shape this module edits (a pooler Tanh fed by a Gather)."""


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    by_input: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            by_input.setdefault(name, []).append(node)
    return by_input


def _pooler(graph: onnx.GraphProto, path: Path) -> tuple[str, str]:
    """(last hidden state, pooled vector) tensor names of a BERT-style classifier graph."""
    tanhs = [node for node in graph.node if node.op_type == "Tanh"]
    gathers = [node for node in graph.node if node.op_type == "Gather" and "pooler" in node.name]
    if not tanhs or not gathers:
        raise SurgeryError(f"{path}: no pooler (a Gather then a Tanh) found; this graph cannot take a refitted head")
    return gathers[-1].input[0], tanhs[-1].output[0]


def _drop_downstream(graph: onnx.GraphProto, start: str) -> None:
    """Remove every node that (transitively) reads `start`, the graph outputs they fed and the
    initializers nothing reads any more."""
    consumers = _consumers(graph)
    doomed: set[int] = set()
    frontier = [start]
    while frontier:
        for node in consumers.get(frontier.pop(), []):
            if id(node) not in doomed:
                doomed.add(id(node))
                frontier.extend(node.output)
    kept = [node for node in graph.node if id(node) not in doomed]
    del graph.node[:]
    graph.node.extend(kept)
    produced = {name for node in kept for name in node.output} | {i.name for i in graph.input}
    outputs = [o for o in graph.output if o.name in produced or o.name in {i.name for i in graph.initializer}]
    del graph.output[:]
    graph.output.extend(outputs)
    read = {name for node in kept for name in node.input}
    initializers = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def _feature_nodes(graph: onnx.GraphProto, hidden: str, pooled: str) -> None:
    """Append the nodes computing FEATURES = [pooled ; masked mean of hidden]."""
    graph.initializer.extend([numpy_helper.from_array(np.array([1], dtype=np.int64), "head_axis1"),
                              numpy_helper.from_array(np.array([2], dtype=np.int64), "head_axis2")])
    graph.node.extend([
        helper.make_node("Cast", ["attention_mask"], ["head_mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["head_mask", "head_axis2"], ["head_mask3"]),
        helper.make_node("Mul", [hidden, "head_mask3"], ["head_masked"]),
        helper.make_node("ReduceSum", ["head_masked", "head_axis1"], ["head_sum"], keepdims=0),
        helper.make_node("ReduceSum", ["head_mask", "head_axis1"], ["head_count"], keepdims=1),
        helper.make_node("Div", ["head_sum", "head_count"], ["head_mean"]),
        helper.make_node("Concat", [pooled, "head_mean"], [FEATURES], axis=1),
    ])


def encoder_outputs(path: str | Path) -> onnx.ModelProto:
    """The classifier at `path` without its head, with one output: FEATURES (batch, 2 x hidden)."""
    path = Path(path)
    model = onnx.load(str(path))
    graph = model.graph
    if any(FEATURES in node.output for node in graph.node):
        _drop_downstream(graph, FEATURES)  # a refitted model: its features stay, its head goes
    else:
        hidden, pooled = _pooler(graph, path)
        _drop_downstream(graph, pooled)
        _feature_nodes(graph, hidden, pooled)
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(FEATURES, TensorProto.FLOAT, ["batch", "features"]))
    onnx.checker.check_model(model)
    return model


def with_head(path: str | Path, weight: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    """The classifier at `path` with its head replaced: LOGITS = FEATURES @ weight + bias.

    `weight` is (n_features, n_labels), `bias` (n_labels,), both folded with any feature scaling.
    """
    model = encoder_outputs(path)
    graph = model.graph
    n_features = weight.shape[0]
    graph.initializer.extend([numpy_helper.from_array(np.asarray(weight, dtype=np.float32), "head_weight"),
                              numpy_helper.from_array(np.asarray(bias, dtype=np.float32), "head_bias")])
    graph.node.extend([helper.make_node("MatMul", [FEATURES, "head_weight"], ["head_matmul"]),
                       helper.make_node("Add", ["head_matmul", "head_bias"], [LOGITS])])
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["batch", weight.shape[1]]))
    if n_features <= 0:
        raise SurgeryError("a head needs at least one feature")
    onnx.checker.check_model(model)
    return model
