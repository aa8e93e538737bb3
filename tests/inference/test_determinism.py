"""Same input, same output: on the shipped models and `configs/gate.yaml`, a case's decision and
scores do not depend on its batch-mates, their order or the onnxruntime thread count.

Before one-row-per-call encoders, 3 of 60 RAGTruth cases changed decision between `validate` and
`validate_batch` and a score moved by up to 0.11 (dynamic int8 scales activations per call).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from autovalidators.inference import Case, Gate
from autovalidators.inference.batch_bench import ragtruth_cases
from autovalidators.inference.case import read_cases
from autovalidators.inference.config import load_gate_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "inference" / "examples"
RAGTRUTH = ROOT.parent / "shared" / "datasets" / "ragtruth_subset" / "ragtruth_600.jsonl"
TOLERANCE = 1e-6


def _real_cases() -> list[Case]:
    # The shipped regression baseline (English) and Russian examples, plus RAGTruth-sized answers
    # with their passages: long contexts, several claim sentences, windows of different lengths.
    cases = [r for name in ("regression_cases.jsonl", "russian_cases.jsonl")
             for r in read_cases(EXAMPLES / name) if isinstance(r, Case)]
    if RAGTRUTH.is_file():
        cases += [Case(**c) for c in ragtruth_cases(RAGTRUTH, 8)]
    return cases


def _numbers(value: Any, path: str, out: dict[str, float]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out[path] = float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _numbers(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _numbers(item, f"{path}[{index}]", out)


def _view(result: Any) -> tuple[str, str | None, dict[str, float], list[tuple[int, int, str]]]:
    """Decision, failure type, every number the gate and each validator output, and the spans."""
    data = result.to_dict()
    numbers: dict[str, float] = {}
    _numbers(data["scores"], "scores", numbers)
    _numbers(data["validators"], "validators", numbers)
    spans = [(s["start"], s["end"], s["label"]) for v in data["validators"].values() if v
             for s in v.get("spans") or []]
    return data["decision"], data["failure_type"], numbers, spans


def _assert_same(expected: list, actual: list, what: str) -> None:
    for (decision, failure, scores, spans), (decision2, failure2, scores2, spans2) in zip(expected, actual):
        assert (decision, failure) == (decision2, failure2), what
        assert scores.keys() == scores2.keys(), what
        for name in scores:
            assert scores2[name] == pytest.approx(scores[name], abs=TOLERANCE), f"{what}: {name}"
        assert spans == spans2, what


@pytest.mark.slow
@pytest.mark.parametrize("prefer", [None, []], ids=["shipped-config", "every-shipped-model"])
def test_a_case_scores_the_same_alone_batched_shuffled_and_on_one_or_two_threads(prefer) -> None:
    # The shipped config runs fact_spans as its heuristic; `prefer: []` runs the fact-span model too.
    config = load_gate_config()
    if prefer is not None:
        config = config.model_copy(update={"heuristics": config.heuristics.model_copy(update={"prefer": prefer})})
    cases = _real_cases()
    assert len(cases) >= 50
    two_threads = Gate(config, threads=2)
    assert two_threads.validators["fact_spans"].info.kind == ("heuristic" if prefer is None else "onnx")
    batched = [_view(r) for r in two_threads.validate_batch(cases)]
    # Not a constant: the set mixes decisions, so equality below is a real constraint.
    assert len({view[0] for view in batched}) == 3

    alone = [_view(two_threads.validate(case)) for case in cases]
    _assert_same(batched, alone, "alone vs batched")

    order = list(range(len(cases)))
    random.Random(7).shuffle(order)
    shuffled = two_threads.validate_batch([cases[i] for i in order])
    restored: list[Any] = [None] * len(cases)
    for position, index in enumerate(order):
        restored[index] = _view(shuffled[position])
    _assert_same(batched, restored, "shuffled vs batched")

    one_thread = [_view(r) for r in Gate(config, threads=1).validate_batch(cases)]
    _assert_same(batched, one_thread, "1 vs 2 threads")
