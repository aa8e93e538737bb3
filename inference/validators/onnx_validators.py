"""Trained validators served by onnxruntime. Each registers a factory for its manifest task."""

from pathlib import Path

from ..manifest import Manifest
from . import register_onnx_validator
from . import fact_spans  # noqa: F401  (registers FactSpanValidator for task fact_spans)
from .qa_relevance import QARelevanceValidator


@register_onnx_validator("qa_relevance")
def _qa_relevance(folder: Path, manifest: Manifest) -> QARelevanceValidator:
    return QARelevanceValidator(folder, manifest)
