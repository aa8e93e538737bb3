"""Encoder windows for (question, context, answer) when the context is longer than the model.

Layout of every window (BERT-style special tokens)::

    [CLS] question [SEP] context[a:b] [SEP] answer [SEP]      token_type_ids 0 ... 0 1 ... 1

The answer is never truncated: every window carries the whole answer, and only the context is cut
into windows of the room left, consecutive windows sharing `stride` context tokens (at most half
the room, so windows always advance when a long answer leaves little room). A question
longer than `max_question_tokens` is cut to that length. An answer that leaves fewer than
`min_context_tokens` tokens for context raises `AnswerTooLongError` (the caller decides: report the
case as not applicable, or split the answer).

Aggregation rule (`aggregate_windows`), per answer token: a token is supported if ANY window
supports it, so P(FACT) is the maximum over windows; the remaining mass 1 - P(FACT) is shared among
the other labels in proportion to their mean over windows. Tokens thus get one distribution that
sums to 1. With one window this is that window's distribution.

Spans (`merge_spans`): answer tokens are grouped into words (a word's pieces take the label with
the highest mean probability over the pieces), and consecutive words with the same label are
merged into one span with character offsets into the answer; its score is the mean probability of
its label over its tokens.

No torch here: this runs inside the onnxruntime validator and is reused by training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .results import Span, SpanLabel
from .text import NOT_SPELLING


class AnswerTooLongError(ValueError):
    """The answer (plus question and special tokens) does not leave room for any context."""


@dataclass(frozen=True)
class Window:
    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    answer_start: int  # position of the first answer token in `input_ids`
    context_tokens: tuple[int, int]  # [start, end) of the context tokens this window holds


@dataclass(frozen=True)
class WindowPlan:
    """Windows of one case plus what is needed to map answer tokens back to the answer text."""

    windows: list[Window]
    answer_offsets: list[tuple[int, int]]  # per answer token, character offsets into the answer
    answer_word_ids: list[int]  # per answer token, the index of its word

    @property
    def n_answer_tokens(self) -> int:
        return len(self.answer_offsets)

    def answer_slice(self, window: int) -> slice:
        """Where the answer tokens of window `window` sit in its input_ids."""
        start = self.windows[window].answer_start
        return slice(start, start + self.n_answer_tokens)


_PLAIN: dict[int, tuple[Any, Any]] = {}


def plain_tokenizer(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind `tokenizer`, with truncation and padding switched off.

    Shipped `tokenizer.json` files often carry `truncation` (MiniLM's: 128 tokens), which would
    silently cut contexts and answers before windowing. The user's object is not changed: a copy
    is made once and cached (keyed by identity; the original is kept alive so ids are not reused).
    """
    # A `transformers` fast tokenizer wraps a `tokenizers.Tokenizer`; both are accepted.
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if getattr(backend, "truncation", None) is None and getattr(backend, "padding", None) is None:
        return backend
    cached = _PLAIN.get(id(backend))
    if cached is None or cached[0] is not backend:
        copy = type(backend).from_str(backend.to_str())
        copy.no_truncation()
        copy.no_padding()
        cached = _PLAIN[id(backend)] = (backend, copy)
    return cached[1]


