"""GateScorer inside an engine: picklable, lazily built per worker, columns or rows in and out.

Ray and Spark are not installed here; `fake_map_batches` does what they do to a callable:
pickle it to worker processes and call it on slices of the data.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from autovalidators.inference import Case, Gate
from autovalidators.inference.batch import RESULT_COLUMNS, GateScorer

ROWS = [
    {"id": "g1", "question": "When did the Eiffel Tower open?",
     "context": ["The Eiffel Tower was opened on 31 March 1889 for the World's Fair in Paris."],
     "answer": "The Eiffel Tower opened on 31 March 1889."},
    {"id": "m1", "question": "Will the company open a Mars office?", "context": [],
     "answer": "Yes, the Mars office opens in 2027 with 40 staff."},
    {"id": "bad", "question": None, "context": [], "answer": "No question came with this one."},
    {"id": "w1", "question": "How long is the X200 warranty?",
     "context": ["The X200 router comes with a two-year limited warranty."],
     "answer": "The X200 has a two-year limited warranty."},
]


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {name: [row[name] for row in rows] for name in rows[0]}


def _score_in_worker(payload: bytes, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    scorer = pickle.loads(payload)
    assert scorer._gate is None  # nothing heavy crossed the process boundary
    return scorer(batch)


def fake_map_batches(data: dict[str, list[Any]], fn: Callable, batch_size: int, workers: int) -> dict[str, list]:
    """Ray's `map_batches`, reduced to what matters here: pickled fn, slices, worker processes."""
    count = len(next(iter(data.values())))
    slices = [{k: v[i:i + batch_size] for k, v in data.items()} for i in range(0, count, batch_size)]
    payload = pickle.dumps(fn)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        scored = list(pool.map(_score_in_worker, [payload] * len(slices), slices))
    return {k: [v for part in scored for v in part[k]] for k in scored[0]}


@pytest.fixture()
def scorer(tmp_path: Path) -> GateScorer:
    return GateScorer(models_dir=tmp_path / "no-models")  # heuristics, whatever models the tree holds


def _expected(tmp_path: Path) -> dict[str, str]:
    gate = Gate(models_dir=tmp_path / "no-models")
    return {r["id"]: gate.validate(Case.model_validate(r)).decision.value for r in ROWS if r["question"]}


def test_columns_in_columns_out(scorer: GateScorer, tmp_path: Path) -> None:
    out = scorer(_columns(ROWS))
    assert set(out) == set(ROWS[0]) | set(RESULT_COLUMNS)
    assert out["id"] == [r["id"] for r in ROWS]
    expected = _expected(tmp_path)
    assert {i: d for i, d in zip(out["id"], out["decision"]) if d} == expected
    bad = out["id"].index("bad")
    assert out["decision"][bad] is None and "field 'question'" in out["error"][bad]
    good = out["id"].index("m1")
    assert out["error"][good] is None
    assert json.loads(out["result"][good])["failure_type"] == out["failure_type"][good]


def test_rows_in_rows_out_and_numpy_columns(scorer: GateScorer) -> None:
    rows = scorer(ROWS)
    assert [r["id"] for r in rows] == [r["id"] for r in ROWS] and all(set(RESULT_COLUMNS) <= set(r) for r in rows)
    # Ray's default batch format: numpy arrays, contexts as an object array of arrays.
    context = np.empty(len(ROWS), dtype=object)
    context[:] = [np.array(r["context"], dtype=str) for r in ROWS]
    numpy_batch = {"id": np.array([r["id"] for r in ROWS]), "question": np.array([r["question"] for r in ROWS],
                   dtype=object), "context": context, "answer": np.array([r["answer"] for r in ROWS])}
    out = scorer(numpy_batch)
    assert out["decision"] == [r["decision"] for r in rows]


def test_column_names_can_be_mapped(tmp_path: Path) -> None:
    renamed = [{"request_id": r["id"], "question": r["question"], "docs": r["context"], "response": r["answer"]}
               for r in ROWS]
    scorer = GateScorer(models_dir=tmp_path, columns={"id": "request_id", "context": "docs", "answer": "response"})
    out = scorer(_columns(renamed))
    assert {i: d for i, d in zip(out["request_id"], out["decision"]) if d} == _expected(tmp_path)
    with pytest.raises(ValueError, match="unknown case fields"):
        GateScorer(columns={"response": "answer"})


def test_pickles_without_its_gate(scorer: GateScorer) -> None:
    scorer(ROWS[:1])  # builds the gate
    assert scorer._gate is not None
    clone = pickle.loads(pickle.dumps(scorer))
    assert clone._gate is None and clone.models_dir == scorer.models_dir
    assert clone(ROWS[:2])[1]["decision"] == scorer(ROWS[:2])[1]["decision"]


def test_fake_map_batches_over_worker_processes(scorer: GateScorer, tmp_path: Path) -> None:
    data = _columns(ROWS * 3)
    out = fake_map_batches(data, scorer, batch_size=5, workers=2)
    assert out["id"] == data["id"]
    local = scorer(data)
    assert out["decision"] == local["decision"]
    # Row numbers count within each engine batch; the id is what finds the record.
    assert [e and e.split(": ", 1)[1] for e in out["error"]] == [e and e.split(": ", 1)[1] for e in local["error"]]
    assert sum(e is not None for e in out["error"]) == 3 and all("(id 'bad')" in e for e in out["error"] if e)


def test_bad_batches_are_refused_clearly(scorer: GateScorer) -> None:
    with pytest.raises(ValueError, match="different lengths"):
        scorer({"id": ["a", "b"], "question": ["q"], "answer": ["x", "y"]})
    with pytest.raises(TypeError, match="dict of columns"):
        scorer(42)
    assert scorer([]) == []
    assert scorer(["not a row"])[0]["error"].startswith("batch:1")


def test_pandas_frames_and_map_in_pandas(scorer: GateScorer) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(ROWS, index=[10, 11, 12, 13])
    out = scorer(frame)
    assert list(out.index) == [10, 11, 12, 13] and list(out["id"]) == list(frame["id"])
    assert out.loc[12, "decision"] is None and "question" in out.loc[12, "error"]
    frames = list(scorer.map_in_pandas(iter([frame.iloc[:2], frame.iloc[2:]])))
    assert list(pd.concat(frames)["decision"]) == list(out["decision"])
