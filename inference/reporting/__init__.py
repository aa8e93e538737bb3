"""`autovalidators report`: one readable report (JSON, Markdown, self-contained HTML) for all validators.

Each validator's benchmark JSON is turned into the typed `Report` model by a small adapter
(`adapters.py`); plots (`plots.py`, matplotlib) and rendering (`render.py`) read only that model,
so the numbers in every output are the benchmark's own numbers, copied, never recomputed.
"""

from .schema import Report, ReportConfig, ValidatorSection

__all__ = ["Report", "ReportConfig", "ValidatorSection"]
