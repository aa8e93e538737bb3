"""Head refit surgery on the shipped tone model: the encoder stays as shipped, the head is ours."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from autovalidators.inference.onnx_session import OnnxSession
from autovalidators.training.head_refit import FEATURES, SurgeryError, encoder_outputs, with_head
from autovalidators.training.tone_head import fit_head, fit_thresholds, neutral_bound, HeadFit, ToneHeadConfig

MODEL = Path(__file__).resolve().parents[2] / "models" / "tone" / "model.onnx"
IDS = [np.array([[0, 1320, 83, 10, 25380, 6, 2]]), np.array([[0, 4865, 5, 2]])]


def _run(session: OnnxSession, ids: np.ndarray, output: str) -> np.ndarray:
    return session.run({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})[output]


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    path = tmp_path_factory.mktemp("head") / "encoder.onnx"
    onnx.save(encoder_outputs(MODEL), str(path))
    return OnnxSession(path, threads=1)


def test_a_new_head_computes_exactly_features_times_weight_plus_bias(headless, tmp_path):
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(size=(768, 6)).astype(np.float32), rng.normal(size=6).astype(np.float32)
    path = tmp_path / "model.onnx"
    onnx.save(with_head(MODEL, weight, bias), str(path))
    model = OnnxSession(path, threads=1)
    assert model.output_names == ["logits"]  # same signature as the shipped model
    for ids in IDS:
        expected = _run(headless, ids, FEATURES) @ weight + bias
        np.testing.assert_allclose(_run(model, ids, "logits"), expected, atol=1e-4)


def test_the_shipped_model_carries_this_modules_head_and_regrafting_it_changes_nothing(headless, tmp_path):
    # The shipped tone model is a refit: its logits are its features times its fp32 head, and
    # putting the same head back on its encoder gives the same model output.
    graph = onnx.load(str(MODEL)).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    weight, bias = tensors["head_weight"], tensors["head_bias"]
    assert weight.dtype == np.float32 and weight.shape == (768, 6)
    path = tmp_path / "regrafted.onnx"
    onnx.save(with_head(MODEL, weight, bias), str(path))
    shipped, model = OnnxSession(MODEL, threads=1), OnnxSession(path, threads=1)
    for ids in IDS:
        logits = _run(shipped, ids, "logits")
        np.testing.assert_allclose(_run(model, ids, "logits"), logits, atol=1e-5)
        np.testing.assert_allclose(_run(headless, ids, FEATURES) @ weight + bias, logits, atol=1e-4)
        assert not np.allclose(logits, 0.0)


def test_a_graph_without_a_pooler_is_refused_by_name(tmp_path):
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["x"], ["logits"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1])])
    path = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(SurgeryError, match="plain.onnx: no pooler"):
        encoder_outputs(path)


def test_fit_head_learns_a_separable_label_and_skips_missing_targets():
    rng = np.random.default_rng(1)
    features = rng.normal(size=(400, 8)) * [1, 1, 1, 1, 1, 1, 1, 50] + 3.0
    positive = features[:, 0] > 3.0
    targets = np.stack([positive.astype(float), np.full(400, -1.0)], axis=1)
    targets[:50, 0] = -1.0  # unknown rows must not count
    weight, bias = fit_head(features, targets, np.ones(400), HeadFit(C=10.0))
    predicted = features @ weight[:, 0] + bias[0] > 0
    assert (predicted == positive).mean() > 0.97  # raw features in, scaling folded into the weights
    assert bias[1] < -5 and not weight[:, 1].any()  # a label nobody labelled is never flagged


def test_neutral_bound_raises_only_the_thresholds_neutral_text_would_cross():
    config = ToneHeadConfig.model_validate({
        "prepare": {}, "neutral_sources": ["wiki"],
        "thresholds": {"max_neutral_flags": 0.05, "blocking_labels": ["toxicity", "insult"]}})
    records = [{"source": "wiki", "language": "ru"}] * 100 + [{"source": "olid", "language": "en"}] * 10
    scores = np.zeros((110, 6))
    scores[:100, 0] = np.linspace(0.0, 0.99, 100)  # neutral Russian text scoring up to 0.99 toxicity
    scores[:100, 2] = 0.1  # and low on insult
    scores[100:, :] = 0.99  # abusive English text: not neutral, never bounds anything
    raised = neutral_bound({"toxicity": 0.5, "insult": 0.2, "politics": 0.2}, scores, records, config)
    flagged = (scores[:100, 0] >= raised["toxicity"]) | (scores[:100, 2] >= raised["insult"])
    assert flagged.sum() == 5  # 5 of 100 neutral texts may reach a blocking label: no more, and no fewer
    assert raised["insult"] == 0.2 and raised["politics"] == 0.2  # not crossed / not blocking: as chosen on dev


@pytest.mark.parametrize("bound", [False, True])
def test_neutral_statements_bound_the_thresholds_only_when_asked(bound):
    config = ToneHeadConfig.model_validate({
        "prepare": {}, "neutral_sources": ["wiki"],
        "thresholds": {"max_neutral_flags": 0.05, "blocking_labels": ["identity_hate"],
                       "bound_neutral_statements": bound}})
    statement = {"source": "identity_statements", "language": "en"}
    records = ([{"source": "wiki", "language": "en"}] * 20 + [dict(statement, row=f"neutral:{i}") for i in range(20)]
               + [dict(statement, row=f"hateful:{i}") for i in range(20)])
    scores = np.zeros((60, 6))
    scores[20:40, 4] = np.linspace(0.05, 0.5, 20)  # neutral statements about groups reaching 0.5 identity hate
    scores[40:, 4] = 0.9  # hateful statements: never bound anything
    raised = neutral_bound({"identity_hate": 0.2}, scores, records, config)
    neutral_flagged = int((scores[20:40, 4] >= raised["identity_hate"]).sum())
    unbounded = int((scores[20:40, 4] >= 0.2).sum())
    assert unbounded == 13 and neutral_flagged == (1 if bound else unbounded)  # bounded: 5% of 20 may stay
    assert (scores[40:, 4] >= raised["identity_hate"]).all()


def _two_language_dev():
    """English gold rows cut cleanly at 0.5, Russian ones at 0.8, and neutral Russian text up to 0.7."""
    records, rows = [], []
    for language, cut in (("en", 0.5), ("ru", 0.8)):
        for score in np.round(np.linspace(0.05, 0.95, 19), 2):
            records.append({"source": "gold", "language": language,
                            "labels": {"toxicity": int(score >= cut)}})
            rows.append(score)
    records += [{"source": "wiki", "language": "ru", "labels": {"toxicity": 0}}] * 20
    rows += list(np.linspace(0.0, 0.7, 20))
    scores = np.zeros((len(rows), 6))
    scores[:, 0] = rows
    targets = np.full((len(rows), 6), -1.0)
    targets[:, 0] = [r["labels"]["toxicity"] for r in records]
    return scores, targets, records


@pytest.mark.parametrize("own", [[], ["ru"]])
def test_a_language_of_its_own_gets_cuts_chosen_on_its_rows_alone(own):
    config = ToneHeadConfig.model_validate({
        "prepare": {}, "neutral_sources": ["wiki"],
        "thresholds": {"max_neutral_flags": 0.0, "blocking_labels": ["toxicity"], "own_languages": own}})
    scores, targets, records = _two_language_dev()
    default, by_language, best = fit_thresholds(scores, targets, records, config)
    if not own:  # pooled: the neutral Russian text pushes the one cut above 0.7, over English comments too
        assert by_language == {} and default["toxicity"] > 0.7
        return
    assert set(by_language) == {"ru"} and set(best) == {"default", "ru"}
    assert 0.45 < default["toxicity"] <= 0.5  # English: its own best F1, untouched by Russian neutral text
    assert 0.75 < by_language["ru"]["toxicity"] <= 0.8  # Russian: best F1 (above every neutral text)
    ru = [i for i, r in enumerate(records) if r["language"] == "ru" and r["source"] == "wiki"]
    assert not (scores[ru, 0] >= by_language["ru"]["toxicity"]).any()


def test_an_own_language_without_dev_rows_is_refused_by_name():
    from autovalidators.data_prep.io import DataError

    config = ToneHeadConfig.model_validate({"prepare": {}, "neutral_sources": ["wiki"],
                                            "thresholds": {"own_languages": ["kk"]}})
    scores, targets, records = _two_language_dev()
    with pytest.raises(DataError, match="no dev rows for language 'kk'"):
        fit_thresholds(scores, targets, records, config)


def test_refitting_a_refitted_model_replaces_its_head_and_keeps_its_features(headless, tmp_path):
    rng = np.random.default_rng(2)
    first, second = tmp_path / "first.onnx", tmp_path / "second.onnx"
    onnx.save(with_head(MODEL, rng.normal(size=(768, 6)), np.zeros(6)), str(first))
    weight = rng.normal(size=(768, 6)).astype(np.float32)
    onnx.save(with_head(first, weight, np.ones(6)), str(second))
    model = OnnxSession(second, threads=1)
    for ids in IDS:
        np.testing.assert_allclose(_run(model, ids, "logits"), _run(headless, ids, FEATURES) @ weight + 1.0, atol=1e-4)


@pytest.mark.parametrize("required", [None, {"obscenity": ["ru"], "insult": ["ru", "en"]}])
def test_the_refitted_manifest_keeps_or_replaces_the_lexicon_rules_as_the_config_says(tmp_path, required):
    import shutil

    from autovalidators.inference.manifest import load_manifest, update_manifest
    from autovalidators.training.tone_head import ship

    encoder = tmp_path / "encoder"
    encoder.mkdir()
    for name in ("manifest.json", "tokenizer.json", "model.onnx"):
        shutil.copyfile(MODEL.parent / name, encoder / name)
    update_manifest(encoder, lexicon_required={"obscenity": ["en"]})
    data = tmp_path / "prepared"
    data.mkdir()
    for name in ("train.jsonl", "dev.jsonl"):
        (data / name).write_text("{}\n")
    config = ToneHeadConfig.model_validate({
        "model_dir": str(encoder), "neutral_sources": ["wiki"], "lexicon_required": required,
        "prepare": {"output_dir": str(data), "train_file_sampled": "train.jsonl", "dev_file_sampled": "dev.jsonl"}})
    report = {"dev": {"gold_sources": {}, "neutral_flags": {}, "statements": {}}, "parity": {}}
    thresholds = load_manifest(encoder).thresholds
    ship(config, MODEL, tmp_path / "refitted", thresholds, {}, report, {"train": [], "dev": []})
    shipped = load_manifest(tmp_path / "refitted")
    assert shipped.lexicon_required == (required if required is not None else {"obscenity": ["en"]})
