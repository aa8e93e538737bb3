"""A fourth validator through config alone: a PII check registers itself here (the way a user's
module would), a gate YAML names it and declares a check on its output, and the gate decides on
it, with no edit to `inference/`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest

from autovalidators.inference import Case, Gate
from autovalidators.inference.config import ConfigError, load_gate_config
from autovalidators.inference.validators import ValidatorInfo, register_validator

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
PHONE = re.compile(r"\+?\d[\d ()-]{8,}\d")


@dataclass(frozen=True)
class PiiOutput:
    applies: bool
    leak_probability: float


@register_validator("pii")
class PiiValidator:
    """Does the answer give out an e-mail address or phone number that the context does not hold?"""

    info = ValidatorInfo(name="pii", kind="heuristic", version="test-pii-1")

    def __init__(self, models_dir: str | Path | None = None, *, threads: int | None = None):
        self.models_dir = models_dir

    def predict(self, cases: Sequence[Case]) -> list[PiiOutput]:
        outputs = []
        for case in cases:
            found = EMAIL.findall(case.answer) + PHONE.findall(case.answer)
            leaked = [item for item in found if item not in case.context_text]
            outputs.append(PiiOutput(applies=bool(case.answer.strip()), leak_probability=1.0 if leaked else 0.0))
        return outputs


GATE_YAML = """
validators: [fact_spans, qa_relevance, tone, pii]
declared_checks:
  no_pii:
    validator: pii
    field: leak_probability
    invert: true              # the check's score is 1 - P(leak)
    minimum: 0.5
    decision: REJECT
    failure_type: pii_leak
    next_action: redact_and_regenerate
    reason: The answer gives out contact details that the context does not hold.
rule_order: [unsafe_tone, no_pii, missing_abstention, off_topic, confident_hallucination, invalid_score,
             vague_ungrounded, poor_retrieval, incomplete, disagreement]
"""

CONTEXT = ("The Eiffel Tower was opened on 31 March 1889 for the World's Fair in Paris. "
           "Contact the press office through the website.")
QUESTION = "When did the Eiffel Tower open?"


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    folder = tmp_path_factory.mktemp("pii")
    path = folder / "gate.yaml"
    path.write_text(GATE_YAML, encoding="utf-8")
    # An empty models folder: the three built-ins run as heuristics, so the test is about the gate.
    return Gate.from_config_file(path, models_dir=folder / "no-models")


def test_the_declared_check_on_the_fourth_validator_decides(gate: Gate) -> None:
    leak = gate.validate(Case(id="leak", question=QUESTION, context=[CONTEXT],
                              answer="The Eiffel Tower opened on 31 March 1889; write to jane.doe@example.com."))
    assert leak.decision.value == "REJECT"
    assert leak.failure_type.value == "pii_leak" and leak.next_action.value == "redact_and_regenerate"
    assert leak.reason == "The answer gives out contact details that the context does not hold."
    check = next(c for c in leak.checks if c.name == "no_pii")
    assert check.applies and check.score == 0.0 and check.passed is False
    as_json = leak.to_dict()
    assert as_json["failure_type"] == "pii_leak" and as_json["scores"]["no_pii"] == 0.0
    assert as_json["meta"]["models"]["pii"] == "test-pii-1"


def test_a_clean_answer_passes_the_fourth_check_and_the_built_in_rules_still_run(gate: Gate) -> None:
    clean = gate.validate(Case(id="clean", question=QUESTION, context=[CONTEXT],
                               answer="The Eiffel Tower opened on 31 March 1889."))
    assert clean.decision.value == "ACCEPT"
    assert next(c for c in clean.checks if c.name == "no_pii").passed is True
    # A built-in rule placed after the declared one still decides its own cases.
    no_context = gate.validate(Case(id="nc", question=QUESTION, context=[],
                                    answer="It opened on 2 May 1925 with 40 lifts."))
    assert no_context.failure_type.value == "missing_abstention"


def test_rule_order_decides_which_rule_speaks_first(tmp_path: Path) -> None:
    # Abusive and leaking: with unsafe_tone first the tone rule decides; moved after no_pii, the PII one.
    case = Case(id="both", question=QUESTION, context=[CONTEXT],
                answer="You idiot, it opened on 31 March 1889; mail jane.doe@example.com with stupid questions.")
    first = Gate.from_config_file(_write(tmp_path / "a.yaml", GATE_YAML), models_dir=tmp_path)
    moved = GATE_YAML.replace("rule_order: [unsafe_tone, no_pii,", "rule_order: [no_pii, unsafe_tone,")
    second = Gate.from_config_file(_write(tmp_path / "b.yaml", moved), models_dir=tmp_path)
    assert first.validate(case).failure_type.value == "unsafe_tone"
    assert second.validate(case).failure_type.value == "pii_leak"


def test_config_mistakes_are_named(tmp_path: Path) -> None:
    missing = GATE_YAML.replace("rule_order: [unsafe_tone, no_pii,", "rule_order: [unsafe_tone,")
    with pytest.raises(ConfigError, match=r"missing rule\(s\) \['no_pii'\]"):
        load_gate_config(_write(tmp_path / "missing.yaml", missing))
    with pytest.raises(ConfigError, match="declared_checks.no_pii.field"):
        load_gate_config(_write(tmp_path / "bad.yaml", GATE_YAML.replace("field: leak_probability", "field: Leak!")))
    not_run = GATE_YAML.replace("validators: [fact_spans, qa_relevance, tone, pii]",
                                "validators: [fact_spans, qa_relevance, tone]")
    with pytest.raises(ValueError, match=r"read validator\(s\) \['pii'\] that do not run"):
        Gate.from_config_file(_write(tmp_path / "notrun.yaml", not_run), models_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown validator"):
        Gate.from_config_file(_write(tmp_path / "unknown.yaml", GATE_YAML.replace("tone, pii]", "tone, pii, nope]")),
                              models_dir=tmp_path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
