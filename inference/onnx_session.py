"""A thin onnxruntime wrapper that checks and casts inputs at the model boundary (no torch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import numpy as np
import onnxruntime as ort

_NUMPY_TYPES = {
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
}


class OnnxSession:
    """One InferenceSession per model file, shared by threads (onnxruntime's run is thread-safe).

    Input names and dtypes are cached once; `run` refuses missing inputs by name and casts the
    rest, so callers can pass plain int arrays from a tokenizer.
    """

    def __init__(self, model_path: str | Path, *, threads: int | None = None):
        options = ort.SessionOptions()
        # Default to the machine's cores; AUTOVALIDATORS_THREADS pins it for benchmarks.
        threads = threads or int(os.environ.get("AUTOVALIDATORS_THREADS", "0")) or None
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        # Spinning: after each parallel section onnxruntime's pool threads busy-wait for more work.
        # That suits batches (each model scores all the batch's rows, one row per call, back to
        # back) and hurts one case at a time, where the models alternate and one model's spinning
        # threads take the cores from the next. `autovalidators benchmark gate --cases
        # out/gate_sets/dev_real.jsonl` on 2 threads: spinning 11.0 cases/s batched, 193.8 ms p50
        # one case per call; not spinning 7.7 cases/s, 110.8 ms. `validate` and `batch` score
        # batches, so spinning stays on; AUTOVALIDATORS_ORT_SPIN=0 turns it off for callers that
        # send one case per call with several threads (`serve` runs one thread per call: no pool,
        # nothing spins). Scores do not change either way.
        spin = os.environ.get("AUTOVALIDATORS_ORT_SPIN", "1") != "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Memory: onnxruntime's CPU arena keeps the largest batch's activations reserved for the
        # life of the session, and memory patterns pre-plan one block per input shape. With the
        # shipped models both cost ~80 MB of `validate`'s peak RSS on 200 RAGTruth cases (420 ->
        # 340 MB) for CPU time per case within 5% (`autovalidators benchmark batch` prints both).
        # AUTOVALIDATORS_ORT_ARENA=1 turns them back on.
        arena = os.environ.get("AUTOVALIDATORS_ORT_ARENA", "0") == "1"
        options.enable_cpu_mem_arena = arena
        options.enable_mem_pattern = arena
        self.path = Path(model_path)
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.input_types = {i.name: _NUMPY_TYPES.get(i.type, np.float32) for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [name for name in self.input_types if name not in inputs]
        if missing:
            raise ValueError(f"{self.path.name}: input {missing[0]!r} is required by the model but not provided")
        feed = {name: np.asarray(inputs[name], dtype=dtype) for name, dtype in self.input_types.items()}
        return dict(zip(self.output_names, self.session.run(self.output_names, feed)))
