"""A tiny random BERT and WordPiece tokenizer built locally: for tests and smoke runs, offline.

`build_tiny_encoder(folder, words)` writes `config.json`, `model.safetensors` and `tokenizer.json`
into `folder`, which then works anywhere a base model path does (`train.base_model: <folder>`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def build_tokenizer(words: Iterable[str]):
    """A lower-casing WordPiece tokenizer over `words` plus single characters, BERT pair template."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab: dict[str, int] = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    characters = "abcdefghijklmnopqrstuvwxyz0123456789.,?!'-"
    for piece in [*characters, *(f"##{c}" for c in characters), *(w.lower() for w in words)]:
        vocab.setdefault(piece, len(vocab))
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tokenizer


def build_tiny_encoder(folder: str | Path, words: Iterable[str] = (), *, layers: int = 2, hidden: int = 32,
                       seed: int = 0) -> Path:
    """Writes a random 2-layer, 32-wide BERT with its tokenizer into `folder`; returns the folder."""
    import torch
    from transformers import BertConfig, BertModel

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(words)
    tokenizer.save(str(folder / "tokenizer.json"))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=hidden * 2, max_position_embeddings=128)
    BertModel(config).save_pretrained(str(folder), safe_serialization=True)
    return folder


QA_FACTS = (
    ("who wrote hamlet", "hamlet was written by shakespeare"),
    ("what is the capital of france", "paris is the capital of france"),
    ("how tall is everest", "everest is about 8849 metres tall"),
    ("when did the war end", "the war ended in 1945"),
    ("what do bees make", "bees make honey from nectar"),
    ("where is the nile", "the nile flows through egypt"),
    ("who painted the mona lisa", "leonardo painted the mona lisa"),
    ("what is water made of", "water is made of hydrogen and oxygen"),
)


def tiny_qa_records(repeats: int = 2) -> list[dict]:
    """Deterministic QA-relevance records: each question with its answer (1) and others' (0)."""
    records = []
    for r in range(repeats):
        for i, (question, answer) in enumerate(QA_FACTS):
            q = f"{question} {r}" if r else question
            records.append({"question": q, "answer": answer, "label": 1, "group": q, "source": "tiny", "language": "en"})
            other = QA_FACTS[(i + 1 + r) % len(QA_FACTS)][1]
            records.append({"question": q, "answer": other, "label": 0, "group": q, "source": "tiny", "language": "en"})
    return records


def tiny_words() -> list[str]:
    return sorted({w for pair in QA_FACTS for text in pair for w in text.split()})
