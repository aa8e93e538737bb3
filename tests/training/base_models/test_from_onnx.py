"""`base-model from-onnx`: a tiny exported int8 model read back into torch weights that train again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autovalidators.training.base_models.from_onnx import FromOnnxError, read_state, recover
from autovalidators.training.tasks import get_task

SPEC = get_task("qa_relevance")


@pytest.fixture(scope="module")
def shipped(tiny_exported):
    """(run dir, shipped int8 folder) of the tiny exported run."""
    _, run_dir, to, _ = tiny_exported
    return run_dir, to


def test_every_trained_weight_comes_back_within_its_int8_step(shipped, tmp_path):
    from safetensors.numpy import load_file

    run_dir, to = shipped
    trained = load_file(str(run_dir / "best" / "model.safetensors"))
    recover(to, tmp_path / "base")
    recovered = load_file(str(tmp_path / "base" / "model.safetensors"))
    assert set(recovered) == {k for k in trained if not k.endswith("position_ids")}
    for name, weight in recovered.items():
        original = trained[name]
        assert weight.shape == original.shape, name
        # int8 per-channel: each value is off by at most half a step, a step being max|w| / 127 per column
        step = np.abs(original).max() / 127 + 1e-6
        assert np.abs(weight - original).max() <= step, name


def test_the_recovered_folder_is_a_base_model_train_accepts(shipped, tmp_path, tiny_data, make_config):
    from autovalidators.training.trainer import train

    _, to = shipped
    record = recover(to, tmp_path / "base", parity_texts=["who wrote hamlet", "water is made of hydrogen"])
    assert record["from_onnx"]["parity"]["max_abs_logit_gap"] < 0.1
    provenance = json.loads((tmp_path / "base" / "base_model.json").read_text())
    assert provenance["from_onnx"]["sha256"] == record["from_onnx"]["sha256"]
    config = make_config(tmp_path / "base", tiny_data, tmp_path / "run")
    train(SPEC, config.train)  # two steps from the recovered weights
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()


def test_a_graph_without_an_encoder_is_refused_by_name(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph), str(tmp_path / "model.onnx"))
    with pytest.raises(FromOnnxError, match="word_embeddings"):
        read_state(tmp_path / "model.onnx")
