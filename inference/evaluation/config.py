"""Typed evaluation config (`configs/evaluation.yaml`) and versioned judge prompts (`configs/prompts/`).

Everything a judge or a report depends on is here, with its default visible: composite weights,
significance rules, hybrid contest margin, test-set quotas and the evaluation cadence.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ..config import CONFIG_DIR, StrictModel, load_config

SCORE_DIMENSIONS = ("correctness", "helpfulness", "clarity", "safety")


class CompositeConfig(StrictModel):
    # Weighted mean of the 1-5 dimension scores; weights are normalised, so only ratios matter.
    weights: dict[str, float] = Field(
        default_factory=lambda: {"correctness": 0.4, "helpfulness": 0.25, "clarity": 0.1, "safety": 0.25}
    )

    @model_validator(mode="after")
    def _known_positive(self) -> "CompositeConfig":
        unknown = sorted(set(self.weights) - set(SCORE_DIMENSIONS))
        if unknown:
            raise ValueError(f"unknown dimension(s) {unknown}; choose from {', '.join(SCORE_DIMENSIONS)}")
        if any(w < 0 or not math.isfinite(w) for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        return self


class PairwiseConfig(StrictModel):
    alpha: float = Field(0.05, gt=0, lt=1, description="p-value below which a difference can be significant")
    # A tiny but consistent edge over many cases is "significant" yet not worth shipping.
    min_win_rate: float = Field(0.55, ge=0.5, le=1.0)
    # Local judge: composite scores closer than this (1-5 scale) are a tie, not a coin flip.
    tie_margin: float = Field(0.2, ge=0.0)


class HybridConfig(StrictModel):
    # Pairwise judging runs only where the two pointwise `overall` scores are within this margin.
    contested_within: int = Field(1, ge=0, le=4)


class LLMJudgeConfig(StrictModel):
    """The optional LLM judge over an OpenAI-compatible API (see inference/llm_client.py)."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "AUTOVALIDATORS_JUDGE_API_KEY"
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(2, ge=0)
    cache_dir: str = ".cache/autovalidators/eval-judge"
    temperature: float = Field(0.0, ge=0.0, le=2.0)


class PromptsConfig(StrictModel):
    # Paths are relative to configs/; a new prompt version is a new file, never an edit in place.
    pointwise: str = "prompts/pointwise_v1.yaml"
    pairwise: str = "prompts/pairwise_v1.yaml"


class EvalSetConfig(StrictModel):
    quotas: dict[str, float] = Field(
        default_factory=lambda: {"common": 0.4, "factual": 0.3, "ambiguous": 0.2, "adversarial": 0.1}
    )
    # Other names for a quota category found in `meta.category`.
    aliases: dict[str, str] = Field(default_factory=lambda: {"out_of_scope": "adversarial"})
    tolerance: float = Field(0.05, ge=0.0, le=1.0, description="allowed |share - quota| in `testset check`")
    refresh_share: float = Field(0.15, gt=0.0, lt=1.0, description="share replaced by `testset refresh`")
    seed: int = 13

    @model_validator(mode="after")
    def _quotas_sum_to_one(self) -> "EvalSetConfig":
        if any(q < 0 for q in self.quotas.values()) or not math.isclose(sum(self.quotas.values()), 1.0, abs_tol=1e-6):
            raise ValueError(f"quotas must be non-negative and sum to 1, got {sum(self.quotas.values()):.3f}")
        bad = sorted(t for t in self.aliases.values() if t not in self.quotas)
        if bad:
            raise ValueError(f"aliases point to unknown categories {bad}")
        return self


class CadenceJob(StrictModel):
    """One scheduled evaluation: what runs, on which judge, and what fails the job."""

    trigger: Literal["pull_request", "schedule", "manual"]
    schedule: str | None = Field(None, description="cron expression for trigger=schedule")
    command: Literal["compare", "evaluate pointwise", "testset refresh", "testset check"]
    judge: Literal["local", "llm"] = "local"
    mode: Literal["pairwise", "hybrid"] = "pairwise"
    max_cases: int | None = Field(None, gt=0, description="cap for fast jobs; None = the whole test set")
    fail_on: Literal["significant_regression", "quota_violation", "never"] = "never"


class ReviewConfig(StrictModel):
    sample_size: int = Field(20, gt=0)
    seed: int = 13


class EvaluationConfig(StrictModel):
    judge: Literal["local", "llm"] = "local"
    composite: CompositeConfig = CompositeConfig()
    pairwise: PairwiseConfig = PairwiseConfig()
    hybrid: HybridConfig = HybridConfig()
    llm: LLMJudgeConfig = LLMJudgeConfig()
    prompts: PromptsConfig = PromptsConfig()
    testset: EvalSetConfig = EvalSetConfig()
    review: ReviewConfig = ReviewConfig()
    cadence: dict[str, CadenceJob] = Field(default_factory=dict)


class PromptTemplate(StrictModel):
    """A versioned judge prompt. `user_template` is filled with str.format fields."""

    version: str
    kind: Literal["pointwise", "pairwise"]
    system: str
    rubrics: dict[str, str] = Field(default_factory=dict)
    user_template: str

    def render_rubrics(self) -> str:
        return "\n".join(f"- {name}: {text.strip()}" for name, text in self.rubrics.items())


def load_evaluation_config(path: str | Path | None = None) -> EvaluationConfig:
    """The evaluation config from `path`, or the shipped `configs/evaluation.yaml`."""
    return load_config(path or CONFIG_DIR / "evaluation.yaml", EvaluationConfig)


def load_prompt(name_or_path: str | Path, kind: str) -> PromptTemplate:
    """A prompt from a path (absolute, or relative to configs/); checks it is of the expected kind."""
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = CONFIG_DIR / path
    prompt = load_config(path, PromptTemplate)
    if prompt.kind != kind:
        raise ValueError(f"{path}: prompt kind is {prompt.kind!r}, expected {kind!r}")
    return prompt
