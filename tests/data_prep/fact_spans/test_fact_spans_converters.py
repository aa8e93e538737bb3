"""Converters: RAGTruth (subset and official layout), FaithBench, SQuAD format; bad rows are skipped
with a message and the rest converted. One smoke test per converter reads the real shared files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autovalidators.data_prep.fact_spans.converters import (read_faithbench, read_ragtruth_official,
                                                            read_ragtruth_subset, read_squad)
from autovalidators.data_prep.fact_spans.schema import SpanLabel, TaskType
from autovalidators.data_prep.io import DataError

DATASETS = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets"
needs_data = pytest.mark.skipif(not DATASETS.is_dir(), reason="shared datasets not present")

SUMMARY = "Here is a summary of the news: The mayor opened the bridge in 2019. It cost 5 million dollars."
REFERENCE = "The mayor opened the new bridge in 2019. The bridge cost 3 million dollars to build."


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def labelled(text: str, phrase: str, label_type: str = "Evident Conflict") -> dict:
    start = text.index(phrase)
    return {"start": start, "end": start + len(phrase), "text": phrase, "label_type": label_type,
            "implicit_true": False, "due_to_null": False, "meta": ""}


def test_ragtruth_subset_labels_hallucinations_noise_and_flags_missing_reference(tmp_path):
    path = write_jsonl(tmp_path / "rt.jsonl", [
        {"id": "1", "source_id": "s1", "model": "m", "split": "test", "task_type": "Summary", "source": "CNN/DM",
         "reference": REFERENCE, "response": SUMMARY, "labels": [labelled(SUMMARY, "5 million")], "quality": "good"},
        {"id": "2", "source_id": "s2", "model": "m", "split": "test", "task_type": "QA", "source": "MARCO",
         "reference": "", "response": "It is blue.", "labels": [], "quality": "good", "question": "sky colour?"},
        {"id": "3", "source_id": "s3", "model": "m", "split": "test", "task_type": "Data2txt", "source": "Yelp",
         "reference": {"name": "Cafe", "stars": 4}, "response": "Cafe.", "quality": "good",
         "labels": [{"start": 3, "end": 99, "text": "x", "label_type": "Evident Conflict"}]},
        {"id": "4", "source_id": "s4", "model": "m", "split": "test", "task_type": "Data2txt", "source": "Yelp",
         "reference": {"name": "Cafe Blue", "stars": 4}, "response": "Cafe Blue has 4 stars.", "labels": [],
         "quality": "good"},
    ])
    out = read_ragtruth_subset(path)
    assert len(out.records) == 3 and len(out.errors) == 1 and f"{path}:3" in out.errors[0]
    summary, qa, data = out.records
    spans = {summary.answer[s.start:s.end]: s.label for s in summary.spans}
    assert spans["5 million"] is SpanLabel.HALLUCINATION
    assert spans["Here is a summary of the news:"] is SpanLabel.NOISE
    assert summary.task_type is TaskType.SUMMARY and summary.group == "ragtruth:s1" and summary.question
    assert summary.facts and summary.facts[0].answer_spans  # "The mayor opened ... 2019" is mentioned
    assert not qa.grounding_usable and qa.question == "sky colour?" and qa.facts == []
    assert '"name": "Cafe Blue"' in data.context and data.grounding_usable


def test_ragtruth_subsets_merge_shared_responses_and_share_passages_by_source(tmp_path):
    def qa(row_id, source, response, reference=""):
        return {"id": row_id, "source_id": source, "model": "m", "split": "test", "task_type": "QA",
                "source": "MARCO", "reference": reference, "response": response, "labels": [],
                "quality": "good", "question": "sky colour?"}

    passages = "passage 1: The sky is blue on a clear day because of Rayleigh scattering."
    first = write_jsonl(tmp_path / "600.jsonl", [qa("1", "s1", "It is blue."), qa("2", "s1", "Blue."),
                                                  qa("3", "s1", "Blue."), qa("4", "s9", "Grey.")])
    extra = write_jsonl(tmp_path / "extra.jsonl", [qa("1b", "s1", "It is blue.", passages)])
    out = read_ragtruth_subset(first, extra)
    # The shared response is read once, with its passages; the other s1 rows borrow them; two rows
    # with equal text in one file stay two responses; a source nobody has passages for stays unusable.
    assert [r.answer for r in out.records] == ["It is blue.", "Blue.", "Blue.", "Grey."]
    assert [r.grounding_usable for r in out.records] == [True, True, True, False]
    assert out.records[0].provenance.file == str(extra) and passages in out.records[1].context


def test_ragtruth_official_layout_joins_by_source_id(tmp_path):
    write_jsonl(tmp_path / "source_info.jsonl", [
        {"source_id": "a", "task_type": "QA", "source": "MARCO",
         "source_info": {"question": "When was the bridge opened?", "passages": REFERENCE}, "prompt": "p"},
        {"source_id": "b", "task_type": "Summary", "source": "CNN/DM", "source_info": REFERENCE, "prompt": "p"}])
    write_jsonl(tmp_path / "response.jsonl", [
        {"id": "1", "source_id": "a", "model": "m", "temperature": 0.7, "labels": [], "split": "train",
         "quality": "good", "response": "The bridge opened in 2019."},
        {"id": "2", "source_id": "b", "model": "m", "temperature": 0.7, "split": "test", "quality": "good",
         "response": SUMMARY, "labels": [labelled(SUMMARY, "5 million")]},
        {"id": "3", "source_id": "zzz", "model": "m", "labels": [], "split": "train", "response": "x"}])
    out = read_ragtruth_official(tmp_path)
    assert [r.id for r in out.records] == ["ragtruth-1", "ragtruth-2"]
    assert "zzz" in out.errors[0]
    qa = out.records[0]
    assert qa.question == "When was the bridge opened?" and qa.context == REFERENCE and qa.grounding_usable
    assert out.records[1].meta["split"] == "test" and out.records[1].hallucinated


def faithbench_sample(annotations: list[dict]) -> dict:
    return {"sample_id": 0, "source": REFERENCE, "summary": SUMMARY, "annotations": annotations,
            "metadata": {"summarizer": "m"}}


def annotation(annotator: str, phrase: str, labels: list[str]) -> dict:
    start = SUMMARY.index(phrase)
    return {"annot_id": 1, "annotator_id": annotator, "annotator_name": annotator, "label": labels,
            "note": "", "summary_span": phrase, "summary_start": start, "summary_end": start + len(phrase)}


def test_faithbench_merges_annotators_and_applies_the_questionable_policy(tmp_path):
    folder = tmp_path / "fb"
    folder.mkdir()
    sample = faithbench_sample([
        annotation("a", "5 million", ["Unwanted", "Unwanted.Intrinsic"]),
        annotation("b", "5 million", ["Benign"]),
        annotation("a", "opened the bridge", ["Questionable"]),
        annotation("b", "Here is a summary", ["Benign"])])
    (folder / "batch_1.json").write_text(json.dumps({"samples": [sample]}))
    (folder / "batch_2.json").write_text("{not json")

    def labels(rec) -> dict[str, SpanLabel]:
        return {rec.answer[s.start:s.end]: s.label for s in rec.spans}

    out = read_faithbench(folder)
    assert len(out.records) == 1 and "batch_2.json" in out.errors[0]
    rec = out.records[0]
    assert labels(rec)["5 million"] is SpanLabel.HALLUCINATION  # any annotator's Unwanted counts
    assert SUMMARY[rec.ignored[0].start:rec.ignored[0].end] == "opened the bridge"
    assert rec.group.startswith("faithbench:") and rec.provenance.licence.startswith("CC BY-NC")
    strict = read_faithbench(folder, min_annotators=2).records[0]
    assert labels(strict)["5 million"] is SpanLabel.NOISE  # two annotators flagged it, only one as Unwanted
    assert not strict.hallucinated and not strict.ignored
    assert labels(strict)["Here is a summary of the news:"] is SpanLabel.NOISE  # filler, found by pattern
    as_hallucination = read_faithbench(folder, questionable="hallucination").records[0]
    assert labels(as_hallucination)["opened the bridge"] is SpanLabel.HALLUCINATION
    with pytest.raises(DataError, match="no batch_"):
        read_faithbench(tmp_path / "absent")


def test_squad_skips_unanswerable_and_misaligned_and_keys_parallel_paragraphs(tmp_path):
    data = {"data": [{"title": "T", "paragraphs": [{"context": REFERENCE, "qas": [
        {"id": "q1", "question": "When?", "answers": [{"text": "2019", "answer_start": REFERENCE.index("2019")}]},
        {"id": "q2", "question": "Who?", "answers": [], "is_impossible": True},
        {"id": "q3", "question": "Cost?", "answers": [{"text": "3 million", "answer_start": 0}]}]}]}]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    out = read_squad(path, source="xquad", language="en", parallel_key=True)
    assert [i.id for i in out.records] == ["xquad-en-q1"]
    assert "q3" in out.errors[0]
    assert out.records[0].group_keys[1] == "xquad:0:0"
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(DataError, match="SQuAD"):
        read_squad(tmp_path / "bad.json", source="x")


@needs_data
def test_real_ragtruth_subset_converts():
    out = read_ragtruth_subset(DATASETS / "ragtruth_subset" / "ragtruth_600.jsonl")
    assert len(out.records) == 600 and not out.errors
    assert sum(not r.grounding_usable for r in out.records) == 200
    assert sum(r.hallucinated for r in out.records) == 195


@needs_data
def test_real_faithbench_converts():
    out = read_faithbench(DATASETS / "faithbench" / "data_for_release")
    assert len(out.records) == 750 and not out.errors
    assert 0 < sum(r.hallucinated for r in out.records) < 750


@needs_data
@pytest.mark.parametrize("relative, language", [("xquad/xquad.ru.json", "ru"),
                                                ("tydiqa_goldp/language_data/english/english_tydiqa_dev.json", "en")])
def test_real_squad_format_converts(relative, language):
    out = read_squad(DATASETS / relative, source="real", language=language)
    assert len(out.records) > 400
    assert all(i.context[i.answer_start:i.answer_start + len(i.answer)] == i.answer for i in out.records)
