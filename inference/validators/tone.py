"""ToneValidator: the trained multi-label tone classifier on onnxruntime (no torch, no transformers).

What is scored: the case's answer (the text a user would read). Each text becomes one or more
windows `[CLS] piece [SEP]` of at most the manifest's `window.max_length` tokens; consecutive
windows share `window.stride` tokens, so a phrase cut by one window border is whole in the next.
Nothing is truncated: a long text gets as many windows as it needs.

Aggregation (`window.aggregation: max`): a label's probability for the text is the maximum over its
windows; one insulting sentence in a long, polite answer is enough to flag it. A text that fits in
one window is scored exactly as in training (`[CLS] text [SEP]`).

`flagged`: labels whose probability reaches their per-label threshold from the manifest (chosen on
dev at export); the gate reads `scores`, `flagged` and `thresholds`. A language with its own
thresholds (manifest `thresholds_by_language`, the language from `text.language_of`) is cut at
those, and its outputs carry them: scores stay the model's own probabilities.

Languages the encoder cannot read (manifest `fallback_languages`, e.g. `ru` for the English MiniLM,
whose vocabulary spells Cyrillic out letter by letter) go to the lexicon heuristic instead; their
outputs say `source="heuristic"`. `autovalidators benchmark tone` scores that language both ways, so
the choice is measured, not assumed.

Labels defined by their words (manifest `lexicon_required`: Russian `obscenity`, мат, a closed set
of roots) stand, in the languages listed, only where the lexicon matches: the encoder's piece "▁ху"
fires on loanwords such as Хуан or хунхузы. Without a match the score is capped just below its cut.

Labels the training data could not teach (manifest `lexicon_labels`: `threat`, with 2 positives in
the tone data) take the lexicon's word as well: a match raises the label, and `toxicity`, the
umbrella, to its threshold. The model's own score still counts when it is higher.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..case import Case
from ..manifest import Manifest
from ..onnx_session import OnnxSession
from ..results import ToneOutput
from ..text import language_of
from ..windowing import load_plain_tokenizer, special_token_id
from .base import ValidatorInfo
from .heuristic import HeuristicTone, normalize_for_lexicon, tone_lexicon
from .pair_scorer import DEFAULT_BATCH

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class TextWindows:
    """The windows of one text, as token id lists with [CLS]/[SEP] added."""

    windows: list[list[int]]
    n_tokens: int  # content tokens of the whole text (without special tokens)


def split_windows(ids: Sequence[int], max_length: int, stride: int, cls_id: int, sep_id: int) -> list[list[int]]:
    """`[CLS] ids[a:b] [SEP]` windows of at most `max_length` covering every id; consecutive windows
    share `stride` ids. An empty text is one window `[CLS] [SEP]`."""
    room = max_length - 2
    if room <= stride:
        raise ValueError(f"window stride {stride} must be below the {room} content tokens of a window")
    starts = [0]
    while starts[-1] + room < len(ids):
        starts.append(starts[-1] + room - stride)
    return [[cls_id, *ids[start:start + room], sep_id] for start in starts]


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def on_default_scale(scores: np.ndarray, languages: Sequence[str], labels: Sequence[str],
                     thresholds: dict[str, float], by_language: dict[str, dict[str, float]]) -> np.ndarray:
    """(n, n_labels) `scores` with each row of a language in `by_language` shifted in logit space by
    logit(default cut) - logit(its language's cut), per label: order within a language is kept and
    `shifted >= thresholds[label]` holds exactly where `score >= by_language[language][label]`
    (a score rounded across the cut is clamped back to its side)."""
    out = np.array(scores, dtype=np.float64, copy=True)
    default = np.asarray([thresholds[label] for label in labels])
    for language, cuts in by_language.items():
        rows = [i for i, lang in enumerate(languages) if lang == language]
        if not rows:
            continue
        own = np.asarray([cuts.get(label, thresholds[label]) for label in labels])
        shift = _logit(default) - _logit(own)
        original = out[rows]
        shifted = 1.0 / (1.0 + np.exp(-(_logit(original) + shift)))
        above = original >= own
        shifted = np.where(above, np.maximum(shifted, default), np.minimum(shifted, np.nextafter(default, -np.inf)))
        # Where the language's cut is the default one, leave the score exactly as it was.
        out[rows] = np.where(shift == 0.0, original, shifted)
    return out


class ToneValidator:
    """Multi-label tone scoring, batch in, list out. Each window runs as its own unpadded call by
    default (dynamic int8 scales activations per call), so a text's scores do not depend on its
    batch-mates, order or thread count (`tests/inference/test_determinism.py`)."""

    def __init__(self, folder: str | Path, manifest: Manifest, *, batch_size: int = DEFAULT_BATCH,
                 threads: int | None = None,
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
        if not manifest.labels:
            raise ValueError(f"{folder}: manifest has no labels")
        self.manifest = manifest
        self.labels = tuple(manifest.labels)
        self.thresholds = {label: float(manifest.thresholds.get(label, 0.5)) for label in self.labels}
        unknown = sorted({label for cuts in manifest.thresholds_by_language.values() for label in cuts}
                         - set(self.labels))
        if unknown:
            raise ValueError(f"{folder}: manifest thresholds_by_language names {unknown}, not among its labels "
                             f"{list(self.labels)}")
        # Every language's full set of cuts: its own where it has them, the default ones elsewhere.
        self.thresholds_by_language = {language: {**self.thresholds, **{k: float(v) for k, v in cuts.items()}}
                                       for language, cuts in manifest.thresholds_by_language.items()}
        self.max_length = manifest.window.max_length
        self.stride = manifest.window.stride
        if manifest.window.aggregation != "max":
            raise ValueError(f"{folder}: window aggregation {manifest.window.aggregation!r}; this validator "
                             "implements 'max'")
        if self.stride >= self.max_length - 2:
            raise ValueError(f"{folder}: window stride {self.stride} must be below the {self.max_length - 2} "
                             "content tokens of a window")
        self.batch_size = batch_size
        # Truncation off: the windows below decide where texts are cut.
        self.tokenizer = load_plain_tokenizer(folder / manifest.tokenizer_file)
        self.cls_id = special_token_id(self.tokenizer, ("[CLS]", "<s>"))
        self.sep_id = special_token_id(self.tokenizer, ("[SEP]", "</s>"))
        self.session = OnnxSession(model_path or folder / manifest.model_file, threads=threads)
        self.info = ValidatorInfo("tone", "onnx", manifest.version, manifest.model_sha256)
        self.fallback_languages = frozenset(manifest.fallback_languages)
        unknown = sorted(set(manifest.lexicon_labels) - set(self.labels))
        if unknown:
            raise ValueError(f"{folder}: manifest lexicon_labels {unknown} are not among its labels {list(self.labels)}")
        self.lexicon_labels = tuple(manifest.lexicon_labels)
        # A match raises the label and the toxicity umbrella: the columns it raises per lexicon label
        # (to the text's own thresholds).
        self._lexicon_raises = {label: [self.labels.index(name) for name in dict.fromkeys((label, "toxicity"))
                                        if name in self.labels]
                                for label in self.lexicon_labels}
        unknown = sorted(set(manifest.lexicon_required) - set(self.labels))
        if unknown:
            raise ValueError(f"{folder}: manifest lexicon_required {unknown} are not among its labels {list(self.labels)}")
        # A required label the lexicon has no words for would be switched off in its languages.
        wordless = sorted(set(manifest.lexicon_required) - set(tone_lexicon()))
        if wordless:
            raise ValueError(f"{folder}: manifest lexicon_required {wordless} have no words in the tone lexicon "
                             f"(inference/lexicons/tone.txt), so they could never stand")
        # label column -> languages where it stands only on a lexicon match
        self._lexicon_required = {self.labels.index(label): frozenset(languages)
                                  for label, languages in manifest.lexicon_required.items()}
        self.fallback = HeuristicTone() if self.fallback_languages else None

    def windows(self, texts: Sequence[str]) -> list[TextWindows]:
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False) if texts else []
        return [TextWindows(split_windows(e.ids, self.max_length, self.stride, self.cls_id, self.sep_id), len(e.ids))
                for e in encodings]

    def window_probabilities(self, windows: Sequence[list[int]]) -> np.ndarray:
        """(n_windows, n_labels) sigmoid probabilities; `batch_size` windows per call (default one)."""
        result = np.zeros((len(windows), len(self.labels)), dtype=np.float64)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = max(len(windows[i]) for i in chunk)
            feed = {name: np.zeros((len(chunk), width), dtype=np.int64) for name in INPUT_NAMES}
            for row, index in enumerate(chunk):
                n = len(windows[index])
                feed["input_ids"][row, :n] = windows[index]
                feed["attention_mask"][row, :n] = 1
            logits = self.session.run(feed)["logits"].astype(np.float64)
            result[chunk] = 1.0 / (1.0 + np.exp(-logits))
        return result

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """(n_texts, n_labels) probabilities, max over each text's windows, in input order."""
        per_text = self.windows(texts)
        flat = [w for t in per_text for w in t.windows]
        probabilities = self.window_probabilities(flat) if flat else np.zeros((0, len(self.labels)))
        out = np.zeros((len(per_text), len(self.labels)), dtype=np.float64)
        start = 0
        for index, text in enumerate(per_text):
            out[index] = probabilities[start:start + len(text.windows)].max(axis=0)
            start += len(text.windows)
        return out

    def thresholds_for(self, text: str) -> dict[str, float]:
        """The cuts `text` is judged by: its language's (`thresholds_by_language`), else the default."""
        if not self.thresholds_by_language:
            return self.thresholds
        return self.thresholds_by_language.get(language_of(text), self.thresholds)

    def with_lexicon(self, texts: Sequence[str], scores: np.ndarray,
                     thresholds: dict[str, float] | None = None) -> np.ndarray:
        """`scores` with each `lexicon_labels` match (and toxicity) raised to the text's threshold,
        or to `thresholds` (scores already on the default scale), and each `lexicon_required` label
        without a match in a language that requires one capped just below it."""
        if not self.lexicon_labels and not self._lexicon_required:
            return scores
        patterns = tone_lexicon()
        raised = scores.copy()
        for row, text in enumerate(texts):
            normal = normalize_for_lexicon(text)
            cuts = thresholds or self.thresholds_for(text)
            for label, columns in self._lexicon_raises.items():
                if label in patterns and patterns[label].search(normal):
                    for column in columns:
                        raised[row, column] = max(raised[row, column], cuts[self.labels[column]])
            if self._lexicon_required:
                language = language_of(text)
                for column, languages in self._lexicon_required.items():
                    label = self.labels[column]
                    if language in languages and not patterns[label].search(normal):
                        raised[row, column] = min(raised[row, column], float(np.nextafter(cuts[label], -np.inf)))
        return raised

    def onto_default_scale(self, texts: Sequence[str], scores: np.ndarray) -> np.ndarray:
        """`scores` of texts with their own language's thresholds moved by a logit shift so that
        their language's cut lands on the default one: `>= self.thresholds` then reads every row
        as `predict` flags it (the benchmarks score mixed-language sets this way)."""
        if not self.thresholds_by_language:
            return scores
        return on_default_scale(scores, [language_of(t) for t in texts], self.labels, self.thresholds,
                                self.thresholds_by_language)

    def flagged(self, scores: np.ndarray, thresholds: dict[str, float] | None = None) -> tuple[str, ...]:
        cuts = thresholds or self.thresholds
        return tuple(label for label, score in zip(self.labels, scores) if score >= cuts[label])

    def served_scores(self, texts: Sequence[str], model_scores: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Scores as `predict` serves them, on the model's threshold scale, and the routed mask.

        Texts routed to the heuristic get its scores shifted so that its threshold lands on the
        label's manifest threshold (clipped to [0, 1]), and texts of a language with its own
        thresholds get a logit shift that does the same (`onto_default_scale`): one threshold per
        label then reads every row, which is what the benchmark needs to score a mixed-language
        set as served.
        `model_scores`: `scores(texts)` when the caller already has them (the benchmark also
        reports the model alone), so no text is scored twice.
        """
        routed = np.array([self.routed_to_fallback(t) for t in texts], dtype=bool)
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        modelled, fallback_rows = np.flatnonzero(~routed), np.flatnonzero(routed)
        if len(modelled):
            own = model_scores[modelled] if model_scores is not None else self.scores([texts[i] for i in modelled])
            kept = [texts[i] for i in modelled]
            out[modelled] = self.with_lexicon(kept, self.onto_default_scale(kept, own), self.thresholds)
        if len(fallback_rows):
            cases = [Case(id=str(i), question="", answer=texts[i]) for i in fallback_rows]
            for row, output in zip(fallback_rows, self.fallback.predict(cases)):
                for column, label in enumerate(self.labels):
                    shifted = output.scores.get(label, 0.0) - output.thresholds.get(label, 0.5) + self.thresholds[label]
                    out[row, column] = min(max(shifted, 0.0), 1.0)
        return out, routed

    def routed_to_fallback(self, text: str) -> bool:
        """True when `text` is in a language the manifest leaves to the heuristic."""
        return bool(self.fallback_languages) and language_of(text) in self.fallback_languages

    def predict(self, cases: Sequence[Case]) -> list[ToneOutput]:
        # An empty answer has no tone to judge: the check does not apply.
        judged = [i for i, c in enumerate(cases) if c.answer.strip()]
        routed = [i for i in judged if self.routed_to_fallback(cases[i].answer)]
        fallback = dict(zip(routed, self.fallback.predict([cases[i] for i in routed]))) if routed else {}
        modelled = [i for i in judged if i not in fallback]
        answers = [cases[i].answer for i in modelled]
        scores = self.with_lexicon(answers, self.scores(answers))
        by_case = dict(zip(modelled, scores))
        outputs = []
        for index in range(len(cases)):
            if index in fallback:
                outputs.append(fallback[index])
                continue
            if index not in by_case:
                outputs.append(ToneOutput(applies=False, source="onnx"))
                continue
            row, cuts = by_case[index], self.thresholds_for(cases[index].answer)
            outputs.append(ToneOutput(applies=True, scores={label: float(s) for label, s in zip(self.labels, row)},
                                      flagged=self.flagged(row, cuts), thresholds=dict(cuts), source="onnx"))
        return outputs
