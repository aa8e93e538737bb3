"""What validators return and what the gate decides, as typed, frozen records."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Decision(str, Enum):
    ACCEPT = "ACCEPT"
    REVIEW = "REVIEW"
    REJECT = "REJECT"


class FailureType(str, Enum):
    NONE = "none"
    CONFIDENT_HALLUCINATION = "confident_hallucination"
    VAGUE_UNGROUNDED = "vague_ungrounded"
    MISSING_ABSTENTION = "missing_abstention"
    POOR_RETRIEVAL = "poor_retrieval"
    OFF_TOPIC = "off_topic"
    INCOMPLETE = "incomplete"
    VALIDATOR_DISAGREEMENT = "validator_disagreement"
    UNSAFE_TONE = "unsafe_tone"
    INVALID_SCORE = "invalid_score"


class NextAction(str, Enum):
    SERVE_RESPONSE = "serve_response"
    REGENERATE_WITH_GROUNDING_PROMPT = "regenerate_with_grounding_prompt"
    RETRY_WITH_SPECIFIC_PROMPT = "retry_with_specific_prompt"
    REGENERATE_WITH_ABSTENTION = "regenerate_with_abstention"
    RETRIEVE_MORE_DOCUMENTS = "retrieve_more_documents"
    RETRY_WITH_CLEARER_QUERY = "retry_with_clearer_query"
    HUMAN_REVIEW = "human_review"
    BLOCK_RESPONSE = "block_response"


class CustomLabel(str):
    """A failure type or next action named by a declared check in the gate config, beside the
    built-in enums; `.value` reads like theirs, so reports and JSON treat both alike."""

    @property
    def value(self) -> str:
        return str(self)


class SpanLabel(str, Enum):
    FACT = "FACT"
    NOISE = "NOISE"
    HALLUCINATION = "HALLUCINATION"


@dataclass(frozen=True)
class Span:
    """A labelled stretch of the answer; `start`/`end` are character offsets into `answer`."""

    start: int
    end: int
    label: SpanLabel
    score: float  # probability of `label`
    text: str = ""


@dataclass(frozen=True)
class FactSpansOutput:
    applies: bool
    hallucinated: bool = False
    hallucination_score: float = 0.0
    precision: float = 1.0  # share of non-noise answer tokens supported by the context
    recall: float = 0.0  # share of the context's atomic facts the answer mentions
    spans: tuple[Span, ...] = ()
    source: str = "heuristic"
    notes: tuple[str, ...] = ()  # what the validator left out, e.g. context beyond its cap


@dataclass(frozen=True)
class QARelevanceOutput:
    applies: bool
    score: float = 0.0  # on the gate's scale: 0.5 is the relevant/irrelevant boundary
    relevant: bool = False
    model_score: float | None = None  # a trained model's raw P(relevant), before calibration
    source: str = "heuristic"


@dataclass(frozen=True)
class ToneOutput:
    applies: bool
    scores: dict[str, float] = field(default_factory=dict)
    flagged: tuple[str, ...] = ()
    thresholds: dict[str, float] = field(default_factory=dict)
    source: str = "heuristic"


ValidatorOutput = FactSpansOutput | QARelevanceOutput | ToneOutput


@dataclass(frozen=True)
class CaseSignals:
    """Model-free facts about a case that the gate needs whichever validators run."""

    # How concrete the answer is (numbers, names, no hedging): splits confident from vague.
    specificity: float
    # Share of the question's content the context covers: the retrieval-quality signal. None when
    # there is no question to cover: a summary or data-to-text request is an instruction about the
    # context itself ("Summarize the following news"), which no context "covers".
    context_quality: float | None
    # The answer declines to answer ("I don't have enough information…").
    abstains: bool
    # The worst answer sentence's share of its numbers and names that the context or question states
    # (`heuristics.specifics_grounding`); None without a context to read them in.
    specifics_grounding: float | None = None


@dataclass(frozen=True)
class CheckResult:
    """One required check of the gate: `passed` is None when the check does not apply."""

    name: str
    applies: bool
    score: float | None
    minimum: float
    passed: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Result:
    """The gate's verdict on one case."""

    id: str
    decision: Decision
    failure_type: FailureType | CustomLabel  # CustomLabel: a declared check's own failure type
    next_action: NextAction | CustomLabel
    reason: str
    confidence: int  # 0-100: how far the deciding scores sit from their thresholds
    checks: tuple[CheckResult, ...]
    scores: dict[str, float | None]
    validators: dict[str, ValidatorOutput]
    low_confidence_spans: tuple[Span, ...] = ()
    triggers: tuple[str, ...] = ()  # the answer sentences/spans that caused a non-ACCEPT decision
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; NaN/inf become None so the output is always valid JSON."""
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
