"""The optional LLM judge: combination rules, failure handling, Gate and CLI wiring, against the stub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autovalidators.inference import Case, Decision, FailureType, Gate
from autovalidators.inference.cli import app
from autovalidators.inference.config import ConfigError, GateConfig, JudgePolicy
from autovalidators.inference.judge import LLMJudge, load_judge_prompt
from autovalidators.inference.llm_client import ChatClient
from autovalidators.inference.results import NextAction, Result, ToneOutput
from autovalidators.inference.validators.base import ValidatorInfo

CASE = Case(id="c1", question="How long is the X200 warranty?",
            context=["The X200 router comes with a two-year limited warranty."],
            answer="The X200 has a five-year warranty.")


def verdict(name: str, confidence: float = 0.95, claims: list[str] | None = None) -> str:
    return json.dumps({"verdict": name, "confidence": confidence, "rationale": f"stub says {name}",
                       "unsupported_claims": claims or []})


def local(decision: Decision, failure: FailureType, confidence: int = 55,
          action: NextAction = NextAction.HUMAN_REVIEW) -> Result:
    return Result(id=CASE.id, decision=decision, failure_type=failure, next_action=action,
                  reason="local reason.", confidence=confidence, checks=(), scores={}, validators={},
                  meta={"latency_ms": 1.0})


def make_judge(stub, tmp_path, **policy) -> LLMJudge:
    policy = {"enabled": True, "base_url": stub.url, "cache_dir": str(tmp_path / "cache"), "timeout_s": 2.0,
              "max_retries": 0, **policy}
    return LLMJudge(JudgePolicy(**policy))


@pytest.mark.parametrize(
    ("said", "decision", "failure", "action"),
    [
        ("supported", Decision.ACCEPT, FailureType.NONE, NextAction.SERVE_RESPONSE),
        ("unsupported", Decision.REJECT, FailureType.CONFIDENT_HALLUCINATION,
         NextAction.REGENERATE_WITH_GROUNDING_PROMPT),
        ("should_abstain", Decision.REJECT, FailureType.MISSING_ABSTENTION, NextAction.REGENERATE_WITH_ABSTENTION),
        ("off_topic", Decision.REVIEW, FailureType.OFF_TOPIC, NextAction.RETRY_WITH_CLEARER_QUERY),
    ],
)
def test_a_confident_verdict_settles_a_review(llm_stub, tmp_path, said, decision, failure, action):
    llm_stub.reply(verdict(said, 0.9))
    before = local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED)
    after = make_judge(llm_stub, tmp_path).review(CASE, before)
    assert (after.decision, after.failure_type, after.next_action) == (decision, failure, action)
    assert after.confidence == 90
    record = after.meta["judge"]
    assert record["verdict"] == said and record["outcome"] == "applied" and record["prompt_version"] == "judge-v1"
    assert record["local"]["decision"] == "REVIEW" and after.meta["latency_ms"] == 1.0
    assert before.decision is Decision.REVIEW and "judge" not in before.meta  # the input is not mutated
    request = llm_stub.requests[0].json
    assert CASE.answer in request["messages"][1]["content"] and request["temperature"] == 0.0


def test_quoted_unsupported_claims_become_triggers(llm_stub, tmp_path):
    llm_stub.reply(verdict("unsupported", claims=["a five-year warranty", "not in the answer"]))
    after = make_judge(llm_stub, tmp_path).review(CASE, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert after.triggers == ("a five-year warranty",)


def test_the_judge_alone_never_rejects_a_local_accept(llm_stub, tmp_path):
    llm_stub.reply(verdict("unsupported"))
    after = make_judge(llm_stub, tmp_path).review(CASE, local(Decision.ACCEPT, FailureType.NONE))
    assert after.decision is Decision.REVIEW
    assert after.next_action is NextAction.HUMAN_REVIEW
    assert "disagrees" in after.reason


def test_an_unsure_or_unconfident_judge_leaves_review(llm_stub, tmp_path):
    llm_stub.reply(verdict("supported", 0.6))
    llm_stub.reply(verdict("unsure", 0.99))
    judge = make_judge(llm_stub, tmp_path, min_verdict_confidence=0.8)
    other = Case(id="c2", question=CASE.question, context=CASE.context, answer="Two years, I think.")
    first = judge.review(CASE, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    second = judge.review(other, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert first.decision is Decision.REVIEW and "not confident enough" in first.reason
    assert second.decision is Decision.REVIEW and "judge unsure" in second.reason
    assert first.confidence == 55  # the local confidence stands when the judge does not decide


def test_timeout_leaves_review_with_the_reason(llm_stub, tmp_path):
    llm_stub.push(llm_stub.Response(content=verdict("supported"), delay_s=0.6))
    judge = make_judge(llm_stub, tmp_path, timeout_s=0.15)
    after = judge.review(CASE, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert after.decision is Decision.REVIEW
    assert "judge unavailable: timeout after 0.15s" in after.reason
    assert after.meta["judge"]["error_type"] == "LLMTimeoutError"
    assert after.meta["judge"]["outcome"] == "unavailable"


def test_a_low_confidence_accept_the_judge_cannot_confirm_goes_to_review(llm_stub, tmp_path):
    llm_stub.push(llm_stub.Response(status=500))
    after = make_judge(llm_stub, tmp_path).review(CASE, local(Decision.ACCEPT, FailureType.NONE))
    assert after.decision is Decision.REVIEW and after.next_action is NextAction.HUMAN_REVIEW
    assert "judge unavailable: HTTP 500" in after.reason


@pytest.mark.parametrize("garbage", ["I think it is fine!", '{"verdict": "great", "confidence": 0.9, "rationale": "x"}',
                                     '{"verdict": "supported", "confidence": 9, "rationale": "x"}'])
def test_garbage_leaves_review_with_a_named_error(llm_stub, tmp_path, garbage):
    llm_stub.reply(garbage)
    after = make_judge(llm_stub, tmp_path).review(CASE, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert after.decision is Decision.REVIEW
    assert "judge answered garbage" in after.reason
    assert after.meta["judge"]["error_type"] == "LLMOutputError"


def test_a_crashing_client_never_crashes_the_review(tmp_path):
    class Broken(ChatClient):
        def chat(self, *args, **kwargs):
            raise RuntimeError("bug in the client")

    judge = LLMJudge(JudgePolicy(enabled=True), client=Broken("http://127.0.0.1:9/v1", "m"))
    after = judge.review(CASE, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert after.decision is Decision.REVIEW and "judge failed: RuntimeError" in after.reason


def test_a_dead_server_is_not_called_for_every_case(llm_stub, tmp_path):
    llm_stub.push(*[llm_stub.Response(status=503)] * 5)
    judge = LLMJudge(JudgePolicy(enabled=True, base_url=llm_stub.url, max_retries=0, cache_dir=str(tmp_path)),
                     breaker_after=2, breaker_cooldown_s=60)
    cases = [Case(id=str(i), question="q?", context=["c"], answer=f"answer {i}") for i in range(4)]
    results = [judge.review(c, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED)) for c in cases]
    assert llm_stub.calls == 2
    assert all(r.decision is Decision.REVIEW for r in results)
    assert "not called after 2 failures in a row" in results[-1].reason


@pytest.mark.parametrize(("decision", "failure"), [
    (Decision.REJECT, FailureType.UNSAFE_TONE), (Decision.REJECT, FailureType.MISSING_ABSTENTION),
    (Decision.REVIEW, FailureType.INVALID_SCORE), (Decision.REVIEW, FailureType.POOR_RETRIEVAL)])
def test_blocks_and_fail_closed_reviews_are_not_judged(llm_stub, tmp_path, decision, failure):
    llm_stub.default_content = verdict("supported", 1.0)
    after = make_judge(llm_stub, tmp_path).review(CASE, local(decision, failure))
    assert (after.decision, after.failure_type) == (decision, failure)
    assert after.meta["judge"]["outcome"] == "not_asked" and llm_stub.calls == 0


def test_a_case_without_context_is_left_to_the_abstention_rule(llm_stub, tmp_path):
    llm_stub.default_content = verdict("supported", 1.0)
    case = Case(id="mars", question="Will the company support the Mars office?", context="", answer="Perhaps.")
    after = make_judge(llm_stub, tmp_path).review(case, local(Decision.REVIEW, FailureType.VAGUE_UNGROUNDED))
    assert after.decision is Decision.REVIEW and llm_stub.calls == 0


class UnsafeTone:
    """Flags toxicity just above its threshold: a REJECT with low confidence."""

    info = ValidatorInfo("tone", "heuristic", "test")

    def predict(self, cases):
        labels = ("toxicity", "obscenity", "insult", "threat", "identity_hate")
        return [ToneOutput(applies=True, scores={**{label: 0.0 for label in labels}, "toxicity": 0.55},
                           flagged=("toxicity",), thresholds={label: 0.5 for label in labels}) for _ in cases]


def test_gate_never_lets_the_judge_override_an_unsafe_tone_reject(llm_stub, tmp_path):
    llm_stub.default_content = verdict("supported", 1.0)
    config = GateConfig(validators=["tone"])
    gate = Gate(config, instances={"tone": UnsafeTone()}, judge=make_judge(llm_stub, tmp_path))
    result = gate.validate(CASE)
    assert result.confidence < config.judge.uncertain_below_confidence  # the gate did hand it over
    assert (result.decision, result.failure_type) == (Decision.REJECT, FailureType.UNSAFE_TONE)
    assert result.meta["judge"]["outcome"] == "not_asked" and llm_stub.calls == 0


GROUNDED = Case(id="ok", question="When did the Eiffel Tower open?",
                context="The Eiffel Tower was opened on 31 March 1889 for the World's Fair in Paris.",
                answer="The Eiffel Tower opened on 31 March 1889.")


def test_gate_consults_the_judge_only_below_the_band(llm_stub, tmp_path):
    llm_stub.default_content = verdict("supported", 0.9)
    models = tmp_path / "no-models"
    case = GROUNDED
    local_result = Gate(GateConfig(), models_dir=models).validate(case)
    assert local_result.decision is Decision.ACCEPT
    at_band = GateConfig(judge=JudgePolicy(uncertain_below_confidence=local_result.confidence))
    above_band = GateConfig(judge=JudgePolicy(uncertain_below_confidence=local_result.confidence + 1))
    # Exactly at the band is not "below" it: no call, no judge record.
    result = Gate(at_band, models_dir=models, judge=make_judge(llm_stub, tmp_path)).validate(case)
    assert llm_stub.calls == 0 and "judge" not in result.meta
    result = Gate(above_band, models_dir=models, judge=make_judge(llm_stub, tmp_path)).validate(case)
    assert llm_stub.calls == 1 and result.meta["judge"]["verdict"] == "supported"
    assert result.decision is Decision.ACCEPT


def write_config(tmp_path: Path, stub_url: str, enabled: bool) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(f"judge:\n  enabled: {str(enabled).lower()}\n  uncertain_below_confidence: 100\n"
                    f"  base_url: {stub_url}\n  max_retries: 0\n  timeout_s: 2\n"
                    f"  cache_dir: {tmp_path / 'cache'}\n", encoding="utf-8")
    return path


def test_cli_judge_flag_overrides_the_config(llm_stub, tmp_path):
    llm_stub.default_content = verdict("supported", 0.9)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(GROUNDED.model_dump()) + "\n", encoding="utf-8")
    runner = CliRunner()
    base = ["validate", str(cases), "--models-dir", str(tmp_path / "no-models"), "--quiet"]

    off = runner.invoke(app, [*base, "-o", str(tmp_path / "off.jsonl"),
                              "--config", str(write_config(tmp_path, llm_stub.url, True)), "--no-judge"])
    assert off.exit_code == 0, off.output
    assert "judge" not in json.loads((tmp_path / "off.jsonl").read_text())["meta"]

    on = runner.invoke(app, [*base, "-o", str(tmp_path / "on.jsonl"),
                             "--config", str(write_config(tmp_path, llm_stub.url, False)), "--judge"])
    assert on.exit_code == 0, on.output
    record = json.loads((tmp_path / "on.jsonl").read_text())["meta"]["judge"]
    assert record["prompt_version"] == "judge-v1" and record["consulted"] and record["verdict"] == "supported"
    assert llm_stub.calls == 1


def test_shipped_prompt_loads_and_bad_placeholders_are_named(tmp_path):
    assert load_judge_prompt("prompts/judge_v1.yaml").version == "judge-v1"
    bad = tmp_path / "prompt.yaml"
    bad.write_text("version: x\nsystem: s\nuser: 'Q: {question} A: {answr}'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"user: .*answr"):
        load_judge_prompt(bad)
