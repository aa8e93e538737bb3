"""Validator registry: the trained ONNX model when `models/<name>/` holds one, else the heuristic."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..manifest import MANIFEST_NAME, load_manifest
from .base import VALIDATOR_NAMES, Validator, ValidatorInfo
from .heuristic import HeuristicFactSpans, HeuristicQARelevance, HeuristicTone
from .registry import ONNX_FACTORIES, VALIDATOR_FACTORIES, register_onnx_validator, register_validator

logger = logging.getLogger(__name__)

DEFAULT_MODELS_DIR = Path(__file__).resolve().parents[2] / "models"

HEURISTICS: dict[str, Callable[[], Validator]] = {
    "fact_spans": HeuristicFactSpans,
    "qa_relevance": HeuristicQARelevance,
    "tone": HeuristicTone,
}


def load_validator(name: str, models_dir: str | Path | None = None, *, embeddings: str = "off",
                   threads: int | None = None, heuristic: bool = False) -> Validator:
    """The trained validator `name` from `models_dir` (verified by sha256), else its heuristic.

    `embeddings` ("off", "auto", "required") lets the fallback relevance score use MiniLM embeddings.
    `threads`: onnxruntime intra-op threads per call (default: AUTOVALIDATORS_THREADS or all cores).
    `heuristic`: the heuristic even when a model folder exists (the gate config's `heuristics.prefer`).
    A model folder that exists but fails verification is an error, not a silent fallback: a
    tampered or half-copied model must not quietly turn into a heuristic in production.
    """
    if name in VALIDATOR_FACTORIES and name not in VALIDATOR_NAMES:
        return VALIDATOR_FACTORIES[name](models_dir, threads=threads)
    if name not in VALIDATOR_NAMES:
        raise ValueError(f"unknown validator {name!r}; choose from {', '.join(known_validators())} "
                         "(a further validator registers itself with inference.validators.register_validator)")
    folder = Path(models_dir or DEFAULT_MODELS_DIR) / name
    if heuristic or not (folder / MANIFEST_NAME).is_file():
        logger.info("%s runs as its heuristic (%s)", name,
                    "heuristics.prefer" if heuristic else f"no trained model in {folder}")
        if name == "qa_relevance" and embeddings != "off":
            from ..embeddings import load_embedder

            return HeuristicQARelevance(load_embedder(embeddings))
        return HEURISTICS[name]()
    manifest = load_manifest(folder)
    _import_onnx_validators()
    if manifest.task not in ONNX_FACTORIES:
        raise ValueError(f"{folder}: manifest task {manifest.task!r} has no runtime validator")
    return ONNX_FACTORIES[manifest.task](folder, manifest, threads=threads)


def known_validators() -> list[str]:
    """The built-in validator names, then every registered one."""
    return [*VALIDATOR_NAMES, *sorted(set(VALIDATOR_FACTORIES) - set(VALIDATOR_NAMES))]


def _import_onnx_validators() -> None:
    # Imported lazily so that a heuristic-only run never loads onnxruntime sessions it won't use.
    from . import onnx_validators  # noqa: F401


__all__ = ["Validator", "ValidatorInfo", "VALIDATOR_NAMES", "known_validators", "load_validator",
           "register_onnx_validator", "register_validator"]
