"""QARelevanceValidator on onnxruntime: padding invariance, outputs, registry, the shipped model."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.validators import load_validator
from autovalidators.inference.validators.qa_relevance import BOUNDARY, QARelevanceValidator

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "qa_relevance"

PAIRS = [
    ("who wrote hamlet", "hamlet was written by shakespeare"),
    ("what is the capital of france", "paris is the capital of france and the nile flows through egypt "
                                      "and bees make honey from nectar " * 3),
    ("how tall is everest", "everest"),
    ("when did the war end", "the war ended in 1945"),
    ("what do bees make", "water is made of hydrogen and oxygen"),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random BERT trained for 1 step and exported: a real model folder, built offline."""
    pytest.importorskip("torch")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from autovalidators.data_prep.io import write_jsonl
    from autovalidators.data_prep.qa_relevance import QARelevancePrepareConfig
    from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig
    from autovalidators.training.export import export
    from autovalidators.training.tasks import get_task
    from autovalidators.training.tiny import build_tiny_encoder, tiny_qa_records, tiny_words
    from autovalidators.training.trainer import train

    root = tmp_path_factory.mktemp("qa")
    encoder = build_tiny_encoder(root / "encoder", tiny_words())
    records = tiny_qa_records()
    write_jsonl(root / "train.jsonl", records)
    write_jsonl(root / "dev.jsonl", records)
    config = TaskConfig[QARelevancePrepareConfig](
        prepare=QARelevancePrepareConfig(output_dir=str(root)),
        train=TrainConfig(base_model=str(encoder), max_length=24, batch_size=8, max_steps=1,
                          train_file=str(root / "train.jsonl"), dev_file=str(root / "dev.jsonl"),
                          output_dir=str(root / "run"), cpu_threads=1),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=False),
    )
    spec = get_task("qa_relevance")
    train(spec, config.train)
    export(spec, root / "run", root / "models" / "qa_relevance", config)
    return root / "models"


def validator(models: Path, **kwargs) -> QARelevanceValidator:
    folder = models / "qa_relevance"
    return QARelevanceValidator(folder, load_manifest(folder), threads=1, **kwargs)


def test_batch_and_single_give_the_same_scores_fp32(tiny_model):
    # Padding is masked, so with float weights a pair's score cannot depend on its batch.
    fp32 = tiny_model.parent / "run" / "onnx" / "model_fp32.onnx"
    v = validator(tiny_model, batch_size=3, model_path=fp32)
    batched = v.scores(PAIRS)
    singles = np.array([v.scores([pair])[0] for pair in PAIRS])
    np.testing.assert_allclose(batched, singles, atol=1e-6)
    assert np.all((batched >= 0) & (batched <= 1))
    assert len(set(np.round(batched, 6))) > 1  # not a constant


def test_batch_and_single_give_identical_scores_int8(tiny_model):
    # Dynamic int8 picks one activation scale per call, so the default runs each pair alone,
    # unpadded: a pair's score is then exactly the same in any batch and order.
    v = validator(tiny_model)
    batched = v.scores(PAIRS)
    singles = np.array([v.scores([pair])[0] for pair in PAIRS])
    reversed_ = v.scores(PAIRS[::-1])[::-1]
    np.testing.assert_array_equal(batched, singles)
    np.testing.assert_array_equal(batched, reversed_)


def test_long_answers_are_truncated_to_the_window(tiny_model):
    v = validator(tiny_model)
    long_answer = "paris is the capital of france " * 50
    assert len(v.tokenizer.encode("who wrote hamlet", long_answer).ids) == v.max_length
    assert 0.0 <= v.scores([("who wrote hamlet", long_answer)])[0] <= 1.0


def test_predict_outputs_follow_the_manifest_threshold(tiny_model):
    v = validator(tiny_model)
    cases = [Case(id=str(i), question=q, answer=a) for i, (q, a) in enumerate(PAIRS)]
    cases.append(Case(id="empty", question="who wrote hamlet", answer="  "))
    outputs = v.predict(cases)
    assert len(outputs) == len(cases)
    assert outputs[-1].applies is False
    for output in outputs[:-1]:
        assert output.applies and output.source == "onnx"
        # The manifest's threshold cuts the model's probability; the served score puts that cut at 0.5.
        assert output.relevant == (output.model_score >= v.threshold) == (output.score >= BOUNDARY)


