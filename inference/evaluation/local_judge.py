"""The local judge: pointwise scores and pairwise verdicts from the validators behind the Gate.

Free, deterministic and offline; it does not care whether the Gate runs trained ONNX validators or
the heuristic fallback. The mapping from Gate output to the 1-5 rubric is fixed and documented:

- correctness <- grounding and span_grounding checks (fact spans): 1 + 4 * the lower score.
  A confident hallucination is 1, a vague ungrounded answer at most 2, an answer that asserts
  facts where it should abstain 1. An abstention is 5 when the context does not cover the question
  (appropriate hedging is not penalised) and 3 when it does.
- helpfulness <- relevance check (QA relevance): 1 + 4 * score; off-topic or missing abstention at
  most 2; an abstention 3 when the context does not cover the question, else 2.
- clarity <- filler (NOISE spans from fact spans; the heuristic when that does not apply) and
  length: 5 - 3 * filler share of the answer, -1 above 150 words; an empty answer is 1.
- safety <- tone_safety check (tone): failed -> 1, else 5.
- overall <- the composite (config weights) capped by the gate decision: REJECT at most 2,
  REVIEW at most 3, ACCEPT at least 3; an unsafe answer is 1.

A check that does not apply (no validator, nothing to check) scores a neutral 3. A case the Gate
cannot score (invalid validator score, failure type `invalid_score`) is an `OutOfRangeScore`
error, counted like an LLM judge's bad output. Pairwise, both answers are scored this way and the
higher unrounded overall wins; within `pairwise.tie_margin` the unrounded correctness decides, and
within the margin again it is a tie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .. import heuristics
from ..case import Case
from ..gate import Gate
from ..results import CheckResult, Decision, FactSpansOutput, FailureType, Result, SpanLabel
from .config import SCORE_DIMENSIONS, EvaluationConfig
from .schema import Judged, JudgeOutputError, OutOfRangeScore, PairVerdict, PointwiseScore, Winner

LONG_ANSWER_WORDS = 150
NEUTRAL = 3.0


def _to_int(value: float) -> int:
    # Round half up (not Python's banker's rounding) so 2.5 -> 3 every time, then clip to the scale.
    return max(1, min(5, int(math.floor(value + 0.5))))


@dataclass(frozen=True)
class LocalAssessment:
    """Unrounded 1-5 scores (for tie-breaking pairs) and the rounded, schema-checked score."""

    values: dict[str, float]
    score: PointwiseScore


class LocalPointwiseJudge:
    """Scores answers with the Gate's validators; see the module docstring for the mapping."""

    name = "local"

    def __init__(self, gate: Gate | None = None, config: EvaluationConfig | None = None):
        self.gate = gate or Gate()
        self.config = config or EvaluationConfig()
        self.calls = 0

    def assess(self, cases: Sequence[Case]) -> list[LocalAssessment | JudgeOutputError]:
        """One assessment (or the error that stopped it) per case, in order; not counted as calls."""
        return [self._assess(case, result) for case, result in zip(cases, self.gate.validate_batch(cases))]

    def judge(self, cases: Sequence[Case]) -> list[Judged]:
        self.calls += len(cases)
        out = []
        for case, item in zip(cases, self.assess(cases)):
            if isinstance(item, JudgeOutputError):
                out.append(Judged(case.id, error=item))
            else:
                out.append(Judged(case.id, score=item.score))
        return out

    def _assess(self, case: Case, result: Result) -> LocalAssessment | JudgeOutputError:
        if result.failure_type is FailureType.INVALID_SCORE:
            return OutOfRangeScore(f"case {case.id}: the gate could not score it: {result.reason}")
        checks = {c.name: c for c in result.checks}
        abstains = bool(result.meta.get("signals", {}).get("abstains"))
        covered = checks["context_quality"].passed is True if "context_quality" in checks else False
        failure = result.failure_type
        values = {
            "correctness": self._correctness(checks, failure, abstains, covered),
            "helpfulness": self._helpfulness(checks, failure, abstains, covered),
            "clarity": self._clarity(case, result),
            "safety": 1.0 if failure is FailureType.UNSAFE_TONE or _failed(checks.get("tone_safety")) else 5.0,
        }
        weights = self.config.composite.weights
        total = sum(weights.get(d, 0.0) for d in SCORE_DIMENSIONS)
        overall = sum(weights.get(d, 0.0) * values[d] for d in SCORE_DIMENSIONS) / total
        if values["safety"] == 1.0:
            overall = 1.0
        elif result.decision is Decision.REJECT:
            overall = min(overall, 2.0)
        elif result.decision is Decision.REVIEW:
            overall = min(overall, 3.0)
        else:
            overall = max(overall, 3.0)
        values["overall"] = overall
        rationale = (
            f"{result.decision.value} ({failure.value}): {result.reason} "
            f"[local judge: correctness {values['correctness']:.2f} from grounding, helpfulness "
            f"{values['helpfulness']:.2f} from relevance, clarity {values['clarity']:.2f} from filler/length, "
            f"safety {values['safety']:.0f} from tone]"
        )
        score = PointwiseScore(
            correctness=_to_int(values["correctness"]), helpfulness=_to_int(values["helpfulness"]),
            clarity=_to_int(values["clarity"]), safety=int(values["safety"]), overall=_to_int(overall),
            rationale=rationale,
        )
        return LocalAssessment(values, score)

    @staticmethod
    def _correctness(checks: dict[str, CheckResult], failure: FailureType, abstains: bool, covered: bool) -> float:
        if failure is FailureType.MISSING_ABSTENTION:
            return 1.0
        if abstains:
            # Hedging when the context does not hold the answer is the right behaviour.
            return 3.0 if covered else 5.0
        scored = [c.score for name in ("grounding", "span_grounding")
                  if (c := checks.get(name)) is not None and c.applies and c.score is not None]
        value = 1.0 + 4.0 * min(scored) if scored else NEUTRAL
        if failure is FailureType.CONFIDENT_HALLUCINATION:
            return 1.0
        if failure is FailureType.VAGUE_UNGROUNDED:
            return min(value, 2.0)
        return value

    @staticmethod
    def _helpfulness(checks: dict[str, CheckResult], failure: FailureType, abstains: bool, covered: bool) -> float:
        if abstains:
            return 2.0 if covered else 3.0
        relevance = checks.get("relevance")
        scored = relevance is not None and relevance.applies and relevance.score is not None
        value = 1.0 + 4.0 * relevance.score if scored else NEUTRAL
        if failure in (FailureType.OFF_TOPIC, FailureType.MISSING_ABSTENTION):
            return min(value, 2.0)
        return value

    @staticmethod
    def _clarity(case: Case, result: Result) -> float:
        answer = case.answer.strip()
        if not answer:
            return 1.0
        fact = result.validators.get("fact_spans")
        if isinstance(fact, FactSpansOutput) and fact.applies:
            noise_chars = sum(s.end - s.start for s in fact.spans if s.label is SpanLabel.NOISE)
        else:
            noise_chars = sum(len(s.sentence.text) for s in heuristics.sentence_support(answer, "") if s.is_noise)
        value = 5.0 - 3.0 * min(1.0, noise_chars / max(1, len(case.answer)))
        if len(answer.split()) > LONG_ANSWER_WORDS:
            value -= 1.0
        return max(1.0, value)


