"""QARelevanceValidator: the trained question–answer cross-encoder on onnxruntime (no torch).

Each case becomes one pair `[CLS] question [SEP] answer [SEP]`, truncated longest-first to the
manifest's `window.max_length` (exactly as in training: questions are short, so in practice only
the answer's tail is cut, and only when the pair does not fit). `score` = softmax(logits)[relevant]
in [0, 1] is reported as `model_score`.

The gate's `score` puts the model on the same scale as every relevance score, 0.5 = the boundary:
the model probability is mapped piecewise-linearly so that the threshold chosen on dev at export
(manifest `thresholds`) lands on 0.5, and the lexical question–answer overlap of the heuristic
fallback can only raise it (`score = max(calibrated model, lexical)`). Why the max: the model was
trained on Wikipedia-style pairs and under-scores answers it has seen little of (answers wrapped in
support-chat filler; Russian too for a model with an English vocabulary, such as the MiniLM recipe
in configs/qa_relevance.yaml; the shipped e5 model reads Russian); an answer that repeats the
question's content words is on topic whatever the model thinks. Off-topic answers share no
content words and keep the model's low score. `relevant` = score >= 0.5.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..case import Case
from ..heuristics import lexical_relevance
from ..manifest import Manifest
from ..results import QARelevanceOutput
from .base import ValidatorInfo, asks_a_question
from .pair_scorer import DEFAULT_BATCH, PairScorer

THRESHOLD_KEY = "relevant"
POSITIVE_LABEL = "relevant"
BOUNDARY = 0.5  # where every relevance score puts relevant vs irrelevant


def calibrate(probability: float, threshold: float) -> float:
    """Maps [0, threshold] onto [0, 0.5] and [threshold, 1] onto [0.5, 1]."""
    if not 0.0 < threshold < 1.0:
        return probability
    if probability < threshold:
        return BOUNDARY * probability / threshold
    return BOUNDARY + (1.0 - BOUNDARY) * (probability - threshold) / (1.0 - threshold)


class QARelevanceValidator:
    """Pair scoring, batch in, list out. Each pair runs as its own unpadded call by default (the
    dynamic-int8 graph picks one activation scale per call), so a case's score does not depend on
    its batch-mates, order or thread count (see `pair_scorer.DEFAULT_BATCH`)."""

    def __init__(self, folder: str | Path, manifest: Manifest, *, batch_size: int = DEFAULT_BATCH,
                 threads: int | None = None,
                 model_path: str | Path | None = None):
        """
        Args:
            folder: the verified model folder (manifest, tokenizer, model).
            manifest: its manifest, from `load_manifest`.
            batch_size: pairs per onnxruntime call.
            threads: onnxruntime intra-op threads (default: AUTOVALIDATORS_THREADS or all cores).
            model_path: another ONNX file with the same signature (benchmarks compare fp32 this way).
        """
        folder = Path(folder)
        if POSITIVE_LABEL not in manifest.labels:
            raise ValueError(f"{folder}: manifest labels {manifest.labels} lack {POSITIVE_LABEL!r}")
        self.manifest = manifest
        self.positive = manifest.labels.index(POSITIVE_LABEL)
        self.threshold = float(manifest.thresholds.get(THRESHOLD_KEY, 0.5))
        self.max_length = manifest.window.max_length
        self.batch_size = batch_size
        self.scorer = PairScorer(model_path or folder / manifest.model_file, folder / manifest.tokenizer_file,
                                 max_length=self.max_length, positive=self.positive, batch_size=batch_size,
                                 threads=threads)
        self.tokenizer, self.session = self.scorer.tokenizer, self.scorer.session
        self.info = ValidatorInfo("qa_relevance", "onnx", manifest.version, manifest.model_sha256)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(relevant) for (question, answer) pairs, in input order."""
        return self.scorer.scores(pairs)

    def predict(self, cases: Sequence[Case]) -> list[QARelevanceOutput]:
        # A case without a question (or a data-to-text request) or an answer has nothing to relate:
        # the check does not apply, and the model is not run.
        judged = [i for i, c in enumerate(cases) if asks_a_question(c) and c.answer.strip()]
        scores = self.scores([(cases[i].question, cases[i].answer) for i in judged])
        by_case = dict(zip(judged, scores))
        outputs = []
        for index in range(len(cases)):
            if index not in by_case:
                outputs.append(QARelevanceOutput(applies=False, source="onnx"))
                continue
            probability = float(by_case[index])
            case = cases[index]
            score = max(calibrate(probability, self.threshold), lexical_relevance(case.question, case.answer))
            outputs.append(QARelevanceOutput(applies=True, score=score, relevant=score >= BOUNDARY,
                                             model_score=probability, source="onnx"))
        return outputs
