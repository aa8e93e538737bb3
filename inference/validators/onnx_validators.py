"""Trained validators served by onnxruntime. Each registers a factory for its manifest task."""

from pathlib import Path

from ..manifest import Manifest
from .registry import register_onnx_validator
from . import fact_spans  # noqa: F401  (registers FactSpanValidator for task fact_spans)
from . import grounding_spans  # noqa: F401  (registers GroundingFactSpans for task fact_spans_grounding)
from .qa_relevance import QARelevanceValidator
from .tone import ToneValidator


@register_onnx_validator("qa_relevance")
def _qa_relevance(folder: Path, manifest: Manifest, *, threads: int | None = None) -> QARelevanceValidator:
    return QARelevanceValidator(folder, manifest, threads=threads)


@register_onnx_validator("tone")
def _tone(folder: Path, manifest: Manifest, *, threads: int | None = None) -> ToneValidator:
    return ToneValidator(folder, manifest, threads=threads)
