"""Registry of task specs: adding a validator task is one module here plus one entry below.

Entries are `module:attribute` strings imported on first use, so listing tasks stays cheap.
"""

from __future__ import annotations

import importlib

from autovalidators.training.tasks.base import TaskSpec

TASKS: dict[str, str] = {
    "qa_relevance": "autovalidators.training.tasks.qa_relevance:SPEC",
    "fact_spans": "autovalidators.training.tasks.fact_spans:SPEC",
    "tone": "autovalidators.training.tasks.tone:SPEC",  # multi-label, missing labels masked
    "grounding": "autovalidators.training.tasks.grounding:SPEC",  # the fact-span model's cross-encoder
}


def get_task(name: str) -> TaskSpec:
    """The spec for `name` (snake_case or the CLI's kebab-case)."""
    key = name.replace("-", "_")
    if key not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}")
    module_name, attribute = TASKS[key].split(":")
    return getattr(importlib.import_module(module_name), attribute)


__all__ = ["TASKS", "TaskSpec", "get_task"]
