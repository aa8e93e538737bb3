"""Judge output parsing and the evaluation configs: bad judge output is a named error, never coerced."""

from __future__ import annotations

import json

import pytest

from autovalidators.inference.config import ConfigError, load_config
from autovalidators.inference.evaluation.config import (
    CompositeConfig,
    EvaluationConfig,
    load_evaluation_config,
    load_prompt,
)
from autovalidators.inference.evaluation.schema import (
    MalformedJudgement,
    OutOfRangeScore,
    UnparseableJudgeOutput,
    Winner,
    parse_pair_verdict,
    parse_pointwise,
)

GOOD = {"correctness": 4, "helpfulness": 3, "clarity": 5, "safety": 5, "overall": 4, "rationale": "Supported."}


def test_valid_reply_parses_and_fenced_json_is_accepted():
    score = parse_pointwise(json.dumps(GOOD))
    assert (score.correctness, score.safety, score.rationale) == (4, 5, "Supported.")
    assert parse_pointwise("```json\n" + json.dumps(GOOD) + "\n```") == score


@pytest.mark.parametrize("field, value", [("correctness", 7), ("helpfulness", 0), ("overall", 6), ("safety", 3)])
def test_out_of_range_scores_are_rejected_by_name(field, value):
    with pytest.raises(OutOfRangeScore, match=field):
        parse_pointwise(json.dumps({**GOOD, field: value}))


@pytest.mark.parametrize("change", [{"clarity": "4"}, {"clarity": 4.0}, {"clarity": 4.5}, {"extra": 1},
                                    {"rationale": ""}, {"safety": "5"}, {"safety": True}])
def test_wrong_types_and_shapes_are_not_coerced(change):
    with pytest.raises(MalformedJudgement):
        parse_pointwise(json.dumps({**GOOD, **change}))


def test_missing_field_is_malformed():
    reply = {k: v for k, v in GOOD.items() if k != "overall"}
    with pytest.raises(MalformedJudgement, match="overall"):
        parse_pointwise(json.dumps(reply))


@pytest.mark.parametrize("raw", ["", "The answer is good. 5/5", "[1, 2]", '{"correctness": 4,'])
def test_non_json_is_unparseable(raw):
    with pytest.raises(UnparseableJudgeOutput) as info:
        parse_pointwise(raw)
    assert info.value.kind == "unparseable" and info.value.raw == raw


def test_pair_verdict_parsing():
    assert parse_pair_verdict('{"winner": "second", "rationale": "grounded"}').winner is Winner.SECOND
    with pytest.raises(OutOfRangeScore):
        parse_pair_verdict('{"winner": "both", "rationale": "x"}')
    with pytest.raises(MalformedJudgement):
        parse_pair_verdict('{"winner": "first"}')


def test_composite_uses_config_weights():
    score = parse_pointwise(json.dumps(GOOD))
    assert score.composite(CompositeConfig(weights={"correctness": 1.0})) == 4
    assert score.composite(CompositeConfig(weights={"correctness": 1, "clarity": 1})) == pytest.approx(4.5)


def test_shipped_config_and_prompts_load():
    config = load_evaluation_config()
    assert config.pairwise.min_win_rate == 0.55
    assert sum(config.testset.quotas.values()) == pytest.approx(1.0)
    assert {"per_pr", "weekly", "on_demand", "quarterly_refresh"} <= set(config.cadence)
    pointwise = load_prompt(config.prompts.pointwise, "pointwise")
    assert "hedging" in pointwise.rubrics["correctness"]
    fields = dict(rubrics="r", question="q", context="c", answer="a")
    assert "q" in pointwise.user_template.format(**fields)
    with pytest.raises(ValueError, match="expected 'pairwise'"):
        load_prompt(config.prompts.pointwise, "pairwise")


def test_bad_config_names_every_key(tmp_path):
    path = tmp_path / "evaluation.yaml"
    path.write_text("composite: {weights: {correctnes: 1}}\ntestset: {quotas: {common: 0.5}}\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, EvaluationConfig)
    message = str(info.value)
    for key in ("correctnes", "sum to 1", "bogus"):
        assert key in message
