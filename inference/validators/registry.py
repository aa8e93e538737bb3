"""Where trained validators register themselves: manifest task name -> factory.

A module of its own, importing nothing else of the package, so a validator module can register
on import without importing the package that loads it (no import circle).
"""

from __future__ import annotations

from typing import Callable

from .base import Validator

# task name in a manifest -> factory(folder, manifest, threads=None) for the ONNX validator of that
# task. Each trained validator module registers itself here on import (see register_onnx_validator).
ONNX_FACTORIES: dict[str, Callable[..., Validator]] = {}


def register_onnx_validator(task: str):
    """Class or function decorator: `@register_onnx_validator("tone")` on a factory
    `(folder, manifest, *, threads=None) -> Validator`."""
    def decorator(factory):
        ONNX_FACTORIES[task] = factory
        return factory
    return decorator
