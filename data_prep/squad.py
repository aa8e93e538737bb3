"""The one reader of SQuAD-format files (XQuAD, TyDi GoldP, SQuAD2): every question in file order.

Texts are yielded exactly as stored (offsets stay valid); callers clean or filter as they need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .io import DataError


@dataclass(frozen=True)
class SquadQuestion:
    article: int  # index of the article in the file
    paragraph: int  # index of the paragraph in its article
    title: str
    context: str
    id: str
    question: str
    answers: list[dict[str, Any]] = field(default_factory=list)  # [{"text", "answer_start"}]
    plausible_answers: list[dict[str, Any]] = field(default_factory=list)  # SQuAD2 unanswerable
    is_impossible: bool = False


def iter_squad(path: str | Path) -> Iterator[SquadQuestion]:
    """Every question of a SQuAD-format file; raises DataError naming the file when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: not a SQuAD-format file (expected a top-level object with a 'data' list)")
    for article_index, article in enumerate(data["data"]):
        for paragraph_index, paragraph in enumerate(article.get("paragraphs", [])):
            context = paragraph.get("context", "")
            for qa in paragraph.get("qas", []):
                yield SquadQuestion(
                    article=article_index, paragraph=paragraph_index, title=article.get("title", ""),
                    context=context, id=str(qa.get("id", f"{article_index}:{paragraph_index}")),
                    question=str(qa.get("question", "")), answers=list(qa.get("answers") or []),
                    plausible_answers=list(qa.get("plausible_answers") or []),
                    is_impossible=bool(qa.get("is_impossible", False)),
                )
