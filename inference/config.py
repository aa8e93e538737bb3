"""Typed configs loaded from YAML: unknown keys rejected, every error reported at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


class ConfigError(ValueError):
    """A config file that does not match its schema; the message lists every problem."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckPolicy(StrictModel):
    minimum: float = Field(ge=0.0, le=1.0, description="score below this fails the check")
    required: bool = Field(True, description="a failing required check changes the decision")


class ToneCheckPolicy(StrictModel):
    required: bool = True
    # Labels that block an answer; others (e.g. politics) are reported but do not decide.
    blocking_labels: tuple[str, ...] = ("toxicity", "obscenity", "insult", "threat", "identity_hate")


class ChecksPolicy(StrictModel):
    # Share of the answer's non-noise content the context supports.
    grounding: CheckPolicy = CheckPolicy(minimum=0.6)
    # 1 - the highest hallucination probability of any answer span: one fabricated sentence in an
    # otherwise grounded answer is the failure an average hides.
    span_grounding: CheckPolicy = CheckPolicy(minimum=0.5)
    # The worst sentence's share of its numbers and names that the context or question states: a
    # wrong figure or name in one sentence of a long answer, which the length-weighted grounding
    # averages away. 0 (off) until `calibrate` finds that it pays.
    specifics_grounding: CheckPolicy = CheckPolicy(minimum=0.0)
    # Share of the context's atomic facts the answer mentions. Off by default: a focused answer to a
    # narrow question rightly leaves most of a long context out.
    fact_recall: CheckPolicy = CheckPolicy(minimum=0.0, required=False)
    # Does the answer address the question (QA-relevance validator)?
    relevance: CheckPolicy = CheckPolicy(minimum=0.5)
    # Does the retrieved context cover the question at all?
    context_quality: CheckPolicy = CheckPolicy(minimum=0.3)
    # Fails when any blocking tone label reaches its own calibrated threshold (from the model).
    tone_safety: ToneCheckPolicy = ToneCheckPolicy()
    # 1 - spread between the validators' quality scores.
    agreement: CheckPolicy = CheckPolicy(minimum=0.4)


class AbstentionPolicy(StrictModel):
    # Empty context, or a context that does not cover the question, means the answer must abstain;
    # one that asserts facts instead is rejected whatever the numeric minimums say.
    enforce: bool = True


class SpecificityPolicy(StrictModel):
    # At or above this, an ungrounded answer counts as a confident hallucination (REJECT);
    # below it, as a vague one (REVIEW).
    confident_at: float = Field(0.35, ge=0.0, le=1.0)


class SpanPolicy(StrictModel):
    # Spans whose label probability lies in this band are listed as low-confidence for a person.
    low_confidence_band: tuple[float, float] = (0.35, 0.65)


class JudgePolicy(StrictModel):
    """Optional LLM judge, consulted only when the local decision is uncertain."""

    enabled: bool = False
    uncertain_below_confidence: int = Field(60, ge=0, le=100)
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "AUTOVALIDATORS_JUDGE_API_KEY"
    timeout_s: float = Field(20.0, gt=0)
    max_retries: int = Field(2, ge=0)
    cache_dir: str = ".cache/autovalidators/judge"
    # Versioned prompt (schema: autovalidators.inference.judge.JudgePrompt); relative to configs/.
    prompt: str = "prompts/judge_v1.yaml"
    # The judge's own confidence (0-1) needed before its verdict may change the local decision.
    min_verdict_confidence: float = Field(0.8, ge=0.0, le=1.0)


class HeuristicsPolicy(StrictModel):
    # Sentence embeddings (offline MiniLM, needs the train extra) for the fallback relevance score:
    # off = lexical only (fast, torch-free); auto = use them when installed; required = fail without.
    embeddings: Literal["off", "auto", "required"] = "off"
    # Validators that run as their heuristic although the shipped models/ folder holds a model: a
    # model is the default only when it beats its heuristic on answers it never saw. Models in any
    # other models_dir (your own runs, the quickstart's) are not affected.
    prefer: list[str] = Field(default_factory=list, description="shipped validators run as heuristics")


class InputPolicy(StrictModel):
    max_text_chars: int = Field(200_000, gt=0, description="longest question/answer accepted")


# The built-in rules, in the seeds' order (inference/decision.py says what each does). A declared
# check's rule is placed among them by naming it in `rule_order`.
BUILTIN_RULES = ("unsafe_tone", "missing_abstention", "off_topic", "confident_hallucination", "invalid_score",
                 "vague_ungrounded", "poor_retrieval", "incomplete", "disagreement")
SNAKE = r"^[a-z][a-z0-9_]*$"


class DeclaredCheck(StrictModel):
    """A check on any validator's output, declared in the gate config alone (no code).

    Its score is the validator output's `field` (1 - it when `invert`); it applies when the
    output's `applies` is true and every `applies_when` condition holds; when it fails (and is
    required) its rule decides `decision` with `failure_type` and `next_action`.
    """

    validator: str = Field(pattern=SNAKE, description="validator whose output holds the field")
    field: str = Field(pattern=SNAKE, description="attribute (or key) of that validator's output, in [0, 1]")
    invert: bool = Field(False, description="score = 1 - field, for fields where higher is worse")
    minimum: float = Field(ge=0.0, le=1.0, description="score below this fails the check")
    required: bool = Field(True, description="a failing required check changes the decision")
    applies_when: tuple[Literal["has_context", "no_context", "not_abstaining"], ...] = Field(
        (), description="extra conditions besides the output's own `applies`")
    decision: Literal["REVIEW", "REJECT"] = "REVIEW"
    failure_type: str = Field(pattern=SNAKE, description="failure type reported when the check fails")
    next_action: str = Field("human_review", pattern=SNAKE, description="what the caller should do then")
    reason: str = Field("", description="sentence for the result's reason; default names the score and minimum")