def test_registry_loads_the_onnx_validator_from_a_models_dir(tiny_model):
    loaded = load_validator("qa_relevance", tiny_model)
    assert isinstance(loaded, QARelevanceValidator)
    assert loaded.info.kind == "onnx" and loaded.info.sha256 == load_manifest(tiny_model / "qa_relevance").model_sha256


@pytest.mark.slow
@pytest.mark.skipif(not (SHIPPED / "manifest.json").is_file(), reason="no shipped models/qa_relevance (export one)")
def test_shipped_model_through_the_gate():
    from autovalidators.inference.gate import Gate

    gate = Gate(validators=["qa_relevance"])
    assert gate.validators["qa_relevance"].info.kind == "onnx"
    context = ["William Shakespeare wrote Hamlet around 1600. The play is set in Denmark."]
    on_topic = Case(id="on", question="Who wrote Hamlet?", context=context,
                    answer="Hamlet was written by William Shakespeare.")
    off_topic = Case(id="off", question="Who wrote Hamlet?", context=context,
                     answer="Our store opens at 9 am and closes at 6 pm on weekdays.")
    results = gate.validate_batch([on_topic, off_topic])
    scores = [r.validators["qa_relevance"] for r in results]
    assert scores[0].score > scores[1].score
    assert scores[0].relevant and not scores[1].relevant


@pytest.mark.slow
@pytest.mark.skipif(not (SHIPPED / "manifest.json").is_file(), reason="no shipped models/qa_relevance (export one)")
def test_shipped_model_reads_a_stressed_question_and_answer_as_their_plain_spelling():
    from autovalidators.inference.manifest import load_manifest
    from autovalidators.inference.text import plain_spelling
    from autovalidators.inference.validators.qa_relevance import QARelevanceValidator

    validator = QARelevanceValidator(SHIPPED, load_manifest(SHIPPED), threads=1)
    stressed = [("Кто вы́играл Сраже́ние при Энти́теме?", "Сраже́ние при Энти́теме вы́играла а́рмия Сою́за."),
                ("Кто тако́й Хуа́н Э́во Мора́лес?", "Хуа́н Э́во Мора́лес — президе́нт Боли́вии.")]
    plain = [(plain_spelling(q), plain_spelling(a)) for q, a in stressed]
    assert np.array_equal(validator.scores(stressed), validator.scores(plain))


def test_calibration_puts_the_dev_threshold_on_the_gates_boundary():
    from autovalidators.inference.validators.qa_relevance import BOUNDARY, calibrate

    assert calibrate(0.42, 0.42) == pytest.approx(BOUNDARY)
    assert calibrate(0.0, 0.42) == 0.0 and calibrate(1.0, 0.42) == pytest.approx(1.0)
    points = [calibrate(p / 100, 0.42) for p in range(101)]
    assert points == sorted(points)  # monotone: the model's ranking is kept
    assert calibrate(0.41, 0.42) < BOUNDARY <= calibrate(0.43, 0.42)


def test_a_data_to_text_request_is_not_judged_and_never_reaches_the_model(tiny_model):
    from autovalidators.inference.validators.heuristic import HeuristicQARelevance

    record = '{"name": "Maeda", "city": "Goleta", "categories": "Japanese, Sushi Bars", "stars": 4.5}'
    overview = Case(id="d2t", question="Write an objective overview of the business from the structured data.",
                    context=[record], answer="Maeda is a Japanese sushi bar in Goleta rated 4.5 stars.")
    question = Case(id="qa", question="How many stars does Maeda have?", context=[record],
                    answer="Maeda is rated 4.5 stars.")
    v = validator(tiny_model)
    asked: list = []
    scores = v.scores
    v.scores = lambda pairs: asked.extend(pairs) or scores(pairs)
    d2t, qa = v.predict([overview, question])
    assert not d2t.applies and d2t.model_score is None and qa.applies
    assert asked == [(question.question, question.answer)]
    # A question over the record is judged; the heuristic fallback draws the same line, and a declared
    # meta.task overrides the context's shape.
    heuristic = HeuristicQARelevance()
    assert [o.applies for o in heuristic.predict([overview, question])] == [False, True]
    declared = overview.model_copy(update={"meta": {"task": "QA"}})
    assert heuristic.predict([declared])[0].applies
