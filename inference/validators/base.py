"""The one contract every validator implements, trained model or heuristic alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from ..case import Case
from ..grounding import task_of_case
from ..results import ValidatorOutput

VALIDATOR_NAMES = ("fact_spans", "qa_relevance", "tone")


def asks_a_question(case: Case) -> bool:
    """Whether a case's question is one a relevance validator can relate its answer to: there is one,
    and it is not a data-to-text request: an instruction over a structured record ("Write an
    objective overview of the business from the structured data."), whose every faithful overview a
    QA relevance model scores near zero, as low as an invented one
    (`tests/inference/test_shipped_grounding.py`). A question over a record ("How many stars does it
    have?") is still judged."""
    question = case.question.strip()
    return bool(question) and (question.endswith("?") or task_of_case(case) != "Data2txt")


@dataclass(frozen=True)
class ValidatorInfo:
    """What produced an output: reported in each result's `meta.models`."""

    name: str
    kind: str  # "onnx" or "heuristic"
    version: str
    sha256: str | None = None  # of the model file, for trained validators


@runtime_checkable
class Validator(Protocol):
    """Given a batch of cases, one output per case, in order. Knows nothing about decisions."""

    info: ValidatorInfo

    def predict(self, cases: Sequence[Case]) -> list[ValidatorOutput]: ...
