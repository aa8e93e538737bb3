"""Export of a tiny trained run: ONNX parity with torch, int8, the shipped folder and its manifest."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autovalidators.inference.manifest import ManifestError, load_manifest
from autovalidators.training import export as export_module
from autovalidators.training.export import ExportError, export
from autovalidators.training.tasks import get_task
from autovalidators.training.tasks.qa_relevance import QARelevanceSpec

SPEC = get_task("qa_relevance")


def test_shipped_folder_holds_only_the_three_files_and_verifies(tiny_exported):
    _, run_dir, to, manifest = tiny_exported
    assert sorted(p.name for p in to.iterdir()) == ["manifest.json", "model.onnx", "tokenizer.json"]
    loaded = load_manifest(to)  # verifies every sha256
    assert loaded.task == "qa_relevance" and loaded.labels == ["irrelevant", "relevant"]
    assert 0.0 <= loaded.thresholds["relevant"] <= 1.0
    assert loaded.window.max_length == 32
    assert loaded.metrics["precision"] == "int8"
    assert loaded.training["data"]["train"]["sha256"]
    assert "warm_start" in loaded.training and loaded.training["warm_start"] is None  # trained from the encoder
    # fp32 stays in the run folder, never in the shipped one.
    assert (run_dir / "onnx" / "model_fp32.onnx").is_file()


def test_fp32_parity_with_torch_and_int8_in_report(tiny_exported):
    _, run_dir, _, _ = tiny_exported
    report = json.loads((run_dir / "onnx" / "export_report.json").read_text())
    assert report["parity_fp32"]["passed"] and report["parity_fp32"]["max_abs_diff"] < 1e-4
    assert {"dev_fp32", "dev_int8", "int8_drop"} <= set(report)
    # The fused graph is quantized only when it also matches torch.
    if report["quantized_from"] == "model_fused.onnx":
        assert report["parity_fused"]["passed"]


def test_onnx_logits_match_torch_on_a_padded_batch(tiny_exported):
    import torch
    from tokenizers import Tokenizer

    from autovalidators.inference.onnx_session import OnnxSession

    _, run_dir, _, _ = tiny_exported
    tokenizer = Tokenizer.from_file(str(run_dir / "best" / "tokenizer.json"))
    features = [SPEC.encode(tokenizer, {"question": q, "answer": a}, 32)
                for q, a in [("who wrote hamlet", "shakespeare"), ("what is water made of", "water is made of "
                                                                   "hydrogen and oxygen and more water")]]
    batch = export_module.pad_batch(features, SPEC.input_names)
    onnx = OnnxSession(run_dir / "onnx" / "model_fp32.onnx").run(batch)["logits"]
    model = SPEC.model_class().from_pretrained(str(run_dir / "best")).eval()
    with torch.no_grad():
        reference = model(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    np.testing.assert_allclose(onnx, reference, atol=1e-4, rtol=1e-4)


def test_tampered_model_is_refused(tiny_exported, tmp_path):
    import shutil

    _, _, to, _ = tiny_exported
    copy = tmp_path / "copy"
    shutil.copytree(to, copy)
    with open(copy / "model.onnx", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ManifestError, match="sha256"):
        load_manifest(copy)


def test_int8_that_loses_quality_is_refused(tiny_run, tmp_path, monkeypatch):
    config, run_dir = tiny_run

    class Degrading(QARelevanceSpec):
        calls = 0

        def metrics(self, logits, records, thresholds=None):
            # fp32 is scored first, then int8: pretend int8 lost 5 points of F1.
            Degrading.calls += 1
            return {**super().metrics(logits, records, thresholds), "f1": 0.9 if Degrading.calls == 1 else 0.85}

    spec = Degrading(**{f: getattr(SPEC, f) for f in SPEC.__dataclass_fields__})
    strict = config.model_copy(update={"export": config.export.model_copy(update={"int8_max_drop": 0.01})})
    with pytest.raises(ExportError, match="int8 dev f1"):
        export(spec, run_dir, tmp_path / "out", strict)
    assert not (tmp_path / "out" / "model.onnx").exists()


def test_export_refuses_a_folder_with_foreign_files(tiny_run, tmp_path):
    config, run_dir = tiny_run
    target = tmp_path / "target"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="notes.txt"):
        export(SPEC, run_dir, target, config)


def test_four_bit_vocabulary_table_is_the_only_4bit_tensor_and_runs(tiny_run, tiny_exported, tmp_path):
    # `tiny_exported` first: this export rewrites the run's onnx/ folder, which the tests above read.
    import onnx

    config, run_dir = tiny_run
    four_bit = config.model_copy(update={"export": config.export.model_copy(
        update={"optimize": True, "embedding_bits": 4, "embedding_block_size": 16})})
    manifest = export(SPEC, run_dir, tmp_path / "q4", four_bit)
    graph = onnx.load(str(tmp_path / "q4" / "model.onnx")).graph
    quantized = [n for n in graph.node if n.op_type == "GatherBlockQuantized"]
    # Only the vocabulary table is 4-bit; the position and token-type tables stay plain Gathers.
    assert len(quantized) == 1
    table = next(t for t in graph.initializer if t.name == quantized[0].input[0])
    assert table.data_type == onnx.TensorProto.INT4
    assert sum(n.op_type == "Gather" for n in graph.node) >= 2
    assert manifest.training["export"]["embedding_bits"] == 4
    # The fused embedding op has no 4-bit form: fusion must have left the lookups as Gathers.
    report = json.loads((run_dir / "onnx" / "export_report.json").read_text())
    assert "EmbedLayerNormalization" not in (report.get("fusion") or {})
    # The shipped file loads and scores like any other (inference has no torch).
    from autovalidators.inference.onnx_session import OnnxSession
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tmp_path / "q4" / "tokenizer.json"))
    batch = export_module.pad_batch([SPEC.encode(tokenizer, {"question": "who wrote hamlet", "answer": "shakespeare"},
                                                 32)], SPEC.input_names)
    logits = OnnxSession(tmp_path / "q4" / "model.onnx").run(batch)["logits"]
    assert logits.shape == (1, 2) and np.isfinite(logits).all()


def test_four_bit_quantizer_names_a_graph_without_a_vocabulary_table(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph), str(tmp_path / "plain.onnx"))
    with pytest.raises(ExportError, match="no vocabulary Gather"):
        export_module.quantize_int8(tmp_path / "plain.onnx", tmp_path / "out.onnx", embedding_bits=4)