THRESHOLD_CHECKS = ("grounding", "span_grounding", "specifics_grounding", "fact_recall", "relevance", "context_quality",
                    "agreement")


class TaskPolicy(StrictModel):
    """Minimums for one task type that differ from `checks` (e.g. fitted by `autovalidators calibrate`):
    a data-to-text answer restates a table in words, so its lexical grounding runs lower than a
    summary's, and one minimum for both stops good answers of the one to catch bad ones of the other."""

    minimums: dict[str, float] = Field(default_factory=dict, description="check name -> minimum")

    @model_validator(mode="after")
    def _known_checks(self) -> "TaskPolicy":
        unknown = sorted(set(self.minimums) - set(THRESHOLD_CHECKS))
        if unknown:
            raise ValueError(f"minimums for unknown check(s) {unknown}; choose from {', '.join(THRESHOLD_CHECKS)}")
        bad = {k: v for k, v in self.minimums.items() if not 0.0 <= v <= 1.0}
        if bad:
            raise ValueError(f"minimums must lie in [0, 1], got {bad}")
        return self


class GateConfig(StrictModel):
    checks: ChecksPolicy = ChecksPolicy()
    # Per task type (QA, Summary, Data2txt; a case's meta.task, else inferred from question and
    # context): minimums that replace those in `checks` for that task's cases.
    tasks: dict[Literal["QA", "Summary", "Data2txt"], TaskPolicy] = Field(default_factory=dict)
    # Where the minimums came from (`autovalidators calibrate` writes it): data, sha256, rates.
    provenance: dict[str, Any] = Field(default_factory=dict)
    # Checks on further validators (see DeclaredCheck), by name; each needs a place in rule_order.
    declared_checks: dict[str, DeclaredCheck] = Field(default_factory=dict)
    # The order rules are tried in: every built-in rule once, plus each declared check's name.
    rule_order: tuple[str, ...] = BUILTIN_RULES
    abstention: AbstentionPolicy = AbstentionPolicy()
    specificity: SpecificityPolicy = SpecificityPolicy()
    spans: SpanPolicy = SpanPolicy()
    judge: JudgePolicy = JudgePolicy()
    heuristics: HeuristicsPolicy = HeuristicsPolicy()
    input: InputPolicy = InputPolicy()
    # Registered validator names (`inference.validators.registry`); checked when the Gate is built.
    validators: list[str] = ["fact_spans", "qa_relevance", "tone"]
    models_dir: str | None = Field(None, description="where trained validators live; None = the shipped models/")

    def for_task(self, task: str | None) -> "GateConfig":
        """This config with `tasks[task]`'s minimums in place (itself when the task has none)."""
        policy = self.tasks.get(task) if task else None
        if policy is None:
            return self
        checks = self.checks.model_copy(update={
            name: getattr(self.checks, name).model_copy(update={"minimum": minimum})
            for name, minimum in policy.minimums.items()})
        return self.model_copy(update={"checks": checks, "tasks": {}})

    @model_validator(mode="after")
    def _band_is_ordered(self) -> "GateConfig":
        low, high = self.spans.low_confidence_band
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError("spans.low_confidence_band must be [low, high] with 0 <= low <= high <= 1")
        return self

    @model_validator(mode="after")
    def _rule_order_is_complete(self) -> "GateConfig":
        builtin_checks = set(ChecksPolicy.model_fields)
        clash = sorted(set(self.declared_checks) & (set(BUILTIN_RULES) | builtin_checks))
        if clash:
            raise ValueError(f"declared_checks {clash} reuse a built-in check or rule name; rename them")
        known = set(BUILTIN_RULES) | set(self.declared_checks)
        unknown = [name for name in self.rule_order if name not in known]
        repeated = sorted({name for name in self.rule_order if self.rule_order.count(name) > 1})
        missing = [name for name in (*BUILTIN_RULES, *self.declared_checks) if name not in self.rule_order]
        problems = ([f"unknown rule(s) {unknown}"] if unknown else []) + \
                   ([f"repeated rule(s) {repeated}"] if repeated else []) + \
                   ([f"missing rule(s) {missing}"] if missing else [])
        if problems:
            raise ValueError("rule_order: " + "; ".join(problems) + f". It lists every built-in rule "
                             f"({', '.join(BUILTIN_RULES)}) and every declared check once")
        return self


ConfigT = TypeVar("ConfigT", bound=BaseModel)


def load_config(path: str | Path, schema: type[ConfigT]) -> ConfigT:
    """Loads YAML into `schema`; raises ConfigError naming the file and every bad key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such config file") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            if error["type"] == "extra_forbidden":
                problems.append(f"  {key}: unknown key; remove it or check its spelling")
            else:
                problems.append(f"  {key}: {error['msg']}")
        raise ConfigError(f"{path}: {len(problems)} problem(s)\n" + "\n".join(problems)) from None


def load_gate_config(path: str | Path | None = None) -> GateConfig:
    """The gate policy from `path`, or the shipped `configs/gate.yaml`."""
    return load_config(path or CONFIG_DIR / "gate.yaml", GateConfig)
