"""Tokenising from many threads at once gives the same stems as one thread (the server's pool)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from autovalidators.inference.text import tokenize

TEXTS = [
    "The warranty covers manufacturing defects for two years after purchase.",
    "Гарантия распространяется на производственные дефекты в течение двух лет.",
    "Administrators reorganised the departments responsible for international shipping.",
    "Пользователи сообщили о проблемах с подключением к беспроводной сети.",
] * 50


def _stems(text: str) -> list[str]:
    return [token.stem for token in tokenize(text)]


def test_stems_are_the_same_from_many_threads() -> None:
    expected = [_stems(text) for text in TEXTS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(_stems, TEXTS)) == expected
