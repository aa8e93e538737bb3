"""The optional LLM judge: a second opinion for the cases the local gate is unsure about.

`Gate` consults the judge only when `result.confidence < judge.uncertain_below_confidence`, and
only when `judge.enabled` is set (off by default). The judge reads the question, the context and
the answer through a versioned prompt (`configs/prompts/judge_v1.yaml`) and replies with a verdict:
supported | unsupported | should_abstain | off_topic | incomplete | unsure, a confidence in [0, 1]
and a rationale.

How the verdict combines with the local result (the judge never has the last word on a block):

1. Not asked at all (no call, no cost), decision unchanged:
   - any local REJECT (unsafe tone, the abstention rule, confident hallucination): the judge may
     never loosen a block;
   - `invalid_score` (the gate fails closed on broken scores) and `poor_retrieval` (the fix is
     retrieval, whatever the answer's merits);
   - a case without context: the abstention rule alone decides those.
2. The judge is unavailable (timeout, HTTP error, garbage reply) or unsure (verdict `unsure`, or
   confidence below `min_verdict_confidence`): the uncertainty is unresolved, so the case goes to
   a person. A REVIEW stays REVIEW; a low-confidence ACCEPT becomes REVIEW / human_review. The
   reason says why ("judge unavailable: timeout after 20s …").
3. A confident verdict on a local REVIEW decides: supported -> ACCEPT serve_response;
   unsupported -> REJECT regenerate_with_grounding_prompt; should_abstain -> REJECT
   regenerate_with_abstention; off_topic -> REVIEW retry_with_clearer_query; incomplete -> REVIEW
   retry_with_specific_prompt.
4. A confident verdict on a low-confidence local ACCEPT: supported keeps ACCEPT; anything else is
   a disagreement between the validators and the judge -> REVIEW / human_review with the judge's
   failure type. The judge alone never REJECTs what the validators accepted.

When the judge decides, `confidence` becomes its confidence x 100. Everything it said, and the
local result it replaced, is kept in `result.meta["judge"]`.
"""

from __future__ import annotations

import logging
import string
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .case import Case
from .config import CONFIG_DIR, JudgePolicy, StrictModel, load_config
from .llm_client import ChatClient, LLMError, LLMOutputError, parse_json_reply
from .results import Decision, FailureType, NextAction, Result

logger = logging.getLogger(__name__)

PROMPT_FIELDS = ("question", "context", "answer")
Verdict = Literal["supported", "unsupported", "should_abstain", "off_topic", "incomplete", "unsure"]

# verdict -> (decision, failure type, next action) when the judge is confident and the local
# decision was REVIEW. `unsure` is absent: it never decides.
_OUTCOMES: dict[str, tuple[Decision, FailureType, NextAction]] = {
    "supported": (Decision.ACCEPT, FailureType.NONE, NextAction.SERVE_RESPONSE),
    "unsupported": (Decision.REJECT, FailureType.CONFIDENT_HALLUCINATION, NextAction.REGENERATE_WITH_GROUNDING_PROMPT),
    "should_abstain": (Decision.REJECT, FailureType.MISSING_ABSTENTION, NextAction.REGENERATE_WITH_ABSTENTION),
    "off_topic": (Decision.REVIEW, FailureType.OFF_TOPIC, NextAction.RETRY_WITH_CLEARER_QUERY),
    "incomplete": (Decision.REVIEW, FailureType.INCOMPLETE, NextAction.RETRY_WITH_SPECIFIC_PROMPT),
}
# Local REVIEWs the judge is not asked about: see rule 1 in the module docstring.
_NOT_JUDGED = {FailureType.INVALID_SCORE: "scores are invalid; the gate fails closed",
               FailureType.POOR_RETRIEVAL: "poor retrieval is fixed by retrieving, not by judging"}


