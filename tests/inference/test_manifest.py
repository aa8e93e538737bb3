"""Model folders: manifest written by export, verified on load; the ONNX input boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from autovalidators.inference.manifest import ManifestError, load_manifest, update_manifest, write_manifest  # noqa: E402
from autovalidators.inference.onnx_session import OnnxSession  # noqa: E402
from autovalidators.inference.validators import load_validator  # noqa: E402

FIELDS = {
    "name": "qa_relevance", "task": "qa_relevance", "version": "test", "base_model": "tiny",
    "labels": ["irrelevant", "relevant"], "thresholds": {"relevant": 0.5},
    "window": {"max_length": 128, "stride": 0},
}


def tiny_onnx(path) -> None:
    """input_ids (int64) -> logits = input_ids cast to float, summed over the sequence."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch"])
    nodes = [helper.make_node("Cast", ["input_ids"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["f", "axes"], ["logits"], keepdims=0)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(nodes, "tiny", [ids], [out], initializer=[axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "qa_relevance"
    folder.mkdir()
    tiny_onnx(folder / "model.onnx")
    (folder / "tokenizer.json").write_text("{}")
    write_manifest(folder, FIELDS)
    return folder


def test_manifest_round_trip_records_every_files_sha256(model_folder):
    manifest = load_manifest(model_folder)
    assert set(manifest.files) == {"model.onnx", "tokenizer.json"}
    assert len(manifest.model_sha256) == 64


def test_update_keeps_other_fields_and_rehashes_but_refuses_a_tampered_folder(model_folder):
    before = load_manifest(model_folder)
    updated = update_manifest(model_folder, fallback_languages=["ru"])
    assert load_manifest(model_folder) == updated
    assert updated.fallback_languages == ["ru"] and updated.files == before.files
    assert updated.model_dump(exclude={"fallback_languages"}) == before.model_dump(exclude={"fallback_languages"})
    (model_folder / "tokenizer.json").write_text('{"tampered": true}')
    with pytest.raises(ManifestError, match="does not match"):  # never re-hashes over a bad file
        update_manifest(model_folder, fallback_languages=[])


def test_a_changed_file_is_refused(model_folder):
    (model_folder / "tokenizer.json").write_text('{"tampered": true}')
    with pytest.raises(ManifestError, match="tokenizer.json.*does not match"):
        load_manifest(model_folder)


def test_a_missing_file_is_refused(model_folder):
    (model_folder / "model.onnx").unlink()
    with pytest.raises(ManifestError, match="model.onnx is listed in the manifest but missing"):
        load_manifest(model_folder)


def test_a_future_format_version_is_refused(model_folder):
    path = model_folder / "manifest.json"
    data = json.loads(path.read_text())
    data["format_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="format_version 99"):
        load_manifest(model_folder)


def test_registry_refuses_a_tampered_model_instead_of_falling_back(model_folder):
    (model_folder / "model.onnx").write_bytes(b"garbage")
    with pytest.raises(ManifestError):
        load_validator("qa_relevance", model_folder.parent)


def test_registry_falls_back_to_heuristics_without_a_model(tmp_path):
    validator = load_validator("tone", tmp_path)
    assert validator.info.kind == "heuristic"


def test_onnx_session_names_a_missing_input_and_casts_the_rest(tmp_path):
    tiny_onnx(tmp_path / "m.onnx")
    session = OnnxSession(tmp_path / "m.onnx", threads=1)
    with pytest.raises(ValueError, match="'input_ids' is required by the model but not provided"):
        session.run({"attention_mask": np.ones((1, 3))})
    out = session.run({"input_ids": [[1, 2, 3], [4, 5, 6]]})  # plain lists of ints are cast to int64
    np.testing.assert_allclose(out["logits"], [6.0, 15.0])


def test_onnx_sessions_spin_only_while_a_call_runs_unless_told_otherwise(tmp_path, monkeypatch):
    """Threads spinning between calls take the cores from the next model of a one-case call (see
    OnnxSession): by default they spin only while a call runs; always or never on request."""
    tiny_onnx(tmp_path / "m.onnx")

    def spinning() -> tuple[str, str]:
        options = OnnxSession(tmp_path / "m.onnx", threads=2).session.get_session_options()
        return (options.get_session_config_entry("session.intra_op.allow_spinning"),
                options.get_session_config_entry("session.force_spinning_stop"))

    assert spinning() == ("1", "1")
    monkeypatch.setenv("AUTOVALIDATORS_ORT_SPIN", "1")
    assert spinning() == ("1", "0")
    monkeypatch.setenv("AUTOVALIDATORS_ORT_SPIN", "0")
    assert spinning()[0] == "0"
    monkeypatch.setenv("AUTOVALIDATORS_ORT_SPIN", "yes")
    with pytest.raises(ValueError, match="AUTOVALIDATORS_ORT_SPIN='yes': choose one of run, 1, 0"):
        OnnxSession(tmp_path / "m.onnx", threads=2)
