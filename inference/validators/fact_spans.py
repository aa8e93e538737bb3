"""FactSpanValidator: the trained FACT/NOISE/HALLUCINATION token tagger on onnxruntime (no torch).

Encoding (shared with training, `training/tasks/fact_spans.py`, so both see identical inputs):
each window is `[CLS] question [SEP] context-window [SEP] answer-part [SEP]` built by
`inference.windowing.build_windows`. The answer is never truncated: an answer longer than
`max_answer_tokens` is cut at word boundaries into parts, and each part gets its own windows over
the whole context (consecutive windows share `stride` context tokens; the stride shrinks to half
the room when an answer leaves little room, so windows always advance).

Aggregation (`inference.windowing.aggregate_windows`): per answer token, P(FACT) is the maximum
over the windows (a token is supported if any window supports it); the rest of the mass is shared
by NOISE/HALLUCINATION in proportion to their mean over windows. Parts are then concatenated.

Outputs per case:
- `spans`: consecutive words with the same label, character offsets into the answer; a word is
  HALLUCINATION when a piece's P(HALLUCINATION) reaches the dev threshold (`decide`), so
  `hallucinated` is true exactly when there is a HALLUCINATION span.
- `hallucination_score`: the highest per-token P(HALLUCINATION), rescaled piecewise-linearly so
  that the threshold chosen on dev at export (manifest `thresholds.hallucination`) sits at 0.5 —
  the gate's `span_grounding` check (1 - score >= 0.5) then agrees with `hallucinated`.
- `precision`: share of non-NOISE answer tokens labelled FACT by `decide`.
- `recall`: share of the context's atomic facts (`heuristics.atomic_facts`) whose content the
  answer's FACT spans repeat (`heuristics.fact_recall`).
- `applies=False` when the context is empty or the answer is blank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import heuristics
from ..case import Case
from ..manifest import Manifest
from ..onnx_session import OnnxSession
from ..results import FactSpansOutput, Span, SpanLabel
from ..windowing import WindowPlan, aggregate_windows, build_windows, load_plain_tokenizer, pad_batch, plain_tokenizer
from .registry import register_onnx_validator
from .base import ValidatorInfo

LABELS = ("FACT", "NOISE", "HALLUCINATION")
HALLUCINATION = LABELS.index("HALLUCINATION")
THRESHOLD_KEY = "hallucination"


@dataclass(frozen=True)
class EncodingRule:
    """How a case is cut into encoder windows; written into the manifest by export."""

    max_length: int = 512  # tokens per window, special tokens included
    stride: int = 128  # context tokens shared by consecutive windows (at most half the room)
    max_question_tokens: int = 64  # a longer question is cut
    max_answer_tokens: int = 256  # a longer answer is split into parts at word boundaries

    def __post_init__(self) -> None:
        if self.max_length - 4 - self.max_question_tokens - self.max_answer_tokens < 16:
            raise ValueError(f"max_length {self.max_length} leaves < 16 context tokens after a question of "
                             f"{self.max_question_tokens} and an answer part of {self.max_answer_tokens} tokens")

    @classmethod
    def for_length(cls, max_length: int, stride: int) -> "EncodingRule":
        """The rule for a window size: questions up to 1/8 of it (at most 64 tokens), answer parts
        up to half of it (at most 256), so at least 3/8 of every window is context."""
        return cls(max_length=max_length, stride=stride, max_question_tokens=min(64, max_length // 8),
                   max_answer_tokens=min(256, max_length // 2))

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> "EncodingRule":
        return cls.for_length(manifest.window.max_length, manifest.window.stride)


@dataclass(frozen=True)
class AnswerPart:
    """One stretch of the answer with its windows; `offset` maps part offsets to answer offsets."""

    offset: int
    text: str
    plan: WindowPlan


def answer_parts(tokenizer: Any, answer: str, max_tokens: int) -> list[tuple[int, int]]:
    """Character ranges of the answer, each at most `max_tokens` tokens, cut between words."""
    encoding = plain_tokenizer(tokenizer).encode(answer, add_special_tokens=False)
    n = len(encoding.ids)
    if n <= max_tokens:
        return [(0, len(answer))]
    words = encoding.word_ids
    ranges, first = [], 0
    while first < n:
        last = min(first + max_tokens, n)
        cut = last
        # Step back to a word start so no word is split (unless one word fills the whole part).
        while last < n and cut > first + 1 and words[cut] is not None and words[cut] == words[cut - 1]:
            cut -= 1
        last = cut if cut > first + 1 or last == n else last
        ranges.append((encoding.offsets[first][0], encoding.offsets[last - 1][1]))
        first = last
    return ranges


def plan_case(tokenizer: Any, question: str, context: str, answer: str, rule: EncodingRule) -> list[AnswerPart]:
    """The answer parts of a case, each with windows over the whole context."""
    backend = plain_tokenizer(tokenizer)
    n_question = min(len(backend.encode(question, add_special_tokens=False).ids), rule.max_question_tokens)
    parts = []
    for start, end in answer_parts(backend, answer, rule.max_answer_tokens):
        text = answer[start:end]
        n_answer = len(backend.encode(text, add_special_tokens=False).ids)
        room = rule.max_length - 4 - n_question - n_answer
        plan = build_windows(backend, question, context, text, max_length=rule.max_length,
                             stride=min(rule.stride, room // 2), max_question_tokens=rule.max_question_tokens,
                             min_context_tokens=min(16, room))
        parts.append(AnswerPart(start, text, plan))
    return parts


def decide(probs: np.ndarray, threshold: float) -> np.ndarray:
    """Label per token: HALLUCINATION when its P(HALLUCINATION) reaches the dev threshold (the
    example-level decision rule, so an answer is `hallucinated` exactly when it has a
    HALLUCINATION span), else the likelier of FACT and NOISE."""
    probs = np.asarray(probs, dtype=np.float64).reshape(-1, len(LABELS))
    return np.where(probs[:, HALLUCINATION] >= threshold, HALLUCINATION, probs[:, :HALLUCINATION].argmax(axis=1))


def word_spans(answer: str, plan: WindowPlan, probs: np.ndarray, threshold: float) -> list[Span]:
    """Spans of consecutive words with the same label. A word is HALLUCINATION when any of its
    pieces is (`decide`), else the likelier of FACT/NOISE over its pieces' mean; a span's score is
    the mean probability of its label over its tokens."""
    labels: list[int] = []
    words: list[list[int]] = []
    for token, word in enumerate(plan.answer_word_ids):
        if words and plan.answer_word_ids[words[-1][-1]] == word:
            words[-1].append(token)
        else:
            words.append([token])
    for tokens in words:
        if (decide(probs[tokens], threshold) == HALLUCINATION).any():
            labels.append(HALLUCINATION)
        else:
            labels.append(int(probs[tokens, :HALLUCINATION].mean(axis=0).argmax()))
    spans: list[Span] = []
    index = 0
    while index < len(words):
        last = index
        while last + 1 < len(words) and labels[last + 1] == labels[index]:
            last += 1
        tokens = [t for w in words[index:last + 1] for t in w]
        start, end = plan.answer_offsets[tokens[0]][0], plan.answer_offsets[tokens[-1]][1]
        spans.append(Span(start=start, end=end, label=SpanLabel(LABELS[labels[index]]),
                          score=float(probs[tokens, labels[index]].mean()), text=answer[start:end]))
        index = last + 1
    return spans


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def calibrate(raw: float, threshold: float) -> float:
    """Monotone map of a raw P(HALLUCINATION) that puts `threshold` at 0.5."""
    threshold = min(max(threshold, 1e-6), 1 - 1e-6)
    if raw < threshold:
        return 0.5 * raw / threshold
    return 0.5 + 0.5 * (raw - threshold) / (1 - threshold)


class FactSpanValidator:
    """Batch in, list out. The windows of all cases are length-sorted and run `batch_size` at a
    time. The default is one window per call: dynamically quantized (int8) graphs compute their
    activation scales over the whole input tensor, so windows sharing a call would change each
    other's results; one per call also wastes no padding on CPU. With fp32 graphs larger batches
    give the same results (padding is masked; the tests check both)."""

    def __init__(self, folder: str | Path, manifest: Manifest, *, batch_size: int = 1, threads: int | None = None,
                 model_path: str | Path | None = None):
        """
        Args:
            folder: the verified model folder (manifest, tokenizer, model).
            manifest: its manifest, from `load_manifest`.
            batch_size: windows per onnxruntime call.
            threads: onnxruntime intra-op threads (default: AUTOVALIDATORS_THREADS or all cores).
            model_path: another ONNX file with the same signature (benchmarks compare fp32 this way).
        """
        folder = Path(folder)
        if tuple(manifest.labels) != LABELS:
            raise ValueError(f"{folder}: manifest labels {manifest.labels} are not {list(LABELS)}")
        self.manifest = manifest
        self.rule = EncodingRule.from_manifest(manifest)
        self.threshold = float(manifest.thresholds.get(THRESHOLD_KEY, 0.5))
        self.batch_size = batch_size
        self.tokenizer = load_plain_tokenizer(folder / manifest.tokenizer_file)
        self.session = OnnxSession(model_path or folder / manifest.model_file, threads=threads)
        self.info = ValidatorInfo("fact_spans", "onnx", manifest.version, manifest.model_sha256)

    def token_probabilities(self, parts_per_case: Sequence[list[AnswerPart]]) -> list[list[np.ndarray]]:
        """Aggregated (n_tokens, 3) probabilities per answer part, per case."""
        windows = [(c, p, w) for c, parts in enumerate(parts_per_case) for p, part in enumerate(parts)
                   for w in range(len(part.plan.windows))]
        order = sorted(range(len(windows)), key=lambda i: len(_window(parts_per_case, windows[i]).input_ids))
        answer_probs: dict[tuple[int, int, int], np.ndarray] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = [windows[i] for i in order[start:start + self.batch_size]]
            logits = self.session.run(pad_batch([_window(parts_per_case, key) for key in chunk]))["logits"]
            for row, (c, p, w) in enumerate(chunk):
                plan = parts_per_case[c][p].plan
                answer_probs[(c, p, w)] = softmax(logits[row][plan.answer_slice(w)])
        return [[aggregate_windows([answer_probs[(c, p, w)] for w in range(len(part.plan.windows))], LABELS)
                 for p, part in enumerate(parts)] for c, parts in enumerate(parts_per_case)]

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        applies = [bool(c.has_context and c.answer.strip()) for c in cases]
        parts = [plan_case(self.tokenizer, c.question, c.context_text, c.answer, self.rule) if ok else []
                 for c, ok in zip(cases, applies)]
        probabilities = self.token_probabilities(parts)
        outputs = []
        for case, ok, case_parts, case_probs in zip(cases, applies, parts, probabilities):
            if not ok:
                outputs.append(FactSpansOutput(applies=False, source="onnx"))
                continue
            outputs.append(self._output(case, case_parts, case_probs))
        return outputs

    def _output(self, case: Case, parts: list[AnswerPart], probs: list[np.ndarray]) -> FactSpansOutput:
        spans = []
        for part, part_probs in zip(parts, probs):
            for span in word_spans(part.text, part.plan, part_probs, self.threshold):
                start, end = span.start + part.offset, span.end + part.offset
                spans.append(Span(start=start, end=end, label=span.label, score=span.score,
                                  text=case.answer[start:end]))
        token_probs = np.concatenate(probs) if probs else np.zeros((0, len(LABELS)))
        raw = float(token_probs[:, HALLUCINATION].max()) if len(token_probs) else 0.0
        predicted = decide(token_probs, self.threshold)
        claims = predicted != LABELS.index("NOISE")
        precision = float((predicted[claims] == 0).mean()) if claims.any() else 1.0
        supported = " ".join(s.text for s in spans if s.label is SpanLabel.FACT)
        recall = heuristics.fact_recall(supported, case.context_text) if supported else 0.0
        return FactSpansOutput(applies=True, hallucinated=raw >= self.threshold,
                               hallucination_score=calibrate(raw, self.threshold), precision=precision,
                               recall=recall, spans=tuple(spans), source="onnx")


def _window(parts_per_case: Sequence[list[AnswerPart]], key: tuple[int, int, int]):
    c, p, w = key
    return parts_per_case[c][p].plan.windows[w]


@register_onnx_validator("fact_spans")
def _fact_spans(folder: Path, manifest: Manifest, *, threads: int | None = None) -> FactSpanValidator:
    return FactSpanValidator(folder, manifest, threads=threads)
