"""Fixtures for the fact-span data tests: a tiny offline WordPiece tokenizer and reading items."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from autovalidators.data_prep.fact_spans.converters import ReadingItem
from autovalidators.data_prep.fact_spans.noise import CLOSERS, OPENERS
from autovalidators.data_prep.fact_spans.schema import Provenance

CONTEXTS = [
    ("en", "The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall, and it was designed "
           "by the engineer Gustave Eiffel. About 7 million people visit the tower every year.", "1889"),
    ("en", "The Amazon River flows through Brazil and Peru.[2] It carries more water than any other river; "
           "its basin covers 7,000,000 square kilometres. Explorer Francisco de Orellana reached it in "
           "February 1542.", "Brazil"),
    ("en", "Marie Curie won the Nobel Prize in Physics in 1903. She was born in Warsaw, and she later "
           "moved to Paris. Her laboratory had 12 researchers.", "Warsaw"),
    ("ru", "Московский метрополитен открыт в 1935 году. Он является одним из самых загруженных в мире, "
           "а его длина составляет 450 километров. Первую линию построили за 3 года.", "1935"),
    ("ru", "Озеро Байкал находится в Сибири. Его глубина составляет 1642 метра, и в нём живут нерпы. "
           "Учёный Иван Черский изучал озеро в марте 1877 года.", "Сибири"),
]


def reading_items() -> list[ReadingItem]:
    items = []
    for i, (language, context, answer) in enumerate(CONTEXTS):
        items.append(ReadingItem(
            id=f"item{i}", context=context, question=f"Question {i}?", answer=answer,
            answer_start=context.index(answer), language=language, source="fixture",
            provenance=Provenance(dataset="fixture", file="inline", row=str(i), licence="test"),
            group_keys=(f"ctx:{i}",)))
    return items


@pytest.fixture
def items() -> list[ReadingItem]:
    return reading_items()


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    """A WordPiece tokenizer trained in memory on the fixture texts (offline, deterministic)."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=600, show_progress=False,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    phrases = [p for table in (OPENERS, CLOSERS) for group in table.values() for p in group]
    tokenizer.train_from_iterator(([c for _, c, _ in CONTEXTS] + phrases) * 3, trainer=trainer)
    return tokenizer
