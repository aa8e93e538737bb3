"""PairScorer: a sentence-pair cross-encoder on onnxruntime, shared by QA relevance and grounding."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..onnx_session import OnnxSession
from ..windowing import load_plain_tokenizer

# Rows per onnxruntime call for the encoders: one, unpadded. Why: the shipped graphs are dynamic
# int8, which picks one activation scale per tensor per call, so with several rows a pair's score
# moved with its batch-mates and their padding (up to 0.11 on a gate score, 3 decisions in 60
# RAGTruth cases alone vs batched). One row per call makes a score a function of the pair alone,
# at ~9% of batched CPU time (`tests/inference/test_determinism.py` holds it; 8 rows per call:
# 100 ms per RAGTruth case through the whole gate, 1 row: 109 ms, 2 threads). Larger values are
# for fp32 graphs in benchmarks, where padding is masked exactly.
DEFAULT_BATCH = 1


class PairScorer:
    """P(positive label) of a sentence-pair cross-encoder for (first, second) text pairs.

    With the default of one pair per call, a pair's score depends on the pair alone (not on its
    batch-mates, their order or the thread count); with `batch_size` > 1 pairs are length-sorted
    and padded per call, which only an fp32 graph keeps exact.
    """

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *, max_length: int, positive: int = 1,
                 batch_size: int = DEFAULT_BATCH, threads: int | None = None):
        self.tokenizer = load_plain_tokenizer(tokenizer_path)
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.tokenizer.no_padding()
        self.session = OnnxSession(model_path, threads=threads)
        self.positive, self.batch_size = positive, batch_size

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(pairs)) if pairs else []
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        result = np.zeros(len(encodings), dtype=np.float64)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in chunk)
            feed = {name: np.zeros((len(chunk), width), dtype=np.int64)
                    for name in ("input_ids", "attention_mask", "token_type_ids")}
            for row, index in enumerate(chunk):
                encoding = encodings[index]
                n = len(encoding.ids)
                feed["input_ids"][row, :n] = encoding.ids
                feed["attention_mask"][row, :n] = encoding.attention_mask
                feed["token_type_ids"][row, :n] = encoding.type_ids
            logits = self.session.run(feed)["logits"].astype(np.float64)
            logits -= logits.max(axis=1, keepdims=True)
            result[chunk] = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))[:, self.positive]
        return result
