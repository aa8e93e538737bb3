"""The atomic-QA triples builder on tiny SQuAD-format files, and the shipped sample's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autovalidators.data_prep.atomic_qa import SOURCES, SourceFile, build_atomic_qa, read_squad_triples
from autovalidators.data_prep.io import DataError
from autovalidators.inference.cli import app
from autovalidators.inference.evaluation.atomic_qa import read_triples

import autovalidators.inference.evaluation.atomic_qa_cli  # noqa: F401  (registers the commands)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_prep" / "samples" / "atomic_qa" / "atomic_qa_triples.jsonl"


def squad(language: str, paragraphs: int = 3, questions: int = 2) -> dict:
    """A parallel SQuAD-format file: the same question ids in every language."""
    data = []
    for p in range(paragraphs):
        qas = [{"id": f"q{p}-{q}", "question": f"{language} question {p}.{q}?",
                "answers": [{"text": f"answer {p}", "answer_start": 0}, {"text": f"answer {p}", "answer_start": 0}]}
               for q in range(questions)]
        qas.append({"id": f"q{p}-none", "question": "unanswerable?", "answers": [], "is_impossible": True})
        data.append({"title": f"t{p}", "paragraphs": [{"context": f"\ufeffanswer {p} is here.", "qas": qas}]})
    return {"version": "1.1", "data": data}


@pytest.fixture()
def datasets(tmp_path) -> tuple[Path, tuple[SourceFile, ...]]:
    """A datasets folder laid out like the shared one, each file a tiny parallel SQuAD set."""
    folder = tmp_path / "datasets"
    for spec in SOURCES:
        (folder / spec.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / spec.path).write_text(json.dumps(squad(spec.language)), encoding="utf-8")
    return folder, tuple(s for s in SOURCES if s.source == "xquad")


def test_reader_skips_unanswerable_dedupes_answers_and_strips_bom(datasets):
    folder, _ = datasets
    rows = list(read_squad_triples(folder / SOURCES[0].path, source="xquad", language="en"))
    assert len(rows) == 6
    assert rows[0]["id"] == "xquad-en-q0-0" and rows[0]["answers"] == ["answer 0"]
    assert rows[0]["context"] == "answer 0 is here."


def test_sampling_is_deterministic_parallel_and_one_per_paragraph(datasets):
    folder, sources = datasets
    first = build_atomic_qa(folder, per_source=2, max_per_context=1, seed=13, sources=sources)
    assert first == build_atomic_qa(folder, per_source=2, max_per_context=1, seed=13, sources=sources)
    en = [t["id"].split("-", 2)[2] for t in first if t["language"] == "en"]
    ru = [t["id"].split("-", 2)[2] for t in first if t["language"] == "ru"]
    assert en == ru and len(en) == 2
    assert len({qid.split("-")[0] for qid in en}) == 2  # two different paragraphs
    assert set(first[0]) == {"id", "context", "question", "answers", "language", "source"}
    everything = build_atomic_qa(folder, per_source=None, max_per_context=5, seed=13, sources=sources)
    assert len(everything) == 12


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        build_atomic_qa(tmp_path, sources=(SourceFile("xquad", "en", "absent.json", "x"),))


def test_cli_writes_triples_and_data_card(datasets, tmp_path):
    folder, _ = datasets
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["prepare", "atomic-qa", "--datasets-dir", str(folder), "--output-dir", str(out),
                                      "--per-source", "2"])
    assert result.exit_code == 0, result.output
    triples, errors = read_triples(out / "atomic_qa_triples.jsonl")
    assert len(triples) == 8 and not errors
    card = json.loads((out / "data_card.json").read_text())
    assert card["splits"]["benchmark"]["language"] == {"en": 4, "ru": 4}
    assert card["splits"]["benchmark"]["source"] == {"tydiqa_goldp": 4, "xquad": 4}
    result = CliRunner().invoke(app, ["prepare", "atomic-qa", "--datasets-dir", str(tmp_path / "nowhere"),
                                      "--output-dir", str(out)])
    assert result.exit_code == 2 and "no such file" in result.output


def test_shipped_sample_is_valid_balanced_and_attributed():
    triples, errors = read_triples(SAMPLE)
    assert not errors
    assert 200 <= len(triples) <= 300
    counts: dict[tuple[str, str], int] = {}
    for t in triples:
        counts[(t.source, t.language)] = counts.get((t.source, t.language), 0) + 1
        assert t.answers and all(a.strip() for a in t.answers)
        assert any(a in t.context for a in t.answers)  # extractive: every item answerable from its context
    assert set(counts) == {("xquad", "en"), ("xquad", "ru"), ("tydiqa_goldp", "en"), ("tydiqa_goldp", "ru")}
    readme = (SAMPLE.parent / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and "Apache" in readme
