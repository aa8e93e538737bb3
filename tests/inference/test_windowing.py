"""Context windowing: the answer is never cut, windows overlap by `stride`, aggregation and spans."""

from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from autovalidators.inference.results import SpanLabel
from autovalidators.inference.windowing import (AnswerTooLongError, aggregate_windows, build_windows,
                                                merge_spans, pad_batch)

LABELS = ("FACT", "NOISE", "HALLUCINATION")
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    # Word-level vocabulary: one token per word, so token counts in the tests are exact.
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator([" ".join(WORDS) + " . ,"], trainer=trainer)
    return tok


def words(n: int, offset: int = 0) -> str:
    return " ".join(WORDS[(i + offset) % len(WORDS)] for i in range(n))


def test_short_context_is_one_window_with_the_layout(tokenizer):
    plan = build_windows(tokenizer, "alpha beta", words(10), "gamma delta.", max_length=64, stride=8,
                         min_context_tokens=4)
    assert len(plan.windows) == 1
    window = plan.windows[0]
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    answer_ids = tokenizer.encode("gamma delta.", add_special_tokens=False).ids
    assert window.input_ids[0] == cls and window.input_ids[-1] == sep
    assert window.input_ids[plan.answer_slice(0)] == answer_ids
    assert window.input_ids[window.answer_start - 1] == sep
    assert window.token_type_ids == [0] * window.answer_start + [1] * (len(answer_ids) + 1)
    assert window.context_tokens == (0, 10)


def test_long_context_windows_overlap_by_stride_and_keep_the_whole_answer(tokenizer):
    context, answer = words(300), words(20, offset=3)
    answer_ids = tokenizer.encode(answer, add_special_tokens=False).ids
    plan = build_windows(tokenizer, "pi rho", context, answer, max_length=64, stride=10, min_context_tokens=8)
    assert len(plan.windows) > 5
    for i, window in enumerate(plan.windows):
        assert len(window.input_ids) <= 64
        assert window.input_ids[plan.answer_slice(i)] == answer_ids
    spans = [w.context_tokens for w in plan.windows]
    assert spans[0][0] == 0 and spans[-1][1] == 300
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end - start == 10  # consecutive windows share exactly `stride` context tokens


def test_answer_near_the_limit_fits_and_one_token_more_is_a_clear_error(tokenizer):
    # 64 = 4 specials + 2 question + 8 context (the minimum) + 50 answer tokens
    plan = build_windows(tokenizer, "pi rho", words(40), words(50), max_length=64, stride=2, min_context_tokens=8)
    assert len(plan.windows[0].input_ids) == 64 and all(len(w.input_ids) <= 64 for w in plan.windows)
    assert plan.n_answer_tokens == 50
    with pytest.raises(AnswerTooLongError, match="51 tokens"):
        build_windows(tokenizer, "pi rho", words(40), words(51), max_length=64, stride=2, min_context_tokens=8)


def test_answer_longer_than_the_window_is_an_error_not_a_truncation(tokenizer):
    with pytest.raises(AnswerTooLongError, match="shorten the answer"):
        build_windows(tokenizer, "q", words(5), words(200), max_length=64)


def test_long_question_is_cut_and_empty_context_gives_one_window(tokenizer):
    plan = build_windows(tokenizer, words(100), "", "alpha.", max_length=64, max_question_tokens=5,
                         min_context_tokens=4)
    assert len(plan.windows) == 1
    assert plan.windows[0].answer_start == 1 + 5 + 1 + 0 + 1


def test_stride_is_capped_at_half_the_room_so_windows_advance(tokenizer):
    # room = 32 - 4 specials - 1 question - 1 answer = 26 context tokens; stride 30 becomes 13.
    plan = build_windows(tokenizer, "q", words(200), "alpha", max_length=32, stride=30, min_context_tokens=4)
    spans = [w.context_tokens for w in plan.windows]
    assert spans[-1][1] == 200
    assert all(end - start == 13 for (_, end), (start, _) in zip(spans, spans[1:]))


def test_aggregation_takes_the_best_supporting_window_and_renormalises():
    a = np.array([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8]])
    b = np.array([[0.2, 0.2, 0.6], [0.7, 0.1, 0.2]])
    out = aggregate_windows([a, b], LABELS)
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    np.testing.assert_allclose(out[:, 0], [0.9, 0.7])  # FACT if any window supports it
    # The rest keeps the mean NOISE:HALLUCINATION ratio: token 0 means 0.125 : 0.325.
    np.testing.assert_allclose(out[0, 1] / out[0, 2], 0.125 / 0.325)
    np.testing.assert_allclose(aggregate_windows([a], LABELS), a)
    certain = aggregate_windows([np.array([[1.0, 0.0, 0.0]])], LABELS)
    np.testing.assert_allclose(certain, [[1.0, 0.0, 0.0]])
    with pytest.raises(ValueError):
        aggregate_windows([np.ones((2, 2))], LABELS)


