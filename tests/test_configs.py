"""Every YAML file in configs/ loads into its typed schema, so dead or misspelt keys cannot creep in."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from autovalidators.inference.config import CONFIG_DIR, ConfigError, GateConfig, load_config

# file name -> "module:Schema". A new config file must be added here, or this test fails.
SCHEMAS = {
    "gate.yaml": "autovalidators.inference.config:GateConfig",
    "serve.yaml": "autovalidators.inference.serving.config:ServeConfig",
    "fact_spans.yaml": "autovalidators.data_prep.fact_spans.config:FactSpansPrepConfig",
    "fact_spans_model.yaml": "autovalidators.training.tasks.fact_spans:FactSpansModelConfig",
    "tone_head.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_neutral.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_wiki.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_head_wiki_encoder.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_by_language.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_wiki2_encoder.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_appropriate.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_appropriate_encoder.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions_encoder.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions_encoder_c01.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions_statements.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions2.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions2_sw10.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_soup_i2.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_head_instructions2_lwf.yaml": "autovalidators.training.tone_head:ToneHeadConfig",
    "tone_variants/tone_model_e5_12l_neutral.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_model_e5_12l_wiki.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "fact_spans_model_stage2.yaml": "autovalidators.training.tasks.fact_spans:FactSpansModelConfig",
    "regression.yaml": "autovalidators.inference.regression:RegressionConfig",
    "prompts/judge_v1.yaml": "autovalidators.inference.judge:JudgePrompt",
    "evaluation.yaml": "autovalidators.inference.evaluation.config:EvaluationConfig",
    "prompts/pointwise_v1.yaml": "autovalidators.inference.evaluation.config:PromptTemplate",
    "prompts/pairwise_v1.yaml": "autovalidators.inference.evaluation.config:PromptTemplate",
    "tone.yaml": "autovalidators.data_prep.tone.config:ToneConfig",
    "tone_model.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "qa_relevance.yaml": "autovalidators.training.tasks.qa_relevance:QARelevanceConfig",
    "qa_relevance_e5.yaml": "autovalidators.training.tasks.qa_relevance:QARelevanceConfig",
    "qa_relevance_e5_all.yaml": "autovalidators.training.tasks.qa_relevance:QARelevanceConfig",
    "qa_relevance_e5_12l.yaml": "autovalidators.training.tasks.qa_relevance:QARelevanceConfig",
    "prompts/tone_labeller_v1.yaml": "autovalidators.data_prep.tone.config:TonePrompt",
    "report.yaml": "autovalidators.inference.reporting.schema:ReportConfig",
    "quickstart_train.yaml": "autovalidators.training.quickstart.config:QuickstartTrainConfig",
    "base_model.yaml": "autovalidators.training.base_models.e5:BaseModelConfig",
    "tone_variants/tone_model_e5.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_wiki2.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_appropriate.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_instructions.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_instructions_statements.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_instructions2.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_soup_i2.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_instructions2_lwf.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_long.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_model_e5_12l.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_model_e5_12l_len128.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_len128b.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_len128c.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_distill.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_12l_distill_tox.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_model_e5_12l_distill3.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_model_e5_12l_distill3r2.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_detox.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_olid2.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "tone_variants/tone_model_e5_len128.yaml": "autovalidators.training.tasks.tone:ToneModelConfig",
    "abstention.yaml": "autovalidators.training.abstention.train:AbstentionConfig",
    "grounding.yaml": "autovalidators.training.tasks.grounding:GroundingConfig",
    "grounding_gpu_long.yaml": "autovalidators.training.tasks.grounding:GroundingConfig",
    "fact_spans_combiner.yaml": "autovalidators.training.grounding.combiner:CombinerConfig",
    **{f"fact_spans_variants/{name}.yaml": "autovalidators.training.grounding.combiner:CombinerConfig"
       for name in ("sentences", "rag_weighted", "plain_max")},
}


def schema_for(name: str):
    module, attribute = SCHEMAS[name].split(":")
    return getattr(importlib.import_module(module), attribute)


CONFIG_FILES = sorted(p for p in CONFIG_DIR.rglob("*.yaml"))


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_file_loads_into_its_schema(path: Path):
    key = str(path.relative_to(CONFIG_DIR))
    assert key in SCHEMAS, f"configs/{key} has no schema registered in tests/test_configs.py"
    load_config(path, schema_for(key))


def test_gpu_grounding_recipe_trains_on_the_shipped_recipes_data():
    # The GPU variant copies grounding.yaml's prepare section (configs have no inheritance); its numbers
    # are read as "the shipped recipe's data, trained differently", which a drift would make untrue.
    import yaml

    shipped, gpu = (yaml.safe_load((CONFIG_DIR / name).read_text(encoding="utf-8"))
                    for name in ("grounding.yaml", "grounding_gpu_long.yaml"))
    assert gpu["prepare"] == shipped["prepare"]
    assert (gpu["train"]["train_file"], gpu["train"]["dev_file"]) == (shipped["train"]["train_file"],
                                                                      shipped["train"]["dev_file"])


def test_all_problems_are_reported_at_once(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("checks:\n  grounding: {minimum: 2}\n  relevance: {minimum: -1}\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, GateConfig)
    message = str(info.value)
    assert "3 problem(s)" in message
    for key in ("checks.grounding.minimum", "checks.relevance.minimum", "bogus"):
        assert key in message


def test_not_yaml_and_missing_file_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.yaml", GateConfig)
    bad = tmp_path / "bad.yaml"
    bad.write_text("checks: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, GateConfig)
