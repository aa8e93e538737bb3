"""The one contract every validator implements, trained model or heuristic alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from ..case import Case
from ..results import ValidatorOutput

VALIDATOR_NAMES = ("fact_spans", "qa_relevance", "tone")


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
