"""Batch scoring inside an existing engine: Ray Data `map_batches`, Spark `mapInPandas`, a Pool.

`GateScorer` is a picklable callable that holds only its settings; each worker process builds
its own Gate on the first batch it sees (ONNX sessions can't be pickled, and building them once
per worker, not per batch, is what keeps large logs cheap). It takes a batch as columns
(dict of lists or of numpy arrays, Ray's default), as a list of row dicts, or as a pandas
DataFrame, and gives back the same shape with result columns added:

    decision, failure_type, next_action, reason, confidence, result (the full JSON), error

A bad row gets `error` (the CLI's message, naming its row and field) and empty result columns;
the rest of the batch is scored.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .case import Case, CaseError, parse_case
from .config import load_gate_config
from .gate import Gate

RESULT_COLUMNS = ("decision", "failure_type", "next_action", "reason", "confidence", "result", "error")
# For Spark's mapInPandas, which needs the output schema up front: append to the input's schema.
SPARK_RESULT_SCHEMA = ("decision string, failure_type string, next_action string, reason string, "
                       "confidence int, result string, error string")
CASE_COLUMNS = ("id", "question", "context", "answer", "meta")


def _plain(value: Any) -> Any:
    """numpy/pyarrow values (arrays, numpy scalars) as plain Python; missing values as None."""
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas' missing markers, without importing pandas
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _rows_from_columns(columns: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"columns have different lengths: {lengths}")
    count = next(iter(lengths.values()), 0)
    return [{name: columns[name][i] for name in columns} for i in range(count)]


class GateScorer:
    """`scorer(batch) -> batch + result columns`; pickles without its Gate, rebuilds it lazily.

    Example (Ray Data, one Gate per actor):

        ds.map_batches(GateScorer, fn_constructor_kwargs={"validators": ["fact_spans"]},
                       batch_size=256, concurrency=4)

    Example (Spark):

        scorer = GateScorer()
        schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema) + ", " + SPARK_RESULT_SCHEMA
        df.mapInPandas(scorer.map_in_pandas, schema=schema)
    """

    def __init__(self, config: str | Path | None = None, *, validators: Sequence[str] | None = None,
                 models_dir: str | Path | None = None, chunk_size: int = 64,
                 columns: Mapping[str, str] | None = None):
        """
        Args:
            config: gate policy YAML (default: configs/gate.yaml).
            validators: names to run (default: the config's list).
            models_dir: trained validators (default: the config's, else models/).
            chunk_size: cases per Gate call; an engine batch larger than this is scored in chunks.
            columns: case field -> column name, when a log names them differently,
                e.g. {"answer": "response", "context": "retrieved"}.
        """
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        unknown = sorted(set(columns or {}) - set(CASE_COLUMNS))
        if unknown:
            raise ValueError(f"columns maps unknown case fields {unknown}; case fields: {', '.join(CASE_COLUMNS)}")
        self.config = str(config) if config else None
        self.validators = list(validators) if validators else None
        self.models_dir = str(models_dir) if models_dir else None
        self.chunk_size = chunk_size
        self.columns = dict(columns or {})
        self._gate: Gate | None = None

    # Pickling sends the settings only; the receiving worker builds its own Gate on first use.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_gate"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(load_gate_config(self.config), validators=self.validators, models_dir=self.models_dir)
        return self._gate

    def __call__(self, batch: Any) -> Any:
        """Scores one batch; returns the same kind it was given, with RESULT_COLUMNS added."""
        if _is_dataframe(batch):
            import pandas as pd

            rows = batch.to_dict("records")
            added = self.score_rows(rows)
            out = batch.copy()
            for name in RESULT_COLUMNS:
                out[name] = pd.Series([a[name] for a in added], index=batch.index, dtype=object)
            return out
        if isinstance(batch, Mapping):
            rows = _rows_from_columns(batch)
            added = self.score_rows(rows)
            out = dict(batch)
            for name in RESULT_COLUMNS:
                out[name] = [a[name] for a in added]
            return out
        if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
            rows = list(batch)
            return [{**(row if isinstance(row, Mapping) else {"row": row}), **extra}
                    for row, extra in zip(rows, self.score_rows(rows), strict=True)]
        raise TypeError(f"expected a dict of columns, a list of row dicts or a pandas DataFrame, "
                        f"got {type(batch).__name__}")

    def map_in_pandas(self, frames: Iterable[Any]) -> Iterator[Any]:
        """Spark `mapInPandas` form: an iterator of DataFrames in, one scored DataFrame out per frame."""
        for frame in frames:
            yield self(frame)

    def score_rows(self, rows: Sequence[Any]) -> list[dict[str, Any]]:
        """The result columns for each row, in order; a bad row gets `error` and nothing else."""
        records: list[Case | CaseError] = [self._to_case(row, i) for i, row in enumerate(rows)]
        cases = [r for r in records if isinstance(r, Case)]
        results = []
        for start in range(0, len(cases), self.chunk_size):
            results.extend(self.gate.validate_batch(cases[start:start + self.chunk_size]))
        produced = iter(results)
        added = []
        for record in records:
            if isinstance(record, CaseError):
                # Row numbers are within this batch; the id finds the record in a log of millions.
                where = f" (id {record.id!r})" if record.id is not None else ""
                added.append({name: None for name in RESULT_COLUMNS} | {"error": f"{record}{where}"})
                continue
            result = next(produced)
            added.append({
                "decision": result.decision.value,
                "failure_type": result.failure_type.value,
                "next_action": result.next_action.value,
                "reason": result.reason,
                "confidence": result.confidence,
                "result": json.dumps(result.to_dict(), ensure_ascii=False),
                "error": None,
            })
        return added

    def _to_case(self, row: Any, index: int) -> Case | CaseError:
        if not isinstance(row, Mapping):
            return CaseError(index + 1, None, f"expected a row mapping, got {type(row).__name__}", source="batch")
        record = {}
        for name in CASE_COLUMNS:
            column = self.columns.get(name, name)
            value = _plain(row.get(column))
            if value is not None:  # a missing meta/context column takes the Case default
                record[name] = value
        return parse_case(record, line=index + 1, source="batch row",
                          max_text_chars=self.gate.config.input.max_text_chars)


def _is_dataframe(batch: Any) -> bool:
    # Checked by name so pandas is imported only when the engine already hands us a DataFrame.
    return type(batch).__name__ == "DataFrame" and hasattr(batch, "to_dict") and hasattr(batch, "index")
