"""GroundingFactSpans: the shipped fact-span model, sentence grounding on onnxruntime (no torch).

Per answer sentence (`inference.grounding`): the lexical signals the heuristic computes (shared
content stems, numbers and names missing from the context, negation mismatch, best-chunk and
bigram overlap, ...) plus a cross-encoder's P(supported) for (best context chunk, sentence)
(`model.onnx`, NLI-style) go into one learned combiner (`combiner.onnx`: a logistic model as
shipped, trees possible) that gives P(unsupported). Why stacked: on long-form answers word
overlap alone beats a small cross-encoder, on abstractive summaries the cross-encoder sees
paraphrase the overlap cannot; the combiner learns how much each counts from judged sentences.

Outputs per case (what the gate reads):
- `spans`: NOISE for filler sentences and preambles; a sentence whose answer-scale score
  (`AnswerCalibration`: its P(unsupported), discounted by the answer's number of claim sentences)
  reaches the dev threshold (manifest `thresholds`: `hallucination/<task>` for the case's task
  type, `grounding.task_of`, where dev chose one, else `hallucination`) is HALLUCINATION over the
  words the token narrower marks (`narrower.onnx`, `inference.narrowing`; manifest
  `training.span_mode` "words"), or over its unsupported phrases ("phrases"), or wholly
  ("sentence"); FACT elsewhere;
- `hallucination_score`: the highest sentence score, mapped piecewise-linearly so the threshold
  sits at 0.5 (the gate's `span_grounding` check then agrees with `hallucinated`);
- `precision`: length-weighted share of claim sentences' characters labelled FACT;
- `recall`: share of the context's atomic facts the FACT spans repeat (`heuristics.fact_recall`);
- `applies=False` without context or answer. Answers in `fallback_languages` (Russian: the
  English vocabulary cannot read it) go to the heuristic, `source="heuristic"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import heuristics
from ..case import Case
from ..grounding import CHUNK_WORDS, NLI_FEATURE, ContextIndex, SentenceSignals, logit, sentence_signals, task_of_case
from ..manifest import Manifest
from ..narrowing import marked_ranges, token_features
from ..onnx_session import OnnxSession
from ..results import FactSpansOutput, Span, SpanLabel
from ..text import content_stems, language_of
from .registry import register_onnx_validator
from .base import ValidatorInfo
from .heuristic import HeuristicFactSpans, flagged_spans
from .pair_scorer import DEFAULT_BATCH, PairScorer

THRESHOLD_KEY = "hallucination"
TASK = "fact_spans_grounding"


class _ProbabilityModel:
    """A scikit-learn classifier exported by skl2onnx: rows -> one column of its probabilities."""

    def __init__(self, model_path: str | Path, column: int, threads: int | None = None):
        self.session = OnnxSession(model_path, threads=threads or 1)
        self.input_name = next(iter(self.session.input_types))
        self.output = next(n for n in self.session.output_names if "prob" in n)
        self.column = column

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        if len(rows) == 0:
            return np.zeros(0)
        probabilities = self.session.run({self.input_name: rows.astype(np.float32)})[self.output]
        return np.asarray(probabilities, dtype=np.float64)[:, self.column]


class Combiner(_ProbabilityModel):
    """The stacked scorer: feature rows (FEATURE_NAMES order) -> P(unsupported) per sentence."""

    def __init__(self, model_path: str | Path, *, threads: int | None = None):
        super().__init__(model_path, column=0, threads=threads)  # class 0 = unsupported

    def unsupported(self, features: np.ndarray) -> np.ndarray:
        return self.probabilities(features)


@dataclass(frozen=True)
class AnswerCalibration:
    """The answer's score from its claim sentences' P(unsupported): a logistic model of the worst
    sentence's logit and the log of the number of claim sentences. Why the count: an answer of k
    sentences has k chances for one to cross any cut by chance, so with the plain maximum long
    answers are flagged far more often than their error rate warrants (a multiple-comparison
    correction, learned from judged answers). Applied per sentence, so the answer is flagged
    exactly when its worst sentence is. The defaults are the identity (score = max P)."""

    max_logit: float = 1.0
    log_claims: float = 0.0
    intercept: float = 0.0

    def scores(self, unsupported: np.ndarray) -> np.ndarray:
        p = np.asarray(unsupported, dtype=np.float64)
        if not len(p) or (self.max_logit, self.log_claims, self.intercept) == (1.0, 0.0, 0.0):
            return p
        z = self.max_logit * logit(p) + self.log_claims * math.log(len(p)) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))


class Narrower(_ProbabilityModel):
    """The token model (`narrower.onnx`): TOKEN_FEATURE_NAMES rows -> P(word is unsupported)."""

    def __init__(self, model_path: str | Path, *, cut: float, gap: int, task_cuts: dict[str, float] | None = None,
                 threads: int | None = None):
        """`cut`: the word score from which a word is marked; `task_cuts`: per task type where dev
        chose one of its own; `gap`: unmarked words a marked run may bridge."""
        super().__init__(model_path, column=1, threads=threads)  # class 1 = unsupported word
        self.cut, self.gap = float(cut), int(gap)
        self.task_cuts = {task: float(value) for task, value in (task_cuts or {}).items()}

    def word_scores(self, rows: np.ndarray) -> np.ndarray:
        return self.probabilities(rows)

    def ranges(self, context: ContextIndex, flagged: Sequence[tuple[int, SentenceSignals, float]],
               task: str | None = None) -> dict[int, list[tuple[int, int]]]:
        """Claim index -> marked answer ranges, for the flagged (claim index, sentence, P) triples."""
        if not flagged:
            return {}
        rows = [token_features(signal, context, p) for _, signal, p in flagged]
        scores = self.word_scores(np.concatenate(rows))
        cut = self.task_cuts.get(task or "", self.cut)
        out, position = {}, 0
        for (claim, signal, _), block in zip(flagged, rows):
            out[claim] = marked_ranges(signal, scores[position:position + len(block)], cut, self.gap)
            position += len(block)
        return out


def calibrate(probability: float, threshold: float) -> float:
    """Maps [0, threshold] onto [0, 0.5] and [threshold, 1] onto [0.5, 1]."""
    if not 0.0 < threshold < 1.0:
        return probability
    if probability < threshold:
        return 0.5 * probability / threshold
    return 0.5 + 0.5 * (probability - threshold) / (1.0 - threshold)


def sentence_spans(answer: str, signals: Sequence[SentenceSignals], unsupported: np.ndarray, threshold: float,
                   span_mode: str, phrase_gap: int = 1,
                   narrowed: dict[int, list[tuple[int, int]]] | None = None) -> list[Span]:
    """FACT / NOISE / HALLUCINATION spans of one answer from its claim sentences' scores
    (`unsupported`, on the threshold's scale). A flagged sentence is HALLUCINATION over: its
    unsupported phrases ("phrases"), all of it ("sentence"), or the word ranges the narrower marked
    ("words": `narrowed`, claim index -> answer ranges)."""
    spans: list[Span] = []
    claims = iter(enumerate(unsupported))
    for signal in signals:
        s = signal.sentence
        if signal.is_noise:
            spans.append(Span(s.start, s.end, SpanLabel.NOISE, 0.9, s.text))
            continue
        claim, p = next(claims)
        p = float(p)
        if p < threshold:
            spans.append(Span(s.start, s.end, SpanLabel.FACT, 1.0 - p, s.text))
            continue
        if span_mode == "words":
            ranges = (narrowed or {}).get(claim) or [(s.start, s.end)]
        else:
            ranges = (signal.phrases(phrase_gap) if span_mode == "phrases" else []) or [(s.start, s.end)]
        spans.extend(flagged_spans(answer, s.start, s.end, ranges, p))
    return spans


class GroundingFactSpans:
    """Batched: every claim sentence of every case goes through one cross-encoder and one
    combiner call per batch."""

    def __init__(self, scorer: PairScorer | None, combiner: Combiner, *, threshold: float,
                 task_thresholds: dict[str, float] | None = None, span_mode: str = "phrases", phrase_gap: int = 1,
                 answer_calibration: AnswerCalibration = AnswerCalibration(), narrower: Narrower | None = None,
                 fallback_languages: Sequence[str] = (), info: ValidatorInfo | None = None):
        """
        Args:
            scorer: the cross-encoder, or None for a lexical-only combiner (its nli feature stays NO_NLI).
            combiner: the stacked scorer.
            threshold: answer score (`answer_calibration` of the sentences' P(unsupported)) from which
                a sentence, and so its answer, is a hallucination (chosen on dev).
            task_thresholds: per task type (`grounding.task_of`) where dev chose one of its own.
            span_mode: "words" (the narrower's marked words of a flagged sentence; needs `narrower`),
                "phrases" (its unsupported words) or "sentence" (all of it).
            phrase_gap: stopwords an unsupported phrase may bridge (chosen on dev with the span mode).
            answer_calibration: sentence P(unsupported) -> answer scale (identity by default).
            narrower: the token model for span_mode "words".
            fallback_languages: answer languages handed to the heuristic.
        """
        if span_mode not in ("words", "phrases", "sentence"):
            raise ValueError(f"span_mode {span_mode!r}: choose 'words', 'phrases' or 'sentence'")
        if span_mode == "words" and narrower is None:
            raise ValueError("span_mode 'words' needs a narrower (manifest training.narrower)")
        self.answer_calibration, self.narrower = answer_calibration, narrower
        self.scorer, self.combiner = scorer, combiner
        self.threshold, self.span_mode, self.phrase_gap = float(threshold), span_mode, int(phrase_gap)
        self.task_thresholds = dict(task_thresholds or {})
        self.fallback = HeuristicFactSpans()
        self.fallback_languages = set(fallback_languages)
        self.info = info or ValidatorInfo("fact_spans", "onnx", "candidate")

    @classmethod
    def from_folder(cls, folder: str | Path, manifest: Manifest, *, threads: int | None = None,
                    model_path: str | Path | None = None, batch_size: int = DEFAULT_BATCH) -> "GroundingFactSpans":
        """The shipped model folder; `model_path` swaps in another cross-encoder graph (fp32)."""
        folder = Path(folder)
        if "combiner_file" not in manifest.training:
            raise ValueError(f"{folder}: manifest training.combiner_file is missing; re-export the fact-span model")
        scorer = PairScorer(model_path or folder / manifest.model_file, folder / manifest.tokenizer_file,
                            max_length=manifest.window.max_length, batch_size=batch_size, threads=threads)
        return cls.from_parts(folder, scorer, manifest.thresholds, manifest.training, threads=threads,
                              fallback_languages=manifest.fallback_languages,
                              info=ValidatorInfo("fact_spans", "onnx", manifest.version, manifest.model_sha256))

    @classmethod
    def from_parts(cls, folder: str | Path, scorer: PairScorer | None, thresholds: dict[str, float],
                   training: dict, *, threads: int | None = None, fallback_languages: Sequence[str] = (),
                   info: ValidatorInfo | None = None) -> "GroundingFactSpans":
        """A combiner's files in `folder` with its settings: `thresholds` ("hallucination" and
        "hallucination/<task>") and `training` (combiner_file, span_mode, phrase_gap, narrower,
        answer_calibration), as a manifest or a combiner fit (`training.grounding`) holds them."""
        folder = Path(folder)
        per_task = {key.split("/", 1)[1]: value for key, value in thresholds.items()
                    if key.startswith(THRESHOLD_KEY + "/")}
        narrower = None
        if training.get("narrower"):
            spec = training["narrower"]
            narrower = Narrower(folder / spec["file"], cut=spec["cut"], gap=spec["gap"],
                                task_cuts=spec.get("task_cuts"), threads=threads)
        return cls(scorer, Combiner(folder / training["combiner_file"], threads=threads),
                   threshold=thresholds.get(THRESHOLD_KEY, 0.5), task_thresholds=per_task,
                   span_mode=training.get("span_mode", "phrases"), phrase_gap=training.get("phrase_gap", 1),
                   answer_calibration=AnswerCalibration(**training.get("answer_calibration", {})), narrower=narrower,
                   fallback_languages=fallback_languages, info=info)

    def signals(self, cases: Sequence[Case]) -> list[tuple[ContextIndex, list[SentenceSignals]]]:
        """Per case its context index and its sentences' features, cross-encoder score filled in."""
        indexes = [ContextIndex.build(c.context_text) for c in cases]
        per_case = [sentence_signals(c.answer, index) for c, index in zip(cases, indexes)]
        claims = [s for signals in per_case for s in signals if not s.is_noise]
        if self.scorer is not None:
            nli = self.scorer.scores([(s.evidence, s.sentence.text) for s in claims])
            for signal, score in zip(claims, nli):
                signal.features[NLI_FEATURE] = score
        return list(zip(indexes, per_case))

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        outputs: list[FactSpansOutput | None] = [None] * len(cases)
        modelled = []
        for index, case in enumerate(cases):
            if not case.context_text.strip() or not case.answer.strip():
                outputs[index] = FactSpansOutput(applies=False, source="onnx")
            elif language_of(case.answer) in self.fallback_languages:
                outputs[index] = self.fallback.predict([case])[0]
            else:
                modelled.append(index)
        per_case = self.signals([cases[i] for i in modelled])
        features = [s.features for _, signals in per_case for s in signals if not s.is_noise]
        unsupported = self.combiner.unsupported(np.stack(features)) if features else np.zeros(0)
        position = 0
        for index, (context, signals) in zip(modelled, per_case):
            n = sum(1 for s in signals if not s.is_noise)
            outputs[index] = self._output(cases[index], context, signals, unsupported[position:position + n])
            position += n
        return outputs  # type: ignore[return-value]

    def threshold_for(self, case: Case) -> float:
        return self.task_thresholds.get(self._task(case), self.threshold)

    @staticmethod
    def _task(case: Case) -> str:
        return task_of_case(case)

    def _output(self, case: Case, context: ContextIndex, signals: list[SentenceSignals],
                unsupported: np.ndarray) -> FactSpansOutput:
        task = self._task(case)
        threshold = self.task_thresholds.get(task, self.threshold)
        scores = self.answer_calibration.scores(unsupported)
        narrowed = None
        if self.span_mode == "words":
            claims = [s for s in signals if not s.is_noise]
            narrowed = self.narrower.ranges(context, [(i, claims[i], float(unsupported[i]))
                                                      for i in np.flatnonzero(scores >= threshold)], task)
        spans = sentence_spans(case.answer, signals, scores, threshold, self.span_mode, self.phrase_gap, narrowed)
        claim_chars = sum(s.sentence.end - s.sentence.start for s in signals if not s.is_noise)
        fact_chars = sum(sp.end - sp.start for sp in spans if sp.label is SpanLabel.FACT)
        worst = float(scores.max()) if len(scores) else 0.0
        facts_text = " ".join(sp.text for sp in spans if sp.label is SpanLabel.FACT)
        return FactSpansOutput(
            applies=True, hallucinated=bool(len(scores)) and worst >= threshold,
            hallucination_score=calibrate(worst, threshold),
            precision=fact_chars / claim_chars if claim_chars else 1.0,
            recall=heuristics.recall_of_facts(content_stems(facts_text), context.fact_stems), spans=tuple(spans),
            source="onnx", notes=_notes(context))


def _notes(context: ContextIndex) -> tuple[str, ...]:
    if not context.truncated_chunks:
        return ()
    return (f"context cut to its first {len(context.chunks)} chunks of at most {CHUNK_WORDS} words: the answer was not "
            f"compared with the remaining {context.truncated_chunks}",)


@register_onnx_validator(TASK)
def _grounding_fact_spans(folder: Path, manifest: Manifest, *, threads: int | None = None) -> GroundingFactSpans:
    return GroundingFactSpans.from_folder(folder, manifest, threads=threads)
