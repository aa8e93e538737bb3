"""`prepare fact-spans` end to end on tiny files: held-out data stays out, groups never straddle
splits, output is deterministic, and the CLI reports bad configs by key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autovalidators.data_prep.fact_spans.build import prepare
from autovalidators.data_prep.fact_spans.config import FactSpansPrepConfig
from autovalidators.data_prep.io import read_jsonl

CITIES = ["Paris", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Lisbon", "Dublin", "Oslo", "Warsaw"]


def _context(i: int) -> tuple[str, str]:
    city = CITIES[i % len(CITIES)]
    year = 1800 + 7 * i
    return (f"The museum number {i} opened in {city} in {year}. It holds {100 + i} paintings, and it was "
            f"designed by Architect{i} Smith. About {i + 3} thousand people visit it every month."), str(year)


def _context_ru(i: int) -> tuple[str, str]:
    return (f"Музей номер {i} открыт в городе Казань в {1900 + i} году. В нём хранится {200 + i} картин, "
            f"а его здание построил архитектор Иванов{i}. Каждый месяц его посещают {i + 5} тысяч человек."), str(1900 + i)


@pytest.fixture
def sources(tmp_path) -> dict[str, Path]:
    squad_en = {"data": [{"title": "T", "paragraphs": [
        {"context": c, "qas": [{"id": f"en{i}", "question": "When did it open?",
                                "answers": [{"text": a, "answer_start": c.index(a)}]}]}
        for i, (c, a) in enumerate(_context(i) for i in range(30))]}]}
    squad_ru = {"data": [{"title": "T", "paragraphs": [
        {"context": c, "qas": [{"id": f"ru{i}", "question": "Когда открыт музей?",
                                "answers": [{"text": a, "answer_start": c.index(a)}]}]}
        for i, (c, a) in enumerate(_context_ru(i) for i in range(30))]}]}
    (tmp_path / "en.json").write_text(json.dumps(squad_en), encoding="utf-8")
    (tmp_path / "ru.json").write_text(json.dumps(squad_ru, ensure_ascii=False), encoding="utf-8")
    rows = []
    for i in range(12):
        reference, _ = _context(100 + i)
        task = ["Summary", "Data2txt", "QA"][i % 3]
        response = f"The museum opened in {CITIES[i % 10]}. It has a large cafe."
        start = response.index("It has a large cafe.")
        rows.append({"id": str(i), "source_id": f"s{i // 2}", "model": "m", "split": "test", "task_type": task,
                     "source": "x", "reference": "" if task == "QA" else reference, "response": response,
                     "quality": "good", "question": "q" if task == "QA" else None,
                     "labels": [{"start": start, "end": len(response), "text": response[start:],
                                 "label_type": "Evident Baseless Info"}]})
    (tmp_path / "rt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fb = tmp_path / "fb"
    fb.mkdir()
    shared_context, _ = _context(3)  # also a reading context: must be dropped from training
    samples = [{"sample_id": i, "source": shared_context if i == 0 else _context(200 + i)[0],
                "summary": "A museum opened.", "annotations": [], "metadata": {}} for i in range(4)]
    (fb / "batch_1.json").write_text(json.dumps({"samples": samples}))
    return {"en": tmp_path / "en.json", "ru": tmp_path / "ru.json", "rt": tmp_path / "rt.jsonl", "fb": fb}


def config_dict(sources: dict[str, Path]) -> dict:
    return {
        "seed": 3,
        "ragtruth": {"subset_path": str(sources["rt"]), "heldout_fraction": 0.5},
        "faithbench": {"path": str(sources["fb"])},
        "reading": [{"name": "xquad", "path": str(sources["en"]), "language": "en", "parallel": True},
                    {"name": "xquad", "path": str(sources["ru"]), "language": "ru", "parallel": True}],
        "synthesis": {"answers_per_context": 2, "counterfactual_rate": 0.5},
        "splits": {"train": 0.6, "dev": 0.2, "test": 0.2},
    }


def test_prepare_writes_splits_heldout_and_card_without_leaks(sources, tmp_path):
    out = tmp_path / "out"
    report = prepare(FactSpansPrepConfig.model_validate(config_dict(sources)), out)
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "heldout/ragtruth.jsonl", "heldout/faithbench.jsonl",
                 "data_card.json", "DATA_CARD.md"):
        assert (out / name).is_file(), name
    rows = {name: list(read_jsonl(out / f"{name}.jsonl")) for name in ("train", "dev", "test")}
    heldout = list(read_jsonl(out / "heldout/ragtruth.jsonl")) + list(read_jsonl(out / "heldout/faithbench.jsonl"))
    groups = {name: {r["group"] for r in rs} for name, rs in rows.items()}
    assert not groups["train"] & groups["dev"] and not groups["train"] & groups["test"] and not groups["dev"] & groups["test"]
    held_contexts = {r["context"] for r in heldout}
    trainable = [r for rs in rows.values() for r in rs]
    assert not held_contexts & {r["context"] for r in trainable}
    assert not {r["group"] for r in heldout} & {r["group"] for r in trainable}
    assert {r["id"] for r in heldout if r["source"] == "faithbench"} == {f"faithbench-batch_1-{i}" for i in range(4)}
    # Context-less RAGTruth QA rows are held out and flagged; half the usable source groups too.
    assert all(not r["grounding_usable"] for r in heldout if r["task_type"] == "QA" and r["source"] == "ragtruth")
    assert all(r["task_type"] != "QA" for r in trainable if r["source"] == "ragtruth")
    # Translations of one XQuAD paragraph share a split.
    for rs in rows.values():
        indices = {r["provenance"]["row"][2:] for r in rs if r["source"] == "xquad"}
        for other in rows.values():
            if other is not rs:
                assert not indices & {r["provenance"]["row"][2:] for r in other if r["source"] == "xquad"}
    card = json.loads((out / "data_card.json").read_text())
    assert card["splits"]["train"]["rows"] == len(rows["train"])
    assert set(card["splits"]["train"]["language"]) == {"en", "ru"}
    assert "heldout/faithbench" in card["splits"]
    assert any("HALLUCINATION" in note for note in card["notes"])
    assert report.errors == []


def test_prepare_is_deterministic(sources, tmp_path):
    config = FactSpansPrepConfig.model_validate(config_dict(sources))
    prepare(config, tmp_path / "a")
    prepare(config, tmp_path / "b")
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl", "heldout/ragtruth.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_cli_builds_data_and_names_bad_config_keys(sources, tmp_path):
    import autovalidators.data_prep.fact_spans.cli  # noqa: F401  registers the command
    from autovalidators.inference.cli import app

    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(config_dict(sources)))
    runner = CliRunner()
    result = runner.invoke(app, ["prepare", "fact-spans", "--config", str(good), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "train.jsonl").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**config_dict(sources), "synthesis": {"halucination_rate": 0.5}}))
    result = runner.invoke(app, ["prepare", "fact-spans", "--config", str(bad), "--out", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert "synthesis.halucination_rate" in result.output
    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump({**config_dict(sources), "faithbench": {"path": str(tmp_path / "nope")}}))
    result = runner.invoke(app, ["prepare", "fact-spans", "--config", str(missing), "--out", str(tmp_path / "q")])
    assert result.exit_code == 2 and "faithbench.path" in result.output


def test_command_module_imports_nothing_heavy():
    code = ("import sys, autovalidators.data_prep.fact_spans.cli, autovalidators.inference.windowing; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
