"""PairScorer: a sentence-pair cross-encoder on onnxruntime, shared by QA relevance and grounding."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from tokenizers import Tokenizer

from ..onnx_session import OnnxSession

# Rows per onnxruntime call for the 128-token encoders. Measured on this 2-core AVX2 CPU with the
# int8 grounding cross-encoder over 212 RAGTruth cases: 32 rows peak at 432 MB RSS and take 55 ms
# per case, 8 rows 208 MB and 40 ms (the int8 kernels' buffers grow with the batch, and the batch
# gains no speed on 2 cores).
DEFAULT_BATCH = 8


class PairScorer:
    """P(positive label) of a sentence-pair cross-encoder for (first, second) text pairs.

    Pairs are length-sorted and padded per batch with padding masked, so an fp32 model's score of
    a pair does not depend on its batch-mates.
    """

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *, max_length: int, positive: int = 1,
                 batch_size: int = DEFAULT_BATCH, threads: int | None = None):
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
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
