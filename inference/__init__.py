"""autovalidators runtime: validate LLM/RAG answers on a CPU with onnxruntime, without torch.

    from autovalidators.inference import Case, Gate
    result = Gate().validate(Case(id="1", question="…", context="…", answer="…"))
    result.decision, result.reason, result.to_dict()
"""

from .case import Case, CaseError, read_cases
from .config import ConfigError, GateConfig, load_gate_config
from .gate import Gate
from .results import Decision, FailureType, NextAction, Result, Span, SpanLabel

__all__ = [
    "Case", "CaseError", "read_cases", "ConfigError", "GateConfig", "load_gate_config", "Gate",
    "Decision", "FailureType", "NextAction", "Result", "Span", "SpanLabel",
]
