"""Where validators register themselves: trained ones by manifest task name, further ones (a PII
or length check, say) by validator name.

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


# validator name -> factory(models_dir, threads=None) for validators beyond the three built-in
# ones; a module registers its validator on import, and the gate config names it in `validators`
# and gates on its output with `declared_checks`.
VALIDATOR_FACTORIES: dict[str, Callable[..., Validator]] = {}


def register_validator(name: str):
    """Decorator: `@register_validator("pii")` on a factory `(models_dir, *, threads=None) -> Validator`
    (a class whose constructor takes those works too). Re-registering a name replaces it."""
    def decorator(factory):
        VALIDATOR_FACTORIES[name] = factory
        return factory
    return decorator
