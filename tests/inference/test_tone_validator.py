"""ToneValidator on onnxruntime: padding invariance, windows over long texts, outputs, registry, and the
shipped model inside the Gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators import load_validator
from autovalidators.inference.validators.tone import ToneValidator, split_windows

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "tone"

TEXTS = ["you are an idiot", "thanks for asking the order shipped", "hello", "stupid moron kill them " * 2,
         "nice day friend thanks for asking"]


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    from tone_model_helpers import build_tiny_tone_model

    return build_tiny_tone_model(tmp_path_factory.mktemp("tone"))


def validator(models: Path, **kwargs) -> ToneValidator:
    folder = models / "tone"
    return ToneValidator(folder, load_manifest(folder), threads=1, **kwargs)


def test_split_windows_cover_every_token_with_overlap():
    ids = list(range(100, 130))  # 30 content tokens
    windows = split_windows(ids, max_length=12, stride=4, cls_id=1, sep_id=2)
    assert all(len(w) <= 12 and w[0] == 1 and w[-1] == 2 for w in windows)
    contents = [w[1:-1] for w in windows]
    assert sorted({t for c in contents for t in c}) == ids  # nothing dropped
    for left, right in zip(contents, contents[1:]):
        assert left[-4:] == right[:4]  # consecutive windows share `stride` tokens
    assert split_windows([], 12, 4, 1, 2) == [[1, 2]]
    with pytest.raises(ValueError, match="stride"):
        split_windows(ids, max_length=6, stride=4, cls_id=1, sep_id=2)


@pytest.mark.slow
@pytest.mark.parametrize("precision,batch_size,atol", [("fp32", 2, 1e-5), ("int8", 1, 0.0)])
def test_batch_and_single_give_the_same_scores(tiny_models, precision, batch_size, atol):
    # fp32: padding is masked, so padded calls of two windows are exact to float noise. int8
    # quantizes activations per call, so its default runs each window alone and is exact.
    fp32 = tiny_models.parent / "run" / "onnx" / "model_fp32.onnx"
    v = validator(tiny_models, batch_size=batch_size, model_path=fp32 if precision == "fp32" else None)
    batched = v.scores(TEXTS)
    singles = np.vstack([v.scores([t]) for t in TEXTS])
    np.testing.assert_allclose(batched, singles, atol=atol)
    assert batched.shape == (len(TEXTS), len(v.labels))
    assert np.all((batched >= 0) & (batched <= 1))
    assert len(set(np.round(batched[:, 0], 6))) > 1  # not a constant


@pytest.mark.slow
def test_short_text_is_encoded_as_in_training(tiny_models):
    from autovalidators.training.tasks import get_task

    v = validator(tiny_models)
    features = get_task("tone").encode(v.tokenizer.__class__.from_file(str(tiny_models / "tone" / "tokenizer.json")),
                                       {"text": TEXTS[1]}, v.max_length)
    assert v.windows([TEXTS[1]])[0].windows == [features["input_ids"]]


@pytest.mark.slow
def test_long_text_is_windowed_and_aggregated_by_max(tiny_models):
    v = validator(tiny_models)
    long_text = " ".join(["thanks for asking the order shipped nice day friend"] * 12 + ["you are an idiot"])
    windows = v.windows([long_text])[0]
    assert windows.n_tokens > v.max_length and len(windows.windows) > 1  # not truncated
    assert all(len(w) <= v.max_length for w in windows.windows)
    per_window = v.window_probabilities(windows.windows)
    np.testing.assert_allclose(v.scores([long_text])[0], per_window.max(axis=0), atol=1e-6)
    # The insult sits only in the last window; the text's score is that window's.
    last = v.window_probabilities([windows.windows[-1]])[0]
    assert np.all(v.scores([long_text])[0] >= last - 1e-6)


@pytest.mark.slow
def test_predict_follows_per_label_thresholds_and_skips_empty_answers(tiny_models):
    v = validator(tiny_models)
    cases = [Case(id="a", question="q", answer=TEXTS[0]), Case(id="b", question="q", answer="   "),
             Case(id="c", question="q", answer=TEXTS[1])]
    outputs = v.predict(cases)
    assert not outputs[1].applies and outputs[1].source == "onnx"
    for output in (outputs[0], outputs[2]):
        assert output.applies and output.source == "onnx"
        assert set(output.scores) == set(v.labels) == set(output.thresholds)
        assert output.flagged == tuple(l for l in v.labels if output.scores[l] >= output.thresholds[l])
    assert v.thresholds == load_manifest(tiny_models / "tone").thresholds


@pytest.mark.slow
def test_registry_loads_the_onnx_tone_validator(tiny_models):
    loaded = load_validator("tone", tiny_models)
    assert isinstance(loaded, ToneValidator) and loaded.info.kind == "onnx"


@pytest.mark.slow
def test_shipped_model_rejects_a_toxic_answer_through_the_gate():
    if not (SHIPPED / "manifest.json").is_file():
        pytest.skip(f"{SHIPPED} holds no trained tone model (train and export it: see configs/tone_model.yaml)")
    from autovalidators.inference.gate import Gate

    gate = Gate(validators=["tone"], models_dir=SHIPPED.parent)
    toxic = Case(id="t", question="Can you help me with my order?",
                 answer="Shut up, you fucking idiot. Nobody cares about your stupid order, moron.")
    polite = Case(id="p", question="Can you help me with my order?",
                  answer="Of course! Your order shipped yesterday and should arrive within three days.")
    rejected, accepted = gate.validate_batch([toxic, polite])
    assert rejected.decision.value == "REJECT"
    tone = rejected.validators["tone"]
    assert tone.source == "onnx" and tone.flagged
    assert any(label in rejected.reason for label in tone.flagged), rejected.reason
    assert not accepted.validators["tone"].flagged
    # Plain Russian must not read as unsafe (the English vocabulary used to flag it).
    russian = gate.validate(Case(id="r", question="Где мой заказ?",
                                 answer="Ваш заказ отправлен вчера и прибудет в течение трёх дней."))
    assert not russian.validators["tone"].flagged, russian.validators["tone"].scores


def with_fallback_languages(models: Path, tmp_path: Path, languages: list[str]) -> Path:
    """A copy of the tiny tone folder whose manifest routes `languages` to the heuristic."""
    import shutil

    from autovalidators.inference.manifest import update_manifest

    folder = tmp_path / "tone"
    shutil.copytree(models / "tone", folder)
    update_manifest(folder, fallback_languages=languages)
    return folder


def test_languages_in_the_manifest_go_to_the_heuristic_and_the_rest_to_the_model(tiny_models, tmp_path):
    folder = with_fallback_languages(tiny_models, tmp_path, ["ru"])
    v = ToneValidator(folder, load_manifest(folder), threads=1)
    cases = [Case(id="en", question="q", answer=TEXTS[0]),
             Case(id="ru-clean", question="q", answer="Спасибо за вопрос, заказ уже отправлен."),
             Case(id="ru-obscene", question="q", answer="Да пошёл ты, мудак, со своим заказом."),
             Case(id="empty", question="q", answer=" ")]
    en, ru_clean, ru_obscene, empty = v.predict(cases)
    assert en.source == "onnx" and ru_clean.source == ru_obscene.source == "heuristic"
    assert not ru_clean.flagged and "obscenity" in ru_obscene.flagged
    assert not empty.applies
    # served_scores (what the benchmark scores) flags exactly what predict serves.
    texts = [c.answer for c in cases[:3]]
    served, routed = v.served_scores(texts)
    assert routed.tolist() == [False, True, True]
    for row, output in zip(served, (en, ru_clean, ru_obscene)):
        assert v.flagged(row) == output.flagged
    np.testing.assert_allclose(served[0], v.scores(texts[:1])[0])
    reused, _ = v.served_scores(texts, model_scores=v.scores(texts))  # the benchmark's path
    np.testing.assert_allclose(reused, served, atol=1e-4)  # int8: batch padding moves scores by ~1e-5


def test_lexicon_labels_raise_the_label_and_toxicity_to_their_thresholds_on_a_match(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    update_manifest(folder, lexicon_labels=["threat"], thresholds={**load_manifest(folder).thresholds,
                                                                   "threat": 0.97, "toxicity": 0.98})
    v = ToneValidator(folder, load_manifest(folder), threads=1)
    texts = ["Ask me again and I will kill you.", "Ещё раз спросишь — убью.", "Kill the process and restart it."]
    raw = v.scores(texts)
    served, routed = v.served_scores(texts)
    threat, toxicity = v.labels.index("threat"), v.labels.index("toxicity")
    for row in (0, 1):  # en and ru threats: raised exactly to the thresholds unless the model says more
        assert served[row, threat] == max(raw[row, threat], 0.97)
        assert served[row, toxicity] == max(raw[row, toxicity], 0.98)
    np.testing.assert_allclose(served[2], raw[2])  # "kill the process" is no threat
    other = [i for i in range(len(v.labels)) if i not in (threat, toxicity)]
    np.testing.assert_allclose(served[:, other], raw[:, other])
    outputs = v.predict([Case(id=str(i), question="q", answer=t) for i, t in enumerate(texts)])
    assert {"threat", "toxicity"} <= set(outputs[0].flagged) and {"threat", "toxicity"} <= set(outputs[1].flagged)
    assert [v.flagged(row) for row in served] == [o.flagged for o in outputs]


def test_a_lexicon_required_label_stands_only_on_a_match_in_its_languages(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    # Every text reaches obscenity at a cut of 0: what is left flagged is what the lexicon allows.
    update_manifest(folder, lexicon_required={"obscenity": ["ru"]},
                    thresholds={**load_manifest(folder).thresholds, "obscenity": 0.0})
    v = ToneValidator(folder, load_manifest(folder), threads=1)
    texts = ["Художник Хуан Миро родился в Барселоне.", "Да пошёл ты на хуй.", "Juan Miró was a painter."]
    raw = v.scores(texts)
    served, _ = v.served_scores(texts)
    obscenity = v.labels.index("obscenity")
    assert served[0, obscenity] < 0.0 <= raw[0, obscenity]           # Russian, no мат root: capped below
    assert served[1, obscenity] == raw[1, obscenity]                 # Russian with one: the model's score
    assert served[2, obscenity] == raw[2, obscenity]                 # English is not ruled by the lexicon
    other = [i for i in range(len(v.labels)) if i != obscenity]
    np.testing.assert_allclose(served[:, other], raw[:, other])
    outputs = v.predict([Case(id=str(i), question="q", answer=t) for i, t in enumerate(texts)])
    assert ["obscenity" in o.flagged for o in outputs] == [False, True, True]


def test_a_lexicon_required_label_the_model_or_the_lexicon_lacks_is_refused(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    update_manifest(folder, lexicon_required={"sarcasm": ["ru"]})
    with pytest.raises(ValueError, match="lexicon_required \\['sarcasm'\\] are not among its labels"):
        ToneValidator(folder, load_manifest(folder), threads=1)
    # A label the model has but the lexicon has no words for would never stand: refused too.
    update_manifest(folder, lexicon_required={"toxicity": ["ru"]})
    with pytest.raises(ValueError, match="lexicon_required \\['toxicity'\\] have no words in the tone lexicon"):
        ToneValidator(folder, load_manifest(folder), threads=1)


def test_a_lexicon_label_the_model_lacks_is_refused(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    update_manifest(folder, lexicon_labels=["sarcasm"])
    with pytest.raises(ValueError, match="lexicon_labels \\['sarcasm'\\] are not among its labels"):
        ToneValidator(folder, load_manifest(folder), threads=1)


def test_without_fallback_languages_russian_goes_to_the_model(tiny_models):
    v = validator(tiny_models)
    (output,) = v.predict([Case(id="ru", question="q", answer="Спасибо за вопрос.")])
    assert output.source == "onnx" and not v.fallback_languages


def export_with(tiny_models: Path, tmp_path: Path, spec=None, **export_settings):
    """Exports the tiny tone run with these `export` settings (the tests below expect a refusal)."""
    from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task
    from autovalidators.training.tasks.tone import TonePrepareConfig

    root = tiny_models.parent
    config = TaskConfig[TonePrepareConfig](
        prepare=TonePrepareConfig(output_dir=str(root)),
        train=TrainConfig(base_model=str(root / "encoder"), train_file=str(root / "train.jsonl"),
                          dev_file=str(root / "dev.jsonl"), output_dir=str(root / "run")),
        export=ExportConfig(**export_settings))
    return export(spec or get_task("tone"), root / "run", tmp_path / "tone", config)


@pytest.mark.slow
def test_export_refuses_fallback_languages_for_a_task_without_routing(tiny_models, tmp_path):
    import dataclasses

    from autovalidators.training.export import ExportError
    from autovalidators.training.tasks import get_task

    spec = dataclasses.replace(get_task("tone"), language_fallback=False)
    with pytest.raises(ExportError, match="fallback_languages"):
        export_with(tiny_models, tmp_path, spec, fallback_languages=["ru"])


@pytest.mark.slow
def test_export_refuses_lexicon_labels_the_task_does_not_have(tiny_models, tmp_path):
    from autovalidators.training.export import ExportError

    with pytest.raises(ExportError, match="export.lexicon_labels \\['sarcasm'\\]"):
        export_with(tiny_models, tmp_path, lexicon_labels=["sarcasm"])


def test_a_language_with_its_own_thresholds_is_cut_at_them_and_served_scores_agree(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    texts = ["you are an idiot", "ты идиот", "Спасибо за вопрос.", "thanks for asking"]
    raw = ToneValidator(folder, load_manifest(folder), threads=1).scores(texts)
    toxicity = list(load_manifest(folder).labels).index("toxicity")
    # Russian cut just above the Russian texts' scores, the default cut just below every score: the
    # same encoder score flags an English text and not a Russian one.
    russian_cut = float(np.nextafter(raw[1:3, toxicity].max(), np.inf))
    default_cut = float(np.nextafter(raw[:, toxicity].min(), -np.inf))
    update_manifest(folder, thresholds={**load_manifest(folder).thresholds, "toxicity": default_cut},
                    thresholds_by_language={"ru": {"toxicity": russian_cut}})
    v = ToneValidator(folder, load_manifest(folder), threads=1)
    outputs = v.predict([Case(id=str(i), question="q", answer=t) for i, t in enumerate(texts)])
    assert ["toxicity" in o.flagged for o in outputs] == [True, False, False, True]
    assert outputs[1].thresholds["toxicity"] == russian_cut and outputs[0].thresholds["toxicity"] == default_cut
    # Other labels keep the default cuts in Russian; scores are the model's own in every language.
    assert {k: val for k, val in outputs[1].thresholds.items() if k != "toxicity"} == \
        {k: val for k, val in v.thresholds.items() if k != "toxicity"}
    for row, output in zip(raw, outputs):
        assert [output.scores[label] for label in v.labels] == pytest.approx(row.tolist(), abs=1e-6)
    # The benchmarks' view: every row on the default scale flags exactly what predict serves, and the
    # order of scores within a language is kept.
    served, _ = v.served_scores(texts)
    assert [v.flagged(row) for row in served] == [o.flagged for o in outputs]
    np.testing.assert_allclose(served[[0, 3]], raw[[0, 3]], atol=1e-6)
    assert np.argsort(served[1:3, toxicity]).tolist() == np.argsort(raw[1:3, toxicity]).tolist()


def test_thresholds_by_language_naming_an_unknown_label_is_refused(tiny_models, tmp_path):
    from autovalidators.inference.manifest import update_manifest

    folder = with_fallback_languages(tiny_models, tmp_path, [])
    update_manifest(folder, thresholds_by_language={"ru": {"sarcasm": 0.5}})
    with pytest.raises(ValueError, match="thresholds_by_language names \\['sarcasm'\\]"):
        ToneValidator(folder, load_manifest(folder), threads=1)
