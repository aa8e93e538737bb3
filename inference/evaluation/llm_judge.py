"""The LLM judge path: versioned prompts from configs/prompts, sent through `ChatClient`.

`ChatClient` (inference/llm_client.py) owns timeouts, retries and the on-disk cache; this module
owns the prompts and the parsing. A reply that is not a valid judgement becomes a named
`JudgeOutputError` (unparseable / out_of_range / malformed) that the reports count; a transport
failure after all retries becomes a `JudgeUnavailable` error for that case, and the batch goes on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from ..case import Case
from .config import EvaluationConfig, PromptTemplate, load_prompt
from .schema import Judged, JudgeOutputError, PairVerdict, parse_pair_verdict, parse_pointwise

if TYPE_CHECKING:
    from ..llm_client import ChatClient

logger = logging.getLogger(__name__)
MAX_CONTEXT_CHARS = 12_000  # keeps one prompt well inside small models' windows


class JudgeUnavailable(JudgeOutputError):
    """The judge could not be reached or did not answer (after the client's retries)."""

    kind = "unavailable"


def make_client(config: EvaluationConfig) -> "ChatClient":
    from ..llm_client import ChatClient

    llm = config.llm
    return ChatClient(llm.base_url, llm.model, api_key_env=llm.api_key_env, timeout_s=llm.timeout_s,
                      max_retries=llm.max_retries, cache_dir=llm.cache_dir)


def _context(case: Case) -> str:
    text = case.context_text or "(no context was retrieved)"
    return text if len(text) <= MAX_CONTEXT_CHARS else text[:MAX_CONTEXT_CHARS] + " […]"


class _LLMJudgeBase:
    kind = ""

    def __init__(self, client: "ChatClient", prompt: PromptTemplate, *, temperature: float = 0.0):
        self.client = client
        self.prompt = prompt
        self.temperature = temperature
        self.name = f"llm:{client.model}:{prompt.version}"
        self.calls = 0

    def _ask(self, user: str) -> str:
        from ..llm_client import LLMError

        self.calls += 1
        messages = [{"role": "system", "content": self.prompt.system}, {"role": "user", "content": user}]
        try:
            return self.client.complete(messages, temperature=self.temperature)
        except LLMError as exc:
            raise JudgeUnavailable(str(exc)) from None


class LLMPointwiseJudge(_LLMJudgeBase):
    """Scores each answer with the pointwise prompt; one request per case."""

    @classmethod
    def from_config(cls, config: EvaluationConfig, client: "ChatClient | None" = None) -> "LLMPointwiseJudge":
        return cls(client or make_client(config), load_prompt(config.prompts.pointwise, "pointwise"),
                   temperature=config.llm.temperature)

    def judge(self, cases: Sequence[Case]) -> list[Judged]:
        out = []
        for case in cases:
            user = self.prompt.user_template.format(
                rubrics=self.prompt.render_rubrics(), question=case.question, context=_context(case), answer=case.answer
            )
            try:
                out.append(Judged(case.id, score=parse_pointwise(self._ask(user))))
            except JudgeOutputError as exc:
                logger.warning("case %s: %s judge output: %s", case.id, exc.kind, exc)
                out.append(Judged(case.id, error=exc))
        return out


class LLMPairwiseJudge(_LLMJudgeBase):
    """Asks which of (first, second) is better; the caller asks both orders."""

    @classmethod
    def from_config(cls, config: EvaluationConfig, client: "ChatClient | None" = None) -> "LLMPairwiseJudge":
        return cls(client or make_client(config), load_prompt(config.prompts.pairwise, "pairwise"),
                   temperature=config.llm.temperature)

    def judge_pairs(self, pairs: Sequence[tuple[Case, Case]]) -> list[PairVerdict | JudgeOutputError]:
        out: list[PairVerdict | JudgeOutputError] = []
        for first, second in pairs:
            user = self.prompt.user_template.format(
                rubrics=self.prompt.render_rubrics(), question=first.question, context=_context(first),
                first=first.answer, second=second.answer,
            )
            try:
                out.append(parse_pair_verdict(self._ask(user)))
            except JudgeOutputError as exc:
                logger.warning("case %s: %s pairwise judge output: %s", first.id, exc.kind, exc)
                out.append(exc)
        return out
