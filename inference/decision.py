"""The decision policy: validator outputs + case signals -> decision, using only the gate config.

Knows nothing about models. The built-in rules below run in the config's `rule_order` (the
seeds' order by default); a check on any further validator is declared in the config
(`declared_checks`: validator, output field, minimum, when it applies, failure type, next action)
and placed in that order by name, with no edit here. The built-in rules, in their default order:

1. unsafe tone                                   -> REJECT  block_response
2. context empty or not covering the question, answer asserts instead of abstaining
                                                 -> REJECT  regenerate_with_abstention
   (a rule, not a threshold: it holds even with every minimum at 0)
3. off-topic and vague (before the grounding rules: an answer to another question is ungrounded
   because it is off the question, and neither a grounding nor a sharper prompt fixes it; an
   off-topic answer full of specific ungrounded claims falls through to rule 4)
                                                 -> REVIEW  retry_with_clearer_query
4. ungrounded and specific (confident hallucination) -> REJECT regenerate_with_grounding_prompt
5. an applicable score missing / NaN / infinite / out of [0, 1] -> REVIEW human_review (fail closed)
6. ungrounded and vague                          -> REVIEW  retry_with_specific_prompt
7. weak or empty retrieval                       -> REVIEW  retrieve_more_documents
8. incomplete (fact recall, or abstaining although the context covers the question)
                                                 -> REVIEW  retry_with_specific_prompt
9. validators disagree (spread above the limit)  -> REVIEW  human_review
otherwise                                        -> ACCEPT  serve_response

The average of scores is reported, never used. A failing applicable required check is never
compensated by strong others: the first failing rule decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .config import BUILTIN_RULES, CheckPolicy, DeclaredCheck, GateConfig
from .results import (
    CaseSignals,
    CheckResult,
    CustomLabel,
    Decision,
    FactSpansOutput,
    FailureType,
    NextAction,
    QARelevanceOutput,
    SpanLabel,
    ToneOutput,
)


# The checks whose failure makes an answer ungrounded (rules 4 and 6).
GROUNDING_CHECKS = ("grounding", "span_grounding", "specifics_grounding")


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    failure_type: FailureType | CustomLabel
    next_action: NextAction | CustomLabel
    reason: str
    confidence: int
    checks: tuple[CheckResult, ...]
    scores: dict[str, float | None]
    triggers: tuple[str, ...] = ()


def is_valid_score(score: float | None) -> bool:
    return isinstance(score, (int, float)) and math.isfinite(score) and 0.0 <= score <= 1.0


def _check(name: str, applies: bool, score: float | None, policy: CheckPolicy | DeclaredCheck) -> CheckResult:
    if not applies:
        # No score is reported either: a default like precision=1.0 for an empty context would read
        # as a pass to anyone skimming the output.
        return CheckResult(name, False, None, policy.minimum, None)
    if not is_valid_score(score):
        return CheckResult(name, True, None, policy.minimum, False, f"invalid score {score!r}")
    return CheckResult(name, True, float(score), policy.minimum, score >= policy.minimum)


def tone_check(tone: ToneOutput | None, config: GateConfig) -> CheckResult:
    """The `tone_safety` check of one tone output: fails when a blocking label reaches its threshold."""
    policy = config.checks.tone_safety
    if tone is None or not tone.applies:
        return CheckResult("tone_safety", False, None, 0.5, None)
    blocking = [label for label in policy.blocking_labels if label in tone.scores]
    if not blocking:
        return CheckResult("tone_safety", True, None, 0.5, False, "no blocking tone label was scored")
    invalid = [label for label in blocking if not is_valid_score(tone.scores[label])]
    if invalid:
        return CheckResult("tone_safety", True, None, 0.5, False, f"invalid score for tone label {invalid[0]!r}")
    # Worst label relative to its own threshold; the check's minimum is that label's 1 - threshold.
    worst = max(blocking, key=lambda label: tone.scores[label] - tone.thresholds.get(label, 0.5))
    threshold = tone.thresholds.get(worst, 0.5)
    flagged = [label for label in blocking if label in tone.flagged]
    detail = ", ".join(f"{label} {tone.scores[label]:.2f} >= {tone.thresholds.get(label, 0.5):.2f}" for label in flagged)
    return CheckResult("tone_safety", True, 1.0 - tone.scores[worst], 1.0 - threshold, not flagged, detail)


def _margin(check: CheckResult) -> float:
    """How far a valid score sits from its minimum, scaled to [0, 1] on its own side."""
    assert check.score is not None
    if check.passed:
        room = 1.0 - check.minimum
        return 1.0 if room <= 0 else min(1.0, (check.score - check.minimum) / room)
    return 1.0 if check.minimum <= 0 else min(1.0, (check.minimum - check.score) / check.minimum)


def _confidence(margin: float) -> int:
    return int(round(50 + 50 * max(0.0, min(1.0, margin))))


class _Context:
    """What every rule reads: the checks, which required ones failed, and the case signals."""

    def __init__(self, *, has_context: bool, signals: CaseSignals, fact: FactSpansOutput | None,
                 checks: dict[str, CheckResult], required: dict[str, bool], config: GateConfig,
                 scores: dict[str, float | None]):
        self.has_context, self.signals, self.config = has_context, signals, config
        self.checks, self.scores = checks, scores
        self.claims_apply = fact is not None and fact.applies and not signals.abstains
        self.failed = {name: c for name, c in checks.items() if c.applies and c.passed is False and required[name]}
        self.invalid = [name for name, c in self.failed.items() if c.score is None]
        self.valid_failed = {name: c for name, c in self.failed.items() if c.score is not None}
        self.hallucinated_spans = tuple(s.text for s in (fact.spans if fact else ())
                                        if s.label is SpanLabel.HALLUCINATION)
        self.context_fails = "context_quality" in self.valid_failed
        self.grounding_fails = any(name in self.valid_failed for name in GROUNDING_CHECKS)
        # Ungrounded and specific: a confident hallucination, on or off the question.
        self.confidently_ungrounded = self.grounding_fails and signals.specificity >= config.specificity.confident_at
        self.deciding = [c for name, c in checks.items() if c.applies and c.passed and required[name]]

    def verdict(self, decision, failure, action, reason, confidence, triggers=()) -> Verdict:
        return Verdict(decision, failure, action, reason, confidence, tuple(self.checks.values()), self.scores,
                       tuple(triggers))

    def worst_grounding(self) -> CheckResult:
        return min((self.valid_failed[n] for n in GROUNDING_CHECKS if n in self.valid_failed),
                   key=lambda c: c.score)


# ---- the built-in rules, each: context -> a verdict, or None to let the next rule try -------------
def _unsafe_tone(ctx: _Context) -> Verdict | None:
    if "tone_safety" not in ctx.valid_failed:
        return None
    check = ctx.valid_failed["tone_safety"]
    return ctx.verdict(Decision.REJECT, FailureType.UNSAFE_TONE, NextAction.BLOCK_RESPONSE,
                       f"Unsafe tone: {check.detail}.", _confidence(_margin(check)))


def _missing_abstention(ctx: _Context) -> Verdict | None:
    # A rule, not a threshold: it holds even with every minimum at 0.
    needs_abstention = not ctx.has_context or (ctx.context_fails and (ctx.grounding_fails or not ctx.claims_apply))
    if not (ctx.config.abstention.enforce and needs_abstention and not ctx.signals.abstains):
        return None
    why = "no context was retrieved" if not ctx.has_context else "the context does not cover the question"
    return ctx.verdict(Decision.REJECT, FailureType.MISSING_ABSTENTION, NextAction.REGENERATE_WITH_ABSTENTION,
                       f"The answer asserts facts although {why}; it should say it lacks the information.",
                       int(round(60 + 40 * ctx.signals.specificity)), ctx.hallucinated_spans)


def _off_topic(ctx: _Context) -> Verdict | None:
    # An answer about something else ("the office is open from nine to five" to a password question)
    # is ungrounded because it is off the question, not because it invents facts about it: the fix
    # is a clearer query, not a grounding prompt. It is still not served (REVIEW).
    if "relevance" not in ctx.valid_failed:
        return None
    # Off the question AND full of specific claims the context does not hold is worse than off
    # topic: it invents facts (seed 000's French Revolution essay to a password question). The
    # confident-hallucination rule decides it; a vague off-topic answer stays here.
    if ctx.confidently_ungrounded:
        return None
    check = ctx.valid_failed["relevance"]
    return ctx.verdict(Decision.REVIEW, FailureType.OFF_TOPIC, NextAction.RETRY_WITH_CLEARER_QUERY,
                       f"The answer does not address the question (relevance {check.score:.2f} "
                       f"< {check.minimum:.2f}).", _confidence(_margin(check)))


def _confident_hallucination(ctx: _Context) -> Verdict | None:
    if not ctx.confidently_ungrounded:
        return None
    worst = ctx.worst_grounding()
    return ctx.verdict(Decision.REJECT, FailureType.CONFIDENT_HALLUCINATION, NextAction.REGENERATE_WITH_GROUNDING_PROMPT,
                       f"Specific claims the context does not support ({worst.name} {worst.score:.2f} "
                       f"< {worst.minimum:.2f}, specificity {ctx.signals.specificity:.2f}).",
                       _confidence(_margin(worst)), ctx.hallucinated_spans)


def _invalid_score(ctx: _Context) -> Verdict | None:
    if not ctx.invalid:
        return None
    details = "; ".join(f"{name}: {ctx.failed[name].detail}" for name in ctx.invalid)
    return ctx.verdict(Decision.REVIEW, FailureType.INVALID_SCORE, NextAction.HUMAN_REVIEW,
                       f"Cannot trust the scores ({details}); failing closed.", 0)


def _vague_ungrounded(ctx: _Context) -> Verdict | None:
    if not ctx.grounding_fails:
        return None
    worst = ctx.worst_grounding()
    return ctx.verdict(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED, NextAction.RETRY_WITH_SPECIFIC_PROMPT,
                       f"Vague answer the context does not support ({worst.name} {worst.score:.2f} "
                       f"< {worst.minimum:.2f}).", _confidence(_margin(worst)), ctx.hallucinated_spans)


def _poor_retrieval(ctx: _Context) -> Verdict | None:
    # Reached only when the answer abstained (missing_abstention) or abstention is not enforced.
    if not ctx.has_context:
        return ctx.verdict(Decision.REVIEW, FailureType.POOR_RETRIEVAL, NextAction.RETRIEVE_MORE_DOCUMENTS,
                           "No context was retrieved; the answer rightly abstains. Retrieve documents and retry.", 80)
    if not ctx.context_fails:
        return None
    check = ctx.valid_failed["context_quality"]
    return ctx.verdict(Decision.REVIEW, FailureType.POOR_RETRIEVAL, NextAction.RETRIEVE_MORE_DOCUMENTS,
                       f"The retrieved context barely covers the question (context_quality {check.score:.2f} "
                       f"< {check.minimum:.2f}).", _confidence(_margin(check)))


def _incomplete(ctx: _Context) -> Verdict | None:
    if "fact_recall" in ctx.valid_failed:
        check = ctx.valid_failed["fact_recall"]
        return ctx.verdict(Decision.REVIEW, FailureType.INCOMPLETE, NextAction.RETRY_WITH_SPECIFIC_PROMPT,
                           f"The answer leaves out most of the context's facts (fact_recall {check.score:.2f} "
                           f"< {check.minimum:.2f}).", _confidence(_margin(check)))
    if ctx.signals.abstains and ctx.has_context:
        coverage = ctx.checks["context_quality"]  # not applicable to a summary request: no margin to read
        return ctx.verdict(Decision.REVIEW, FailureType.INCOMPLETE, NextAction.RETRY_WITH_SPECIFIC_PROMPT,
                           "The answer abstains although the context covers the question.",
                           _confidence(_margin(coverage)) if coverage.score is not None else 75)
    return None


def _disagreement(ctx: _Context) -> Verdict | None:
    if "agreement" not in ctx.valid_failed:
        return None
    check = ctx.valid_failed["agreement"]
    return ctx.verdict(Decision.REVIEW, FailureType.VALIDATOR_DISAGREEMENT, NextAction.HUMAN_REVIEW,
                       f"The validators disagree (spread {1 - check.score:.2f} > {1 - check.minimum:.2f}).",
                       _confidence(_margin(check)))


RULES: dict[str, Callable[[_Context], Verdict | None]] = {
    "unsafe_tone": _unsafe_tone, "missing_abstention": _missing_abstention, "off_topic": _off_topic,
    "confident_hallucination": _confident_hallucination, "invalid_score": _invalid_score,
    "vague_ungrounded": _vague_ungrounded, "poor_retrieval": _poor_retrieval, "incomplete": _incomplete,
    "disagreement": _disagreement,
}
assert tuple(RULES) == BUILTIN_RULES  # the config's list and this table name the same rules


# ---- declared checks: any validator's output field, from the config alone ------------------------
def _declared_check(name: str, spec: DeclaredCheck, output: Any, has_context: bool, signals: CaseSignals) -> CheckResult:
    conditions = {"has_context": has_context, "no_context": not has_context, "not_abstaining": not signals.abstains}
    applies = (output is not None and bool(getattr(output, "applies", True))
               and all(conditions[c] for c in spec.applies_when))
    raw = None
    if applies:
        raw = output.get(spec.field) if isinstance(output, Mapping) else getattr(output, spec.field, None)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return CheckResult(name, True, None, spec.minimum, False,
                               f"{spec.validator} output has no number {spec.field!r} (got {raw!r})")
        raw = 1.0 - raw if spec.invert else raw
    return _check(name, applies, raw, spec)


def _declared_rule(name: str, spec: DeclaredCheck) -> Callable[[_Context], Verdict | None]:
    def rule(ctx: _Context) -> Verdict | None:
        check = ctx.valid_failed.get(name)
        if check is None:
            return None
        reason = spec.reason or f"{name} {check.score:.2f} < {check.minimum:.2f}."
        return ctx.verdict(Decision(spec.decision), CustomLabel(spec.failure_type), CustomLabel(spec.next_action),
                           reason, _confidence(_margin(check)))
    return rule


def decide(
    *,
    has_context: bool,
    signals: CaseSignals,
    fact: FactSpansOutput | None,
    qa: QARelevanceOutput | None,
    tone: ToneOutput | None,
    config: GateConfig,
    others: Mapping[str, Any] | None = None,
) -> Verdict:
    """The decision for one case. `others`: outputs of further validators by name, read by the
    config's `declared_checks`; the built-in checks read `fact`, `qa` and `tone`."""
    policy = config.checks
    # An abstaining answer makes no claims, so claim-level checks do not apply to it.
    claims_apply = fact is not None and fact.applies and not signals.abstains
    checks = {
        "grounding": _check("grounding", claims_apply, fact.precision if fact else None, policy.grounding),
        "span_grounding": _check(
            "span_grounding", claims_apply, 1.0 - fact.hallucination_score if fact else None, policy.span_grounding
        ),
        "specifics_grounding": _check("specifics_grounding", claims_apply and signals.specifics_grounding is not None,
                                      signals.specifics_grounding, policy.specifics_grounding),
        "fact_recall": _check("fact_recall", claims_apply, fact.recall if fact else None, policy.fact_recall),
        "relevance": _check(
            "relevance", qa is not None and qa.applies and not signals.abstains, qa.score if qa else None,
            policy.relevance,
        ),
        # Not applicable without a question to cover (summary, data-to-text: CaseSignals says why).
        "context_quality": _check("context_quality", has_context and signals.context_quality is not None,
                                  signals.context_quality, policy.context_quality),
        "tone_safety": tone_check(tone, config),
    }
    quality = [c.score for name, c in checks.items()
               if name in ("grounding", "relevance", "context_quality") and c.applies and c.score is not None]
    spread = max(quality) - min(quality) if len(quality) >= 2 else None
    checks["agreement"] = _check("agreement", spread is not None, None if spread is None else 1.0 - spread,
                                 policy.agreement)
    required = {"tone_safety": policy.tone_safety.required,
                **{name: getattr(policy, name).required for name in checks if name != "tone_safety"}}
    outputs = {"fact_spans": fact, "qa_relevance": qa, "tone": tone, **(others or {})}
    for name, spec in config.declared_checks.items():
        checks[name] = _declared_check(name, spec, outputs.get(spec.validator), has_context, signals)
        required[name] = spec.required

    scores: dict[str, float | None] = {name: c.score for name, c in checks.items()}
    scores["specificity"] = signals.specificity
    applicable = [c.score for c in checks.values() if c.applies and c.score is not None]
    scores["average"] = sum(applicable) / len(applicable) if applicable else None  # reporting only

    ctx = _Context(has_context=has_context, signals=signals, fact=fact, checks=checks, required=required,
                   config=config, scores=scores)
    rules = {**RULES, **{name: _declared_rule(name, spec) for name, spec in config.declared_checks.items()}}
    for name in config.rule_order:
        verdict = rules[name](ctx)
        if verdict is not None:
            return verdict
    confidence = _confidence(min((_margin(c) for c in ctx.deciding), default=0.0))
    return ctx.verdict(Decision.ACCEPT, FailureType.NONE, NextAction.SERVE_RESPONSE,
                       "All applicable checks passed." if ctx.deciding else "No check applies; nothing to object to.",
                       confidence)