def load_plain_tokenizer(path: str | Path) -> Any:
    """A `tokenizers.Tokenizer` from `path` with truncation and padding switched off in place: what
    `plain_tokenizer` gives, without keeping the file's tokenizer alive beside a copy of it (a
    multilingual vocabulary is tens of MB each), reading plain spelling (`with_plain_spelling`)."""
    from tokenizers import Tokenizer

    tokenizer = with_plain_spelling(Tokenizer.from_file(str(path)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def with_plain_spelling(tokenizer: Any) -> Any:
    """`tokenizer` (a `tokenizers.Tokenizer`, changed in place) reading text as `text.plain_spelling`
    writes it: composed (NFC), stress marks and invisible characters (soft hyphen, zero-width space
    and joiners) dropped, then its own normalizer.

    Why: Russian encyclopaedias, and the answers that copy them, write "Хуа́н", "Сраже́ние", and web
    pages leave soft hyphens inside words. The multilingual encoders' tokenizer keeps such a
    character as a piece of its own, which cuts the word ("▁Ху" "а" "́" "н"), and their training texts
    hold almost none (76 of the 35,580 tone training texts have a stress mark), so the word read as
    other, rarer pieces: the shipped tone model flagged "Хуа́н Э́во Мора́лес" as toxic and not "Хуан Эво
    Моралес". Composing first keeps "é" and a decomposed "й" whole (the files' own normalizers do not
    compose). Offsets still point into the original text. Idempotent: a tokenizer that already does
    this (a training run's saved one) is returned as it is.
    """
    from tokenizers import Regex, normalizers

    current = tokenizer.normalizer
    if current is not None and NOT_SPELLING.encode("utf-8") in current.__getstate__():
        return tokenizer
    # Before the file's own normalizer: XLM-R's maps a zero-width joiner to a space of its own.
    steps = [normalizers.NFC(), normalizers.Replace(Regex(NOT_SPELLING), ""), *([current] if current is not None else [])]
    tokenizer.normalizer = normalizers.Sequence(steps)
    return tokenizer


def special_token_id(tokenizer: Any, names: Sequence[str]) -> int:
    """The id of the first of `names` (BERT or RoBERTa spelling) the tokenizer knows."""
    for name in names:
        token_id = tokenizer.token_to_id(name)
        if token_id is not None:
            return int(token_id)
    raise ValueError(f"tokenizer has none of the special tokens {list(names)}")


def build_windows(
    tokenizer: Any,
    question: str,
    context: str,
    answer: str,
    *,
    max_length: int = 512,
    stride: int = 128,
    max_question_tokens: int = 64,
    min_context_tokens: int = 32,
) -> WindowPlan:
    """Windows covering the whole context, each with the whole answer.

    Raises:
        AnswerTooLongError: the answer leaves fewer than `min_context_tokens` for context.
    """
    backend = plain_tokenizer(tokenizer)
    cls_id = special_token_id(backend, ("[CLS]", "<s>"))
    sep_id = special_token_id(backend, ("[SEP]", "</s>"))
    q_ids = backend.encode(question, add_special_tokens=False).ids[:max_question_tokens]
    c_ids = backend.encode(context, add_special_tokens=False).ids
    a_enc = backend.encode(answer, add_special_tokens=False)
    a_ids = a_enc.ids
    word_ids = [w if w is not None else i for i, w in enumerate(a_enc.word_ids)]
    room = max_length - 4 - len(q_ids) - len(a_ids)  # 4 = [CLS] + three [SEP]
    if room < min_context_tokens:
        raise AnswerTooLongError(
            f"answer of {len(a_ids)} tokens and question of {len(q_ids)} leave {room} tokens for context "
            f"in a {max_length}-token window (at least {min_context_tokens} needed); shorten the answer "
            "or split it into parts")
    # A long answer leaves little room; the overlap is capped at half of it so windows advance.
    stride = min(stride, room // 2)
    starts = [0]
    while starts[-1] + room < len(c_ids):
        starts.append(starts[-1] + room - stride)
    windows = []
    for start in starts:
        end = min(start + room, len(c_ids))
        first = [cls_id] + q_ids + [sep_id] + c_ids[start:end] + [sep_id]
        ids = first + a_ids + [sep_id]
        windows.append(Window(
            input_ids=ids,
            token_type_ids=[0] * len(first) + [1] * (len(a_ids) + 1),
            attention_mask=[1] * len(ids),
            answer_start=len(first),
            context_tokens=(start, end),
        ))
    return WindowPlan(windows, [tuple(o) for o in a_enc.offsets], word_ids)


def pad_batch(windows: Sequence[Window], pad_id: int = 0) -> dict[str, np.ndarray]:
    """Right-padded int64 arrays (input_ids, attention_mask, token_type_ids) for a model call."""
    width = max(len(w.input_ids) for w in windows)
    out = {name: np.full((len(windows), width), pad_id if name == "input_ids" else 0, dtype=np.int64)
           for name in ("input_ids", "attention_mask", "token_type_ids")}
    for row, w in enumerate(windows):
        out["input_ids"][row, :len(w.input_ids)] = w.input_ids
        out["attention_mask"][row, :len(w.input_ids)] = w.attention_mask
        out["token_type_ids"][row, :len(w.input_ids)] = w.token_type_ids
    return out


def aggregate_windows(window_probs: Sequence[np.ndarray], labels: Sequence[str], fact_label: str = "FACT") -> np.ndarray:
    """One distribution per answer token from per-window ones, by the rule in the module docstring.

    Args:
        window_probs: per window, (n_answer_tokens, n_labels) probabilities.
        labels: label names in column order; must include `fact_label`.
    Returns:
        (n_answer_tokens, n_labels) probabilities, rows summing to 1.
    """
    if not window_probs:
        raise ValueError("no windows to aggregate")
    stacked = np.stack([np.asarray(p, dtype=np.float64) for p in window_probs])  # (W, T, L)
    if stacked.shape[-1] != len(labels):
        raise ValueError(f"probabilities have {stacked.shape[-1]} columns for {len(labels)} labels")
    fact = list(labels).index(fact_label)
    p_fact = stacked[:, :, fact].max(axis=0)
    others = stacked.mean(axis=0)
    others[:, fact] = 0.0
    mass = others.sum(axis=1, keepdims=True)
    # Where no window gives any non-FACT mass, the rest is spread evenly rather than divided by 0.
    uniform = np.full_like(others, 1.0 / max(1, len(labels) - 1))
    uniform[:, fact] = 0.0
    shares = np.where(mass > 0, others / np.where(mass > 0, mass, 1.0), uniform)
    out = shares * (1.0 - p_fact)[:, None]
    out[:, fact] = p_fact
    return out


def merge_spans(answer: str, plan: WindowPlan, probs: np.ndarray, labels: Sequence[str]) -> list[Span]:
    """Answer character spans from per-token probabilities, by the rule in the module docstring."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape != (plan.n_answer_tokens, len(labels)):
        raise ValueError(f"expected probabilities of shape {(plan.n_answer_tokens, len(labels))}, got {probs.shape}")
    words: list[list[int]] = []
    for t, word in enumerate(plan.answer_word_ids):
        if words and plan.answer_word_ids[words[-1][-1]] == word:
            words[-1].append(t)
        else:
            words.append([t])
    spans: list[Span] = []
    current: tuple[int, int, int, list[float]] | None = None  # start, end, label, token scores
    for tokens in words:
        label = int(probs[tokens].mean(axis=0).argmax())
        start, end = plan.answer_offsets[tokens[0]][0], plan.answer_offsets[tokens[-1]][1]
        scores = [float(probs[t, label]) for t in tokens]
        if current and current[2] == label:
            current = (current[0], end, label, current[3] + scores)
        else:
            if current:
                spans.append(_span(answer, current, labels))
            current = (start, end, label, scores)
    if current:
        spans.append(_span(answer, current, labels))
    return spans


def _span(answer: str, current: tuple[int, int, int, list[float]], labels: Sequence[str]) -> Span:
    start, end, label, scores = current
    return Span(start=start, end=end, label=SpanLabel(labels[label]), score=float(np.mean(scores)),
                text=answer[start:end])