def test_merge_spans_gives_char_offsets_into_the_answer(tokenizer):
    answer = "Alpha beta, gamma delta epsilon."
    plan = build_windows(tokenizer, "q", "zeta", answer, max_length=64, min_context_tokens=1)
    tokens = tokenizer.encode(answer, add_special_tokens=False).tokens
    assert tokens == ["alpha", "beta", ",", "gamma", "delta", "epsilon", "."]
    probs = np.array([[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.7, 0.2, 0.1],
                      [0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.2, 0.1, 0.7], [0.8, 0.1, 0.1]])
    spans = merge_spans(answer, plan, probs, LABELS)
    assert [(s.label, s.text) for s in spans] == [
        (SpanLabel.NOISE, "Alpha beta"), (SpanLabel.FACT, ", gamma"),
        (SpanLabel.HALLUCINATION, "delta epsilon"), (SpanLabel.FACT, ".")]
    assert all(answer[s.start:s.end] == s.text for s in spans)
    assert spans[2].score == pytest.approx(0.75)
    with pytest.raises(ValueError, match="shape"):
        merge_spans(answer, plan, probs[:3], LABELS)


def test_pad_batch_pads_right_with_zero_attention(tokenizer):
    short = build_windows(tokenizer, "q", "alpha", "beta", max_length=64, min_context_tokens=1).windows[0]
    long = build_windows(tokenizer, "q", words(20), "beta", max_length=64, min_context_tokens=1).windows[0]
    batch = pad_batch([short, long])
    assert batch["input_ids"].shape == (2, len(long.input_ids))
    assert batch["attention_mask"][0].sum() == len(short.input_ids)
    assert batch["input_ids"].dtype == np.int64


def test_tokenizer_truncation_setting_is_ignored_and_left_unchanged(tokenizer):
    truncating = Tokenizer.from_str(tokenizer.to_str())
    truncating.enable_truncation(max_length=8)
    plan = build_windows(truncating, "q", words(100), words(20), max_length=64, stride=4, min_context_tokens=8)
    assert plan.n_answer_tokens == 20
    assert plan.windows[-1].context_tokens[1] == 100
    assert truncating.truncation["max_length"] == 8  # the caller's tokenizer is not modified


def test_a_loaded_tokenizer_has_truncation_and_padding_off_in_itself(tokenizer, tmp_path):
    """The validators load their tokenizer this way: one object, nothing cut, no second copy kept."""
    from autovalidators.inference import windowing

    truncating = Tokenizer.from_str(tokenizer.to_str())
    truncating.enable_truncation(max_length=8)
    truncating.enable_padding(length=12)
    path = tmp_path / "tokenizer.json"
    truncating.save(str(path))
    cached = len(windowing._PLAIN)
    loaded = windowing.load_plain_tokenizer(path)
    assert loaded.truncation is None and loaded.padding is None
    assert len(loaded.encode(words(100)).ids) == 100
    assert windowing.plain_tokenizer(loaded) is loaded and len(windowing._PLAIN) == cached
    text = words(40) + " , " + words(30, offset=5)
    assert loaded.encode(text).ids == windowing.plain_tokenizer(truncating).encode(text).ids  # the same tokens


def test_stress_marks_and_invisible_characters_are_not_spelling_to_the_shipped_tokenizers_and_offsets_hold():
    from pathlib import Path

    from autovalidators.inference.text import plain_spelling
    from autovalidators.inference.windowing import with_plain_spelling, load_plain_tokenizer

    assert plain_spelling("Хуа́н Э́во") == "Хуан Эво"
    assert plain_spelling("cafe\u0301") == "café"            # composed: é keeps its accent
    assert plain_spelling("и\u0306") == "й"                  # a decomposed й stays a letter
    assert plain_spelling("инфор\u00adма\u200bция\ufeff") == "информация"   # soft hyphen, zero-width
    models_dir = Path(__file__).resolve().parents[2] / "models"
    files = sorted(models_dir.glob("*/tokenizer.json"))
    assert files, "no shipped tokenizer"
    for file in files:
        tokenizer = load_plain_tokenizer(file)
        stressed, plain = "Хуа́н Мора́лес, cafe\u0301 и\u0306 инфор\u00adма\u200dция", "Хуан Моралес, café й информация"
        encoded = tokenizer.encode(stressed, add_special_tokens=False)
        assert encoded.ids == tokenizer.encode(plain, add_special_tokens=False).ids, file
        # The word's last token ends after "Хуа́н" (5 characters with its mark) in the original text.
        assert encoded.offsets[0][0] == 0 and 5 in [end for _, end in encoded.offsets], file
        # Loading twice, or a training run's saved tokenizer, does not stack the normalizer.
        before = tokenizer.normalizer.__getstate__()
        assert with_plain_spelling(tokenizer).normalizer.__getstate__() == before
    # Untouched by a file that does not name a stress mark: the file's own tokenizer splits the word.
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(models_dir / "tone" / "tokenizer.json"))
    assert raw.encode("Хуа́н").ids != raw.encode("Хуан").ids
