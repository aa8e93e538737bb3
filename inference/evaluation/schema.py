"""Typed judge outputs and their parsers: a bad judge output is a named error, never a guess.

`PointwiseScore` holds correctness, helpfulness, clarity (1-5), safety (1 or 5), overall (1-5) and a
rationale. Integers are strict: "4", 4.0 and 4.5 are all rejected, because silently turning a
judge's malformed answer into a number hides exactly the judge failures we want to count.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from .config import SCORE_DIMENSIONS, CompositeConfig


class JudgeOutputError(ValueError):
    """A judge answered something that is not a valid judgement. `kind` names the failure."""

    kind = "invalid"

    def __init__(self, message: str, raw: str | None = None):
        super().__init__(message)
        self.raw = raw


class UnparseableJudgeOutput(JudgeOutputError):
    """Not a JSON object (prose, truncated JSON, an empty reply)."""

    kind = "unparseable"


class OutOfRangeScore(JudgeOutputError):
    """A score outside its scale (e.g. correctness 7, safety 3)."""

    kind = "out_of_range"


class MalformedJudgement(JudgeOutputError):
    """JSON, but a field is missing, extra or of the wrong type ("4" instead of 4)."""

    kind = "malformed"


class PointwiseScore(BaseModel):
    """One judge's scores for one answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    correctness: StrictInt = Field(ge=1, le=5)
    helpfulness: StrictInt = Field(ge=1, le=5)
    clarity: StrictInt = Field(ge=1, le=5)
    safety: StrictInt  # 1 or 5 only (checked below; Literal[1, 5] would accept True and 5.0)
    overall: StrictInt = Field(ge=1, le=5)
    rationale: str = Field(min_length=1)

    @field_validator("safety")
    @classmethod
    def _safety_is_binary(cls, value: int) -> int:
        if value not in (1, 5):
            raise PydanticCustomError("literal_error", "Input should be 1 or 5")
        return value

    def composite(self, config: CompositeConfig) -> float:
        """Weighted mean of the dimension scores, on the same 1-5 scale."""
        total = sum(config.weights.get(d, 0.0) for d in SCORE_DIMENSIONS)
        return sum(config.weights.get(d, 0.0) * getattr(self, d) for d in SCORE_DIMENSIONS) / total


class Winner(str, Enum):
    """A pairwise verdict in the judge's own frame: the first or second answer shown."""

    FIRST = "first"
    SECOND = "second"
    TIE = "tie"


class PairVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    winner: Winner
    rationale: str = Field(min_length=1)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "literal_error"}


def _load_object(raw: str) -> dict[str, Any]:
    # A markdown code fence around the JSON is formatting, not content; anything else is not JSON.
    match = _FENCE.match(raw or "")
    text = match.group(1) if match else (raw or "")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnparseableJudgeOutput(f"judge output is not JSON ({exc.msg}): {text[:80]!r}", raw) from None
    if not isinstance(value, dict):
        raise UnparseableJudgeOutput(f"judge output is JSON {type(value).__name__}, not an object", raw)
    return value


def _is_range_error(error: Any) -> bool:
    value = error.get("input")
    if error["type"] == "enum":
        return isinstance(value, str)
    return error["type"] in _RANGE_ERRORS and isinstance(value, int) and not isinstance(value, bool)


def _validate(model: type[BaseModel], value: dict[str, Any], raw: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = exc.errors()
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(object)'}: {e['msg']} (got {e.get('input')!r})" for e in errors
        )
        # Only "a number of the right type outside its scale" counts as out of range; the rest is shape.
        if all(_is_range_error(e) for e in errors):
            raise OutOfRangeScore(f"judge score out of range: {detail}", raw) from None
        raise MalformedJudgement(f"judge output has the wrong shape: {detail}", raw) from None


def parse_pointwise(raw: str) -> PointwiseScore:
    """Parses a judge reply into a `PointwiseScore`, or raises a `JudgeOutputError` subclass."""
    return _validate(PointwiseScore, _load_object(raw), raw)


def parse_pair_verdict(raw: str) -> PairVerdict:
    """Parses a pairwise judge reply, or raises a `JudgeOutputError` subclass."""
    return _validate(PairVerdict, _load_object(raw), raw)


@dataclass(frozen=True)
class Judged:
    """A judgement or the named error it produced, for one case."""

    id: str
    score: PointwiseScore | None = None
    error: JudgeOutputError | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None
