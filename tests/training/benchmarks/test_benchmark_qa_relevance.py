"""`benchmark qa-relevance` quality: pooled, per-language and per-source test metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autovalidators.training.benchmarks.qa_relevance import quality


class FakeValidator:
    """Scores a pair by a lookup on its answer: no model needed to check the bookkeeping."""

    threshold = 0.5

    def __init__(self, score_of: dict[str, float]):
        self.score_of = score_of

    def scores(self, pairs):
        return np.asarray([self.score_of[answer] for _, answer in pairs])


def record(answer: str, label: int, language: str, source: str) -> dict:
    return {"question": "q", "answer": answer, "label": label, "language": language, "source": source}


def test_test_metrics_are_broken_down_by_language_and_source():
    test = [record("en+", 1, "en", "wikiqa_train"), record("en-", 0, "en", "wikiqa_train"),
            record("ru+", 1, "ru", "xquad_ru"), record("ru-", 0, "ru", "xquad_ru"),
            record("ru+2", 1, "ru", "tydi_ru_dev")]
    # English ranked right, Russian ranked wrong: the pooled AUC hides the language that fails.
    validator = FakeValidator({"en+": 0.9, "en-": 0.1, "ru+": 0.3, "ru-": 0.6, "ru+2": 0.4})

    result, scores = quality(validator, test, [])

    assert scores.tolist() == [0.9, 0.1, 0.3, 0.6, 0.4]
    test_metrics = result["test"]
    assert test_metrics["pairs"] == 5
    assert set(test_metrics["by_language"]) == {"en", "ru"}
    en, ru = test_metrics["by_language"]["en"], test_metrics["by_language"]["ru"]
    assert (en["pairs"], en["roc_auc"], en["f1"]) == (2, 1.0, 1.0)
    assert ru["pairs"] == 3 and ru["roc_auc"] == 0.0 and ru["f1"] == 0.0
    assert ru["threshold"] == 0.5
    by_source = test_metrics["by_source"]
    assert {k: v["pairs"] for k, v in by_source.items()} == {"tydi_ru_dev": 1, "wikiqa_train": 2, "xquad_ru": 2}
    assert math.isnan(by_source["tydi_ru_dev"]["roc_auc"])  # one class only: no AUC, not an error
    assert by_source["tydi_ru_dev"]["recall"] == 0.0


def test_records_without_language_are_grouped_as_unknown():
    test = [{"question": "q", "answer": "a", "label": 1}, {"question": "q", "answer": "b", "label": 0}]
    result, _ = quality(FakeValidator({"a": 0.8, "b": 0.2}), test, [])
    assert set(result["test"]["by_language"]) == {"unknown"}
    assert result["test"]["by_language"]["unknown"]["roc_auc"] == pytest.approx(1.0)