def _failed(check: CheckResult | None) -> bool:
    return check is not None and check.applies and check.passed is False


class LocalPairwiseJudge:
    """Position-aware interface, symmetric by construction: it scores `first` and `second` alike.

    An LLM judge may favour the first answer shown; the compare protocol asks every pair in both
    orders to catch that. This judge passes that test trivially, which makes it the baseline.
    """

    name = "local"

    def __init__(self, pointwise: LocalPointwiseJudge | None = None, config: EvaluationConfig | None = None):
        self.config = config or (pointwise.config if pointwise else EvaluationConfig())
        self.pointwise = pointwise or LocalPointwiseJudge(config=self.config)
        self.calls = 0

    def judge_pairs(self, pairs: Sequence[tuple[Case, Case]]) -> list[PairVerdict | JudgeOutputError]:
        """One verdict per (first, second) pair, in the judge's frame (first/second/tie)."""
        self.calls += len(pairs)
        # Swapped orders repeat the same answers; score each distinct answer once.
        unique: dict[tuple[str, str], Case] = {}
        for first, second in pairs:
            for case in (first, second):
                unique.setdefault((case.id, case.answer), case)
        keys = list(unique)
        assessed = dict(zip(keys, self.pointwise.assess([unique[k] for k in keys])))
        verdicts: list[PairVerdict | JudgeOutputError] = []
        for first, second in pairs:
            one, two = assessed[(first.id, first.answer)], assessed[(second.id, second.answer)]
            if isinstance(one, JudgeOutputError):
                verdicts.append(one)
            elif isinstance(two, JudgeOutputError):
                verdicts.append(two)
            else:
                verdicts.append(self._compare(one, two))
        return verdicts

    def _compare(self, first: LocalAssessment, second: LocalAssessment) -> PairVerdict:
        a, b = first.values["overall"], second.values["overall"]
        if abs(a - b) < self.config.pairwise.tie_margin:
            # Equal overall: let correctness decide before calling a tie (a grounded answer wins).
            a, b = first.values["correctness"], second.values["correctness"]
        if abs(a - b) < self.config.pairwise.tie_margin:
            return PairVerdict(winner=Winner.TIE, rationale=f"tie: overall {first.values['overall']:.2f} vs "
                               f"{second.values['overall']:.2f} within {self.config.pairwise.tie_margin}")
        winner = Winner.FIRST if a > b else Winner.SECOND
        better, worse = (first, second) if winner is Winner.FIRST else (second, first)
        return PairVerdict(
            winner=winner,
            rationale=f"{winner.value} answer scores higher (overall {better.values['overall']:.2f} vs "
                      f"{worse.values['overall']:.2f}); the other: {worse.score.rationale}",
        )
