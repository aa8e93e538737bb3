"""int8 GEMM weights stored as uint8: exact sums on every CPU, the same scores as before, and every
shipped model stored that way (see training/unsigned_int8.py for why)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

import autovalidators.training.cli  # noqa: F401  (registers the commands)
from autovalidators.inference.cli import app
from autovalidators.inference.manifest import load_manifest, write_manifest
from autovalidators.inference.onnx_session import OnnxSession
from autovalidators.training import export as export_module
from autovalidators.training.tasks import get_task
from autovalidators.training.unsigned_int8 import SHIFT, WEIGHT_SLOTS, make_weights_unsigned, signed_weights

ROOT = Path(__file__).resolve().parents[2]
SPEC = get_task("qa_relevance")
DEPTH = 64


def saturating_matmul() -> onnx.ModelProto:
    """u8 activations of 255 times s8 weights of 127: each pair of products is 64,770, past int16."""
    weights = numpy_helper.from_array(np.full((DEPTH, 3), 127, np.int8), "weights")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["activations", "weights", "", ""], ["sums"])], "g",
        [helper.make_tensor_value_info("activations", TensorProto.UINT8, [1, DEPTH])],
        [helper.make_tensor_value_info("sums", TensorProto.INT32, [1, 3])], initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def run(model: onnx.ModelProto, feed: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


def test_unsigned_weights_sum_exactly_where_signed_ones_may_saturate():
    model = saturating_matmul()
    assert signed_weights(model) == ["weights"]
    # The weight had no zero point (0 in int8): the converted node gains one of 128.
    assert make_weights_unsigned(model) == 2 and signed_weights(model) == []
    activations = np.full((1, DEPTH), 255, np.uint8)
    np.testing.assert_array_equal(run(model, {"activations": activations}), np.full((1, 3), 255 * 127 * DEPTH))
    assert make_weights_unsigned(model) == 0  # already unsigned: nothing to do


def test_a_weight_shared_with_another_op_is_refused():
    model = saturating_matmul()
    model.graph.node.append(helper.make_node("DequantizeLinear", ["weights", "scale"], ["float_weights"]))
    with pytest.raises(ValueError, match="weights: also read by DequantizeLinear"):
        make_weights_unsigned(model)


def resign(path: Path) -> None:
    """Undoes the conversion, as an export from before it wrote the file."""
    model = onnx.load(str(path))
    slots = {name for node in model.graph.node if node.op_type in WEIGHT_SLOTS
             for name in (node.input[i] for i in WEIGHT_SLOTS[node.op_type])}
    for tensor in model.graph.initializer:
        if tensor.name in slots and tensor.data_type == TensorProto.UINT8:
            values = numpy_helper.to_array(tensor).astype(np.int16) - SHIFT
            tensor.CopyFrom(numpy_helper.from_array(values.astype(np.int8), tensor.name))
    onnx.save(model, str(path))


def logits(folder: Path) -> np.ndarray:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    features = [SPEC.encode(tokenizer, {"question": q, "answer": a}, 32)
                for q, a in [("who wrote hamlet", "shakespeare wrote it"), ("what is water", "hydrogen and oxygen")]]
    return OnnxSession(folder / "model.onnx").run(export_module.pad_batch(features, SPEC.input_names))["logits"]


def test_export_writes_unsigned_weights_and_the_command_mends_an_older_folder(tiny_exported, tmp_path):
    _, run_dir, shipped, _ = tiny_exported
    exported = onnx.load(str(shipped / "model.onnx"))
    gemms = [n for n in exported.graph.node if n.op_type in ("MatMulInteger", "QAttention")]
    assert gemms and signed_weights(exported) == []
    # A folder as an older export wrote it: signed weights, a manifest that verifies.
    older = tmp_path / "older"
    shutil.copytree(shipped, older)
    resign(older / "model.onnx")
    assert signed_weights(onnx.load(str(older / "model.onnx")))
    write_manifest(older, load_manifest(older, verify=False).model_dump(exclude={"format_version", "files"}))
    before = logits(older)
    result = CliRunner().invoke(app, ["export", "unsigned-int8", str(older)])
    assert result.exit_code == 0, result.output
    assert "manifest re-hashed" in result.output
    assert signed_weights(onnx.load(str(older / "model.onnx"))) == []
    load_manifest(older)  # the new file verifies
    # Lossless: the mended file scores as the fresh export does. Against the fp32 graph it is never
    # further off than the signed file; on an AVX2-only CPU (the AMD EPYC this was written on) the signed file's sums
    # saturate even in this random 2-layer model (0.0019 off fp32, the unsigned one 0.0003).
    mended = logits(older)
    np.testing.assert_array_equal(mended, logits(shipped))
    fp32 = tmp_path / "fp32"
    fp32.mkdir()
    shutil.copy(run_dir / "onnx" / "model_fp32.onnx", fp32 / "model.onnx")
    shutil.copy(shipped / "tokenizer.json", fp32)
    reference = logits(fp32)
    assert np.abs(mended - reference).max() <= np.abs(before - reference).max() + 1e-6
    assert np.abs(mended - reference).max() < 1e-3
    again = CliRunner().invoke(app, ["export", "unsigned-int8", str(older)])
    assert again.exit_code == 0 and "no int8 weights to convert" in again.output


def test_the_command_refuses_a_folder_that_does_not_verify(tiny_exported, tmp_path):
    _, _, shipped, _ = tiny_exported
    broken = tmp_path / "broken"
    shutil.copytree(shipped, broken)
    (broken / "tokenizer.json").write_text("{}")
    result = CliRunner().invoke(app, ["export", "unsigned-int8", str(broken)])
    assert result.exit_code == 2 and "sha256" in result.output


@pytest.mark.parametrize("name", sorted(p.parent.name for p in (ROOT / "models").glob("*/model.onnx")))
def test_every_shipped_model_scores_the_same_on_cpus_with_and_without_vnni(name):
    model = onnx.load(str(ROOT / "models" / name / "model.onnx"))
    assert signed_weights(model) == [], (f"models/{name}: int8 weights saturate on AVX2-only CPUs; run "
                                         f"`autovalidators export unsigned-int8 models/{name}`")
