"""Abstention data, training and export on tiny offline fixtures (no ../shared/datasets needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autovalidators.data_prep.abstention import AbstentionDataConfig, build, prepare_abstention, real_label
from autovalidators.inference.abstention import AbstentionModel, load_abstention
from autovalidators.inference.case import Case

pytest.importorskip("sklearn")
pytest.importorskip("onnx")

from autovalidators.training.abstention.train import (  # noqa: E402
    AbstentionConfig, ExportError, FeatureConfig, TrainConfig, export, prf, train,
)


def _squad(path: Path, language: str) -> None:
    sentence = {"en": "The tower was opened in 1889 by the city council of Paris.",
                "ru": "Башню открыли в 1889 году по решению городского совета Парижа."}[language]
    articles = [{"title": f"a{a}", "paragraphs": [{"context": sentence + f" It has {a + 2} floors.", "qas": [
        {"id": f"{language}{a}-{q}", "question": "When?", "answers": [{"text": str(1889 + q), "answer_start": 0}]}
        for q in range(3)]}]} for a in range(10)]
    path.write_text(json.dumps({"data": articles}, ensure_ascii=False))


@pytest.fixture()
def data_root(tmp_path) -> Path:
    root = tmp_path / "datasets"
    (root / "ragtruth_subset").mkdir(parents=True)
    (root / "halueval_general" / "data").mkdir(parents=True)
    (root / "xquad").mkdir()
    responses = ["Unable to answer based on given passages.", "The tower opened in 1889.",
                 "Based on the passages, it costs 12 dollars."] * 4
    with open(root / "ragtruth_subset" / "ragtruth_600.jsonl", "w") as handle:
        for i, text in enumerate(responses):
            handle.write(json.dumps({"id": str(i), "response": text}) + "\n")
    halueval = ["Sorry, as an AI language model, I cannot see the file. Please provide more details.",
                "As an AI language model, I can't browse. However, here is a list:\n1. Milk\n2. Eggs",
                "Photosynthesis turns light into chemical energy."] * 4
    with open(root / "halueval_general" / "data" / "general_data.json", "w") as handle:
        for i, text in enumerate(halueval):
            handle.write(json.dumps({"ID": str(i), "chatgpt_response": text}) + "\n")
    for language in ("en", "ru"):
        _squad(root / "xquad" / f"xquad.{language}.json", language)
    return root


def tiny_config(tmp_path: Path, data_root: Path, model: str = "logistic") -> AbstentionConfig:
    return AbstentionConfig(
        prepare=AbstentionDataConfig(data_root=str(data_root), out_dir=str(tmp_path / "prepared"),
                                     refusals_per_family=4, contrasts_per_family=2, hedged_per_family=2,
                                     claims_per_family=2, real_answers_per_language=30),
        features=FeatureConfig(hash_dim=1 << 12),
        train=TrainConfig(model=model, hidden=4, max_iter=5 if model == "mlp" else 100,
                          output_dir=str(tmp_path / "run")),
    )


def test_real_label_rule():
    assert real_label("Unable to answer based on given passages.") == 1
    assert real_label("I'm sorry, but I cannot find that. Please provide more details.") == 1
    assert real_label("As an AI language model, I can't draw. However, here is a table:\n1. a") == 0
    assert real_label("The tower opened in 1889.") == 0


def test_split_holds_families_out_whole(tmp_path, data_root):
    splits = build(tiny_config(tmp_path, data_root).prepare)
    families = {name: {r["family"] for r in rows} for name, rows in splits.items()}
    assert not families["train"] & families["test"] and not families["train"] & families["dev"]
    refusal_families = {f for f in families["test"] if ":refusal:" in f}
    assert refusal_families  # some refusal wordings are only ever seen in test
    languages = {r["language"] for rows in splits.values() for r in rows if r["label"] == 1}
    assert languages == {"en", "ru"}


@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_prepare_train_export_load(tmp_path, data_root, model):
    config = tiny_config(tmp_path, data_root, model)
    card = prepare_abstention(config.prepare)
    assert card["splits"]["train"]["rows"] > 0
    summary = train(config)
    assert 0.0 <= summary["threshold"] <= 1.0 and summary["model"] == model
    manifest = export(config, tmp_path / "run", tmp_path / "models" / "abstention")  # checks ONNX parity
    assert manifest.task == "abstention" and set(manifest.files) == {"model.onnx", "featurizer.json"}
    detector = load_abstention(tmp_path / "models")
    assert isinstance(detector, AbstentionModel)
    outputs = detector.predict([Case(id="1", question="", answer="Данных для ответа недостаточно."),
                                Case(id="2", question="", answer="")])
    assert outputs[1].probability is None and isinstance(outputs[0].abstains, bool)


def test_export_refuses_an_oversized_model(tmp_path, data_root):
    config = tiny_config(tmp_path, data_root)
    prepare_abstention(config.prepare)
    train(config)
    small = config.model_copy(update={"export": config.export.model_copy(update={"max_model_mb": 0.001})})
    with pytest.raises(ExportError, match="max_model_mb"):
        export(small, tmp_path / "run", tmp_path / "models" / "abstention")


def test_train_without_prepared_data_names_the_command(tmp_path, data_root):
    with pytest.raises(FileNotFoundError, match="prepare abstention"):
        train(tiny_config(tmp_path, data_root))


def test_prf_counts():
    assert prf([1, 1, 0, 0], [True, False, True, False]) == {
        "precision": 0.5, "recall": 0.5, "f1": 0.5, "accuracy": 0.5, "rows": 4, "positives": 2}