class JudgePrompt(StrictModel):
    """A versioned judge prompt: `system` is sent as is, `user` is a template."""

    version: str = Field(min_length=1, description="recorded in meta.judge; bump it when the text changes")
    system: str = Field(min_length=1)
    user: str = Field(min_length=1, description="template with {question}, {context} and {answer}")
    json_mode: bool = Field(True, description="send response_format={'type': 'json_object'}")
    max_context_chars: int = Field(12_000, gt=0, description="longer contexts are cut for the judge")

    @field_validator("user")
    @classmethod
    def _known_placeholders(cls, template: str) -> str:
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
        except ValueError as exc:
            raise ValueError(f"not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
        unknown = sorted(names - set(PROMPT_FIELDS))
        if unknown:
            raise ValueError(f"unknown placeholder(s) {unknown}; use only {{question}}, {{context}}, {{answer}}")
        if "answer" not in names:
            raise ValueError("the template must contain {answer}")
        return template


class JudgeVerdict(BaseModel):
    """What the judge must reply with; anything else is rejected, never coerced."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1, max_length=4000)
    unsupported_claims: list[str] = Field(default_factory=list)


def load_judge_prompt(path: str | Path) -> JudgePrompt:
    """The prompt at `path`; a relative path is taken from the shipped `configs/` folder."""
    path = Path(path)
    return load_config(path if path.is_absolute() else CONFIG_DIR / path, JudgePrompt)


class LLMJudge:
    """Reviews uncertain gate results with an LLM. Thread-safe; never raises from `review`."""

    def __init__(
        self,
        config: JudgePolicy,
        client: ChatClient | None = None,
        *,
        prompt: JudgePrompt | None = None,
        breaker_after: int = 3,
        breaker_cooldown_s: float = 60.0,
    ):
        """
        Args:
            config: the `judge` section of the gate policy.
            client: a ready chat client (tests, shared clients); default built from `config`.
            prompt: overrides the prompt file named in `config.prompt`.
            breaker_after: after this many calls in a row fail to reach a usable server, the judge
                stops calling for `breaker_cooldown_s`, so a dead server costs one timeout per
                cooldown instead of one per case. Those cases go to REVIEW with the reason.
            breaker_cooldown_s: how long the judge stays off after the breaker trips.
        """
        self.config = config
        self.prompt = prompt or load_judge_prompt(config.prompt)
        self.client = client or ChatClient(
            config.base_url, config.model, api_key_env=config.api_key_env, timeout_s=config.timeout_s,
            max_retries=config.max_retries, cache_dir=config.cache_dir,
        )
        self.breaker_after = breaker_after
        self.breaker_cooldown_s = breaker_cooldown_s
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._failures_in_row = 0
        self._open_until = 0.0
        self._last_error = ""

    def messages(self, case: Case) -> tuple[list[dict[str, str]], bool]:
        """The chat messages for `case`, and whether its context had to be cut."""
        passages = [p.strip() for p in case.context if p.strip()]
        context = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1)) or "(no context)"
        truncated = len(context) > self.prompt.max_context_chars
        if truncated:
            context = context[: self.prompt.max_context_chars] + "\n[... context cut for the judge]"
        user = self.prompt.user.format(question=case.question, context=context, answer=case.answer)
        return [{"role": "system", "content": self.prompt.system}, {"role": "user", "content": user}], truncated

    def review(self, case: Case, result: Result) -> Result:
        """A new Result combining `result` with the judge's verdict (rules in the module docstring)."""
        local = {"decision": result.decision.value, "failure_type": result.failure_type.value,
                 "next_action": result.next_action.value, "confidence": result.confidence, "reason": result.reason}
        record: dict[str, Any] = {"consulted": False, "prompt_version": self.prompt.version,
                                  "model": self.client.model, "local": local}
        skip = self._skip_reason(case, result)
        if skip:
            self._count("skipped")
            return replace(result, meta={**result.meta, "judge": {**record, "outcome": "not_asked", "why": skip}})
        breaker = self._breaker_reason()
        if breaker:
            self._count("unavailable")
            record.update(outcome="unavailable", error=breaker)
            return self._unresolved(result, f"judge unavailable: {breaker}", record)

        record["consulted"] = True
        started = time.perf_counter()
        try:
            messages, record["context_truncated"] = self.messages(case)
            response_format = {"type": "json_object"} if self.prompt.json_mode else None
            reply = self.client.chat(messages, temperature=0.0, response_format=response_format)
            record.update(cached=reply.cached, attempts=reply.attempts)
            self._count("from_cache" if reply.cached else "paid_calls")
            verdict = parse_json_reply(reply.text, JudgeVerdict)
        except LLMOutputError as exc:
            # The server works; this one reply is unusable. Not a reason to stop asking.
            self._note_success()
            self._count("garbage")
            record.update(outcome="garbage", error=str(exc), error_type=type(exc).__name__,
                          latency_ms=_ms(started))
            return self._unresolved(result, f"judge answered garbage: {exc}", record)
        except LLMError as exc:
            self._note_failure(exc)
            self._count("unavailable")
            record.update(outcome="unavailable", error=str(exc), error_type=type(exc).__name__,
                          latency_ms=_ms(started))
            return self._unresolved(result, f"judge unavailable: {exc}", record)
        except Exception as exc:  # noqa: BLE001 - a judge bug must not take the batch down
            logger.exception("LLM judge failed on case %s", case.id)
            self._count("unavailable")
            record.update(outcome="error", error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__,
                          latency_ms=_ms(started))
            return self._unresolved(result, f"judge failed: {type(exc).__name__}: {exc}", record)
        self._note_success()
        record.update(verdict=verdict.verdict, confidence=verdict.confidence, rationale=verdict.rationale,
                      unsupported_claims=list(verdict.unsupported_claims), latency_ms=_ms(started))
        return self._combine(case, result, verdict, record)

    # -- combination rules ----------------------------------------------------------------------

    def _skip_reason(self, case: Case, result: Result) -> str | None:
        if result.decision is Decision.REJECT:
            return f"a REJECT ({result.failure_type.value}) is never loosened by the judge"
        if not case.has_context:
            return "no context: the abstention rule decides"
        return _NOT_JUDGED.get(result.failure_type)

    def _combine(self, case: Case, result: Result, verdict: JudgeVerdict, record: dict[str, Any]) -> Result:
        said = f"LLM judge ({self.prompt.version}): {verdict.verdict}, confidence {verdict.confidence:.2f}"
        if verdict.verdict == "unsure" or verdict.confidence < self.config.min_verdict_confidence:
            self._count("unsure")
            record["outcome"] = "unsure"
            why = "judge unsure" if verdict.verdict == "unsure" else (
                f"judge not confident enough ({verdict.verdict} {verdict.confidence:.2f} "
                f"< {self.config.min_verdict_confidence:.2f})")
            return self._unresolved(result, f"{why}: {_clip(verdict.rationale)}", record)

        decision, failure, action = _OUTCOMES[verdict.verdict]
        if result.decision is Decision.ACCEPT and decision is not Decision.ACCEPT:
            # Validators accepted, the judge objects: a person settles it; the judge alone never blocks.
            decision, action = Decision.REVIEW, NextAction.HUMAN_REVIEW
            reason = f"{said} disagrees with the validators' ACCEPT: {_clip(verdict.rationale)}"
        elif decision is Decision.ACCEPT and result.decision is Decision.ACCEPT:
            reason = f"{result.reason} Confirmed by {said}: {_clip(verdict.rationale)}"
        else:
            reason = f"{said} (local: {result.failure_type.value}): {_clip(verdict.rationale)}"
        quoted = tuple(c for c in verdict.unsupported_claims if c and c in case.answer)
        triggers = () if decision is Decision.ACCEPT else tuple(dict.fromkeys(result.triggers + quoted))
        self._count("applied")
        record["outcome"] = "applied"
        return replace(result, decision=decision, failure_type=failure, next_action=action, reason=reason,
                       confidence=int(round(100 * verdict.confidence)), triggers=triggers,
                       meta={**result.meta, "judge": record})

    def _unresolved(self, result: Result, why: str, record: dict[str, Any]) -> Result:
        """The judge could not settle an uncertain case: a person does (rule 2)."""
        meta = {**result.meta, "judge": record}
        if result.decision is Decision.ACCEPT:
            reason = (f"Low-confidence ACCEPT ({result.confidence}) that the judge could not confirm "
                      f"({why}); {result.reason}")
            return replace(result, decision=Decision.REVIEW, next_action=NextAction.HUMAN_REVIEW,
                           reason=reason, meta=meta)
        return replace(result, reason=f"{result.reason} ({why})", meta=meta)

    # -- bookkeeping ----------------------------------------------------------------------------

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def _breaker_reason(self) -> str | None:
        with self._lock:
            remaining = self._open_until - time.monotonic()
            if remaining <= 0:
                return None
            return (f"not called after {self._failures_in_row} failures in a row "
                    f"(last: {self._last_error}); next try in {remaining:.0f}s")

    def _note_failure(self, exc: LLMError) -> None:
        with self._lock:
            self._failures_in_row += 1
            self._last_error = str(exc)
            # Counted alike: a dead server, a bad key (401) or an unknown model (404) fails the
            # same way for every case.
            if self._failures_in_row >= self.breaker_after:
                self._open_until = time.monotonic() + self.breaker_cooldown_s
                logger.warning("LLM judge failed %d times in a row (%s); not calling it for %.0fs",
                               self._failures_in_row, exc, self.breaker_cooldown_s)

    def _note_success(self) -> None:
        with self._lock:
            self._failures_in_row = 0
            self._open_until = 0.0


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
