"""The Python API: `Gate(...).validate(case) -> Result`, batch-first and stateless per call.

Runs the selected validators over a batch, computes the model-free case signals, and lets the
decision policy (decision.py) decide. One Gate holds each model session once; threads may share it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import heuristics
from .abstention import AbstentionDetector, AbstentionOutput, load_abstention
from .case import Case
from .config import GateConfig, load_gate_config
from .decision import decide
from .grounding import task_of_case
from .results import CaseSignals, FactSpansOutput, QARelevanceOutput, Result, Span, ToneOutput
from .validators import DEFAULT_MODELS_DIR, VALIDATOR_NAMES, Validator, known_validators, load_validator
from .validators.heuristic import SOURCE_LACKS_LANGUAGES

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scored:
    """One case with everything the decision policy reads (see `Gate.score_batch`)."""

    case: Case
    outputs: dict[str, Any]
    abstention: AbstentionOutput
    signals: CaseSignals
    task: str  # QA, Summary or Data2txt (inference.grounding.task_of)


class Gate:
    """Validators + policy. Build once, call `validate`/`validate_batch` many times."""

    def __init__(
        self,
        config: GateConfig | None = None,
        *,
        validators: Sequence[str] | None = None,
        models_dir: str | Path | None = None,
        instances: dict[str, Validator] | None = None,
        judge: Any | None = None,
        abstention: AbstentionDetector | None = None,
        threads: int | None = None,
    ):
        """
        Args:
            config: the gate policy; default `configs/gate.yaml`.
            validators: names to run (default: the config's list).
            models_dir: folder with trained validators (default: the config's, else `models/`).
            instances: ready validators by name, overriding loading (tests, custom models).
            judge: an optional LLM judge with `review(case, result) -> Result`, consulted only when
                the local decision's confidence is below `judge.uncertain_below_confidence`.
            abstention: a ready abstention detector (default: the model in `<models_dir>/abstention/`,
                else the phrase list). It decides `abstains` for every abstention rule of the policy.
            threads: onnxruntime intra-op threads per model call (default: AUTOVALIDATORS_THREADS or
                all cores); a server running several calls at once sets calls x threads <= cores.
        """
        self.config = config or load_gate_config()
        names = list(validators or self.config.validators)
        instances = instances or {}
        known = known_validators()
        unknown = [n for n in names if n not in known and n not in instances]
        if unknown:
            raise ValueError(f"unknown validator(s) {unknown}; choose from {', '.join(known)} "
                             "(a further validator registers itself with inference.validators.register_validator)")
        misnamed = [n for n in self.config.heuristics.prefer if n not in known]
        if misnamed:
            raise ValueError(f"heuristics.prefer names unknown validator(s) {misnamed}; choose from {', '.join(known)}")
        declared = {spec.validator for spec in self.config.declared_checks.values()}
        unread = sorted(declared - set(names))
        if unread:
            raise ValueError(f"declared_checks read validator(s) {unread} that do not run; add them to `validators`")
        models_dir = models_dir or self.config.models_dir
        # heuristics.prefer is a verdict on the shipped models: models trained elsewhere still run.
        shipped = Path(models_dir or DEFAULT_MODELS_DIR).resolve() == DEFAULT_MODELS_DIR.resolve()
        prefer = set(self.config.heuristics.prefer) if shipped else set()
        self.validators: dict[str, Validator] = {
            name: instances.get(name) or load_validator(name, models_dir, embeddings=self.config.heuristics.embeddings,
                                                        threads=threads, heuristic=name in prefer)
            for name in names
        }
        self.abstention: AbstentionDetector = abstention or load_abstention(models_dir, threads=threads)
        self.judge = judge

    @classmethod
    def from_config_file(cls, path: str | Path | None = None, **kwargs: Any) -> "Gate":
        return cls(load_gate_config(path), **kwargs)

    @property
    def models(self) -> dict[str, dict[str, Any]]:
        parts = {**self.validators, "abstention": self.abstention}
        return {name: {"kind": v.info.kind, "version": v.info.version, "sha256": v.info.sha256}
                for name, v in parts.items()}

    @property
    def fallbacks(self) -> list[str]:
        """Validators (and the abstention detector) running as heuristics, by name."""
        parts = {**self.validators, "abstention": self.abstention}
        return sorted(name for name, v in parts.items() if v.info.kind == "heuristic")

    @property
    def uses_fallback(self) -> bool:
        return bool(self.fallbacks)

    def validate(self, case: Case) -> Result:
        return self.validate_batch([case])[0]

    def validate_batch(self, cases: Iterable[Case]) -> list[Result]:
        cases = list(cases)
        if not cases:
            return []
        started = time.perf_counter()
        scored = self.score_batch(cases)
        per_case_ms = (time.perf_counter() - started) * 1000 / len(cases)
        results = []
        for case, one in zip(cases, scored):
            case_started = time.perf_counter()
            result = self.decide(one)
            latency = per_case_ms + (time.perf_counter() - case_started) * 1000
            result.meta["latency_ms"] = round(latency, 3)
            if self.judge is not None and result.confidence < self.config.judge.uncertain_below_confidence:
                result = self.judge.review(case, result)
            results.append(result)
        return results

    def score_batch(self, cases: Sequence[Case]) -> list[Scored]:
        """Every validator's output and the model-free signals per case: all the decision reads.
        Deciding again under another config (`decide(scored, config)`) costs no model call, which
        is how `calibrate` tries thousands of minimums."""
        outputs = {name: validator.predict(cases) for name, validator in self.validators.items()}
        abstentions = self.abstention.predict(cases)
        for name, produced in [*outputs.items(), ("abstention", abstentions)]:
            if len(produced) != len(cases):
                raise RuntimeError(f"validator {name} returned {len(produced)} outputs for {len(cases)} cases")
        scored = []
        for index, case in enumerate(cases):
            abstention = abstentions[index]
            task = task_of_case(case)
            signals = CaseSignals(
                specificity=heuristics.specificity(case.answer),
                context_quality=heuristics.context_quality(case.question, case.context_text) if task == "QA" else None,
                abstains=abstention.abstains,
                specifics_grounding=heuristics.specifics_grounding(
                    case.answer, case.context_text, case.question, SOURCE_LACKS_LANGUAGES)
                if case.context_text.strip() else None,
            )
            scored.append(Scored(case, {name: produced[index] for name, produced in outputs.items()},
                                 abstention, signals, task))
        return scored

    def decide(self, scored: Scored, config: GateConfig | None = None) -> Result:
        """The verdict on one scored case under `config` (default: this gate's), with the case's
        task type's minimums (`config.tasks`) in place."""
        config = (config or self.config).for_task(scored.task)
        case, outputs, signals, abstention = scored.case, scored.outputs, scored.signals, scored.abstention
        fact = outputs.get("fact_spans")
        qa = outputs.get("qa_relevance")
        tone = outputs.get("tone")
        verdict = decide(
            has_context=case.has_context,
            signals=signals,
            fact=fact if isinstance(fact, FactSpansOutput) else None,
            qa=qa if isinstance(qa, QARelevanceOutput) else None,
            tone=tone if isinstance(tone, ToneOutput) else None,
            config=config,
            others={name: output for name, output in outputs.items() if name not in VALIDATOR_NAMES},
        )
        low, high = config.spans.low_confidence_band
        uncertain: tuple[Span, ...] = tuple(
            s for s in (fact.spans if isinstance(fact, FactSpansOutput) else ()) if low <= s.score <= high
        )
        return Result(
            id=case.id,
            decision=verdict.decision,
            failure_type=verdict.failure_type,
            next_action=verdict.next_action,
            reason=verdict.reason,
            confidence=verdict.confidence,
            checks=verdict.checks,
            scores=verdict.scores,
            validators=outputs,
            low_confidence_spans=uncertain,
            triggers=verdict.triggers,
            meta={
                "models": {name: info["sha256"] or info["version"] for name, info in self.models.items()},
                "fallback": self.fallbacks,
                "task": scored.task,
                "signals": {"specificity": signals.specificity, "context_quality": signals.context_quality,
                            "specifics_grounding": signals.specifics_grounding,
                            "abstains": signals.abstains, "abstention_probability": abstention.probability},
            },
        )
