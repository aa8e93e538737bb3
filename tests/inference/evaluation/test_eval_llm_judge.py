"""The LLM judge path against a stub OpenAI-compatible server on loopback (tests/conftest.py)."""

from __future__ import annotations

import json

from autovalidators.inference.case import Case
from autovalidators.inference.evaluation.config import EvaluationConfig, LLMJudgeConfig
from autovalidators.inference.evaluation.llm_judge import (
    JudgeUnavailable,
    LLMPairwiseJudge,
    LLMPointwiseJudge,
    make_client,
)
from autovalidators.inference.evaluation.pairwise import judge_both_orders, summarize
from autovalidators.inference.evaluation.pointwise import summarize_pointwise

GOOD = {"correctness": 5, "helpfulness": 4, "clarity": 4, "safety": 5, "overall": 5, "rationale": "Grounded."}


def config(stub, tmp_path, **llm) -> EvaluationConfig:
    settings = {"base_url": stub.url, "model": "stub-judge", "cache_dir": str(tmp_path / "cache"),
                "timeout_s": 2, "max_retries": 1, **llm}
    return EvaluationConfig(judge="llm", llm=LLMJudgeConfig(**settings))


def cases(n: int = 3) -> list[Case]:
    return [Case(id=f"c{i}", question=f"Question {i}?", context=["Paris is in France."], answer=f"Answer {i}.",
                 meta={"category": "factual"}) for i in range(n)]


def make(kind, stub, tmp_path, **llm):
    cfg = config(stub, tmp_path, **llm)
    client = make_client(cfg)
    client.backoff_s = 0.01  # keep retry tests fast
    return kind.from_config(cfg, client), cfg


def test_pointwise_prompt_is_versioned_and_replies_are_cached(llm_stub, tmp_path):
    llm_stub.default_content = json.dumps(GOOD)
    judge, _ = make(LLMPointwiseJudge, llm_stub, tmp_path)
    assert judge.name == "llm:stub-judge:pointwise_v1"
    judged = judge.judge(cases())
    assert all(j.ok and j.score.correctness == 5 for j in judged) and llm_stub.calls == 3
    request = llm_stub.requests[0].json
    user = request["messages"][-1]["content"]
    assert "Question 0?" in user and "Paris is in France." in user and "hedging" in user
    assert request["temperature"] == 0.0
    judge.judge(cases())  # same prompts: all from the on-disk cache
    assert llm_stub.calls == 3


def test_bad_replies_are_named_counted_and_the_batch_goes_on(llm_stub, tmp_path):
    llm_stub.reply(json.dumps({**GOOD, "correctness": 9}))
    llm_stub.reply("Looks fine to me!")
    llm_stub.reply(json.dumps(GOOD))
    judge, cfg = make(LLMPointwiseJudge, llm_stub, tmp_path)
    batch = cases()
    judged = judge.judge(batch)
    assert [j.error.kind if j.error else "ok" for j in judged] == ["out_of_range", "unparseable", "ok"]
    rows, summary = summarize_pointwise(batch, judged, cfg, judge=judge.name)
    assert summary["errors"] == {"out_of_range": 1, "unparseable": 1}
    assert summary["scored"] == 1 and summary["means"]["correctness"] == 5


def test_timeouts_are_retried_then_reported_as_unavailable(llm_stub, tmp_path):
    slow = llm_stub.Response(content=json.dumps(GOOD), delay_s=1.0)
    llm_stub.push(slow, slow)
    llm_stub.default_content = json.dumps(GOOD)
    judge, _ = make(LLMPointwiseJudge, llm_stub, tmp_path, timeout_s=0.3)
    judged = judge.judge(cases(2))
    assert isinstance(judged[0].error, JudgeUnavailable) and "timeout" in str(judged[0].error)
    assert judged[1].ok


def test_server_error_is_retried(llm_stub, tmp_path):
    llm_stub.push(llm_stub.Response(status=500))
    llm_stub.default_content = json.dumps(GOOD)
    judge, _ = make(LLMPointwiseJudge, llm_stub, tmp_path)
    assert judge.judge(cases(1))[0].ok and llm_stub.calls == 2


def _answer_in_slot(content: str, slot: int) -> str:
    return content.split(f"Answer {slot}:\n", 1)[1].split("\n", 1)[0]


def test_pairwise_consistent_judge_decides_and_biased_judge_ties(llm_stub, tmp_path):
    pairs = [(c, c.model_copy(update={"answer": "GROUNDED " + c.answer})) for c in cases(4)]

    def by_content(payload):
        user = payload["messages"][-1]["content"]
        winner = "first" if "GROUNDED" in _answer_in_slot(user, 1) else "second"
        return json.dumps({"winner": winner, "rationale": "the grounded one"})

    llm_stub.responder = by_content
    judge, cfg = make(LLMPairwiseJudge, llm_stub, tmp_path)
    report = summarize(judge_both_orders(pairs, judge), cfg, judge=judge.name, mode="pairwise", calls={})
    assert report.total.wins_b == 4 and report.total.position_inconsistent == 0 and llm_stub.calls == 8

    llm_stub.responder = lambda payload: json.dumps({"winner": "first", "rationale": "first is best"})
    judge, cfg = make(LLMPairwiseJudge, llm_stub, tmp_path / "fresh")
    report = summarize(judge_both_orders(pairs, judge), cfg, judge=judge.name, mode="pairwise", calls={})
    assert report.total.ties == 4 and report.total.position_inconsistent == 4 and not report.significant
