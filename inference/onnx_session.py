"""A thin onnxruntime wrapper that checks and casts inputs at the model boundary (no torch)."""

from __future__ import annotations

import os
import platform
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


# AUTOVALIDATORS_ORT_SPIN: spin while a call runs (default), always, never.
SPIN_MODES = ("run", "1", "0")


def cpu_description() -> dict[str, str]:
    """The CPU's model name and how onnxruntime's int8 GEMM adds on it: "vnni" (int32, exact) or
    "avx2" (u8 x s8 pairs saturate at int16; see training/unsigned_int8.py). Benchmarks record it:
    int8 weights stored signed score differently on the two."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return {"cpu": name, "int8_dot_product": "unknown"}
    vnni = flags & {"avx512_vnni", "avx_vnni", "amx_int8"}
    return {"cpu": name, "int8_dot_product": "vnni" if vnni else "avx2" if "avx2" in flags else "other"}


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
        # Spinning: between parallel sections onnxruntime's pool threads busy-wait for more work.
        # Between calls that hurts: the models alternate, and one model's spinning threads take the
        # cores from the next. The default, "run", spins only while a call runs
        # (session.force_spinning_stop). `autovalidators benchmark gate --cases
        # out/gate_sets/dev_real.jsonl` on 2 threads, one case per call, p50: always spinning ("1")
        # 116.8 ms, "run" 69.6 ms, never ("0") 74.1 ms; batched 16, 15 and 14 cases/s. The whole
        # `validate` job (`benchmark batch --engines validate`, 2,000 cases): 15.3 cases/s with
        # "run", 15.5 before (always spinning, each check tokenising the context again).
        # AUTOVALIDATORS_ORT_SPIN=1 keeps the threads spinning between calls (a batch job that
        # wants the last few percent), 0 never spins. Scores do not change either way.
        spin = os.environ.get("AUTOVALIDATORS_ORT_SPIN", "run")
        if spin not in SPIN_MODES:
            raise ValueError(f"AUTOVALIDATORS_ORT_SPIN={spin!r}: choose one of {', '.join(SPIN_MODES)}")
        options.add_session_config_entry("session.intra_op.allow_spinning", "0" if spin == "0" else "1")
        options.add_session_config_entry("session.force_spinning_stop", "1" if spin == "run" else "0")
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
