"""`prepare grounding` (issue 12): judged texts -> sentence labels, cross-encoder pairs and answer
splits, on tiny files in every source's layout. Groups never straddle splits, held-out RAGTruth
stays out of training, NLI sets feed pairs only, and bad rows are reported, not fatal."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from autovalidators.data_prep.fact_spans.converters import read_ragtruth_subset
from autovalidators.data_prep.fact_spans.grounding import (GroundingPrepareConfig, _balance, prepare,
                                                           sentence_claims, sentence_labels, span_record_as_judged)
from autovalidators.data_prep.fact_spans.judged import JudgedText
from autovalidators.data_prep.io import DataError, read_jsonl
from autovalidators.inference.grounding import ContextIndex, sentence_signals

CITIES = ["Paris", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Lisbon", "Dublin", "Oslo", "Warsaw",
          "Athens", "Sofia", "Riga", "Tallinn", "Vilnius", "Bern"]


def _doc(i: int) -> str:
    city = CITIES[i % len(CITIES)]
    return (f"The museum number {i} opened in {city} in {1800 + 7 * i}. It holds {100 + i} paintings and was "
            f"designed by Architect{i} Smith. About {i + 3} thousand people visit it every month.")


def _judged(text: str, context: str, *, granularity: str = "response", label: int = 1,
            unsupported: list[tuple[int, int]] | None = None) -> JudgedText:
    return JudgedText(id="t", source="s", group="g", granularity=granularity, context=context, text=text,
                      label=label, unsupported=unsupported or [])


# ---------------------------------------------------------------------------------- sentence labels

def test_sentence_labels_span_granular_marks_overlapping_sentences():
    context = _doc(1)
    text = "The museum opened in Berlin in 1807. It has a large cafe. It holds 101 paintings."
    start = text.index("It has a large cafe.")
    claims = sentence_signals(text, ContextIndex.build(context))
    record = _judged(text, context, granularity="span", label=0, unsupported=[(start + 9, start + 19)]).to_dict()
    assert sentence_labels(record, claims) == [1, 0, 1]
    # A range ending exactly where a sentence starts does not touch it.
    record["unsupported"] = [(0, claims[1].sentence.start)]
    assert sentence_labels(record, claims) == [0, 1, 1]


def test_sentence_labels_response_level():
    context = _doc(2)
    text = "The museum opened in Madrid. It was built by aliens from Mars. It holds 102 paintings."
    claims = sentence_signals(text, ContextIndex.build(context))
    # A response label goes to its least supported sentence only, either way: the others are
    # unknown, so the number of sentences cannot predict the label.
    assert sentence_labels(_judged(text, context, label=1).to_dict(), claims) == [-1, 1, -1]
    assert sentence_labels(_judged(text, context, label=0).to_dict(), claims) == [-1, 0, -1]
    assert sentence_labels(_judged("", context, label=0).to_dict(), []) == []


def test_sentence_claims_drop_noise_and_unknown_sentences():
    context = _doc(3)
    text = "Thank you for your question! The museum opened in Rome. It was built by aliens from Mars."
    claims = sentence_claims(_judged(text, context, label=0))
    assert claims == [("It was built by aliens from Mars.", context, 0)]
    supported = sentence_claims(_judged(text, context, label=1))
    assert [(c, label) for c, _, label in supported] == [("The museum opened in Rome.", 1),
                                                         ("It was built by aliens from Mars.", 1)]


def test_sentence_claims_nli_uses_the_best_chunk_of_a_long_premise():
    short = sentence_claims(_judged("A museum opened.", _doc(4), granularity="nli", label=1))
    assert short == [("A museum opened.", _doc(4), 1)]
    premise = " ".join(_doc(i) for i in range(20))  # several chunks
    assert len(ContextIndex.build(premise).chunks) > 1
    hypothesis = "A museum opened in Tallinn in 1891."  # only _doc(13) names Tallinn and 1891
    (claim, evidence, label), = sentence_claims(_judged(hypothesis, premise, granularity="nli", label=0))
    assert (claim, label) == (hypothesis, 0)
    assert "opened in Tallinn in 1891" in evidence and evidence in premise and len(evidence) < len(premise)


def test_span_record_as_judged_keeps_hallucination_ranges(tmp_path):
    response = "The museum opened in Paris. It has a large cafe."
    start = response.index("It has a large cafe.")
    row = {"id": "7", "source_id": "s7", "model": "m", "split": "test", "task_type": "Summary", "source": "x",
           "reference": _doc(0), "response": response, "quality": "good", "question": None,
           "labels": [{"start": start, "end": len(response), "text": response[start:],
                       "label_type": "Evident Baseless Info"}]}
    path = tmp_path / "rt.jsonl"
    path.write_text(json.dumps(row) + "\n")
    record, = read_ragtruth_subset(path).records
    judged = span_record_as_judged(record)
    assert (judged.granularity, judged.label, judged.unsupported) == ("span", 0, [(start, len(response))])
    assert (judged.context, judged.text, judged.group, judged.source) == (record.context, response, record.group,
                                                                         "ragtruth")


# -------------------------------------------------------------------------------------- _balance

def _rows(positive: int, negative: int) -> list[dict]:
    return [{"label": 1, "i": i} for i in range(positive)] + [{"label": 0, "i": i} for i in range(negative)]


def test_balance_cuts_the_majority_to_the_ratio():
    kept = _balance(_rows(20, 4), 1.5, 0, random.Random(0))
    assert sum(r["label"] == 0 for r in kept) == 4 and sum(r["label"] == 1 for r in kept) == 6


def test_balance_caps_each_label_at_half_the_cap():
    kept = _balance(_rows(50, 40), 1.5, 20, random.Random(0))
    assert sum(r["label"] == 0 for r in kept) == 10 and sum(r["label"] == 1 for r in kept) == 10


def test_balance_single_label_samples_up_to_the_cap_and_is_seeded():
    rows = _rows(30, 0)
    kept = _balance(rows, 1.5, 8, random.Random(5))
    assert len(kept) == 8 and all(r in rows for r in kept)
    assert kept == _balance(rows, 1.5, 8, random.Random(5))
    assert len(_balance(_rows(3, 0), 1.5, 8, random.Random(5))) == 3
    assert rows == _rows(30, 0)  # the input is not reordered


# ------------------------------------------------------------------------------------ prepare: fixtures

def _jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


def _write_sources(root: Path) -> dict[str, str]:
    """A few rows of every judged set in its real layout; returns the `sources` config."""
    n = 0

    def doc() -> str:
        nonlocal n
        n += 1
        return _doc(n)

    xsum_rows = []
    for i in range(12):
        d = doc()
        summary = f"the museum opened in {CITIES[i % len(CITIES)].lower()} with a large cafe"
        cafe = summary.index("a large cafe")
        spans = ([{"worker_id": w, "start": cafe, "end": len(summary)} for w in ("wid_0", "wid_1")]
                 if i % 2 else [{"worker_id": "wid_0", "start": None, "end": None}])
        xsum_rows += [{"bbcid": str(i), "system": "BERTS2S", "summary": summary, "doc": d, "spans": spans}]
    xsum_rows.insert(3, {"bbcid": "bad", "system": "x", "summary": "no doc", "doc": ""})  # line 4: an error
    _jsonl(root / "xsum.jsonl", xsum_rows)

    claim = "The museum is the only one dedicated to modern art."
    tokens = ["The", "museum", "is", "the", "only", "one", "dedicated", "to", "modern", "art", "."]
    for split in ("train", "dev", "test"):
        _jsonl(root / "wice_tokens" / f"{split}.jsonl", [
            {"claim": claim, "claim_tokens": tokens, "non_supported_spans": [False] * 4 + [True] * 3 + [False] * 4,
             "label": "partially_supported", "evidence": [doc()], "meta": {"id": f"{split}{j}", "claim_title": f"W{split}{j}"}}
            for j in range(2)])
    for split in ("dev", "test"):
        _jsonl(root / "wice_claims" / f"{split}.jsonl", [
            {"claim": f"The museum number {n + 1} opened.", "label": label, "evidence": [doc()],
             "meta": {"id": f"c{split}{j}", "claim_title": f"C{split}{j}"}}
            for j, label in enumerate(["supported", "not_supported"])])

    (root / "summedits").mkdir()
    summedits = []
    for j in range(6):
        d = doc()
        summedits.append({"id": f"e{j}", "doc": d, "summary": d.split(". ")[0] + "." if j % 2 else
                          "The museum was closed by aliens in 2099.", "label": str(j % 2)})
    (root / "summedits" / "summedits_news.json").write_text(json.dumps(summedits))

    fib_rows = []
    for j in range(4):
        d = doc()
        fib_rows.append({"id": str(j), "input": d, "correct_choice": d.split(". ")[0] + ".",
                         "list_choices": [d.split(". ")[0] + ".", "The museum burned down in 1999."], "lbl": "0"})
    _jsonl(root / "fib" / "xsum" / "fib" / "binary_choice-using_bart-base_distractors.jsonl", fib_rows)

    (root / "begin" / "wow").mkdir(parents=True)
    begin = "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"
    for j, label in enumerate(["Fully attributable", "Not fully attributable", "Generic", "Fully attributable"]):
        d = doc()
        begin += f"ctrl\twow\t{d}\thi\t{d.split('. ')[0] if j != 1 else 'It sells ice cream'}.\t{label}\n"
    (root / "begin" / "wow" / "begin_dev_wow.tsv").write_text(begin)

    (root / "faithdial" / "CTRL").mkdir(parents=True)
    faithdial = "knowledge,history,ctrl,begin_label,vrm_label\n"
    for j, label in enumerate(["entailment", "hallucination", "generic", "entailment,uncooperative"]):
        d = doc()
        faithdial += f'"{d}",,"{d.split(". ")[0] if j != 1 else "It was built on the moon"}.",{label},x\n'
    (root / "faithdial" / "CTRL" / "ctrl_processed_wow.csv").write_text(faithdial)

    docnli = root / "docnli"
    for folder, name in (("binary-FEVER-NLI", "dev.txt"), ("binary-FEVER-NLI", "test.txt"),
                         ("binary-MNLI", "dev.txt"), ("binary-MNLI", "test.txt"),
                         ("MCTest-NLI", "mc160.dev_in_entail.txt")):
        (docnli / folder).mkdir(parents=True, exist_ok=True)
        negative = "non_entailment" if folder == "MCTest-NLI" else "not_entailment"
        lines = []
        for j in range(3):
            d = doc()
            lines += [f"entailment\t{d}\tThe museum number {n} opened.", f"{negative}\t{d}\tThe museum sank at sea."]
        (docnli / folder / name).write_text("\n".join(lines) + "\n")

    esnli = root / "esnli"
    esnli.mkdir()
    for split in ("dev", "test"):
        premises = [doc() for _ in range(3)]
        (esnli / f"s1.{split}").write_text("\n".join(p for p in premises for _ in range(2)) + "\n")
        (esnli / f"s2.{split}").write_text("\n".join(h for _ in premises for h in ("A museum opened .",
                                                                                 "A zoo closed ."))
                                           + "\n")
        (esnli / f"labels.{split}").write_text("\n".join(["entailment", "contradiction"] * 3) + "\n")

    return _source_paths(root)


def _source_paths(root: Path) -> dict[str, str]:
    return {"xsumfaith": str(root / "xsum.jsonl"), "wice_tokens": str(root / "wice_tokens"),
            "wice_claims": str(root / "wice_claims"), "summedits": str(root / "summedits"),
            "fib": str(root / "fib"), "begin": str(root / "begin"), "faithdial": str(root / "faithdial"),
            "docnli": str(root / "docnli"), "esnli": str(root / "esnli")}


def _write_ragtruth(path: Path) -> None:
    rows = []
    for i in range(16):
        reference = _doc(500 + i)
        response = f"The museum opened in {CITIES[i % len(CITIES)]}. It has a large cafe."
        start = response.index("It has a large cafe.")
        rows.append({"id": str(i), "source_id": f"s{i // 2}", "model": "m", "split": "train",
                     "task_type": ["Summary", "Data2txt"][i % 2], "source": "x", "reference": reference,
                     "response": response, "quality": "good", "question": None,
                     "labels": [{"start": start, "end": len(response), "text": response[start:],
                                 "label_type": "Evident Baseless Info"}] if i % 2 else []})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _config(tmp_path: Path, out: str = "out", *, ragtruth: bool = True) -> GroundingPrepareConfig:
    root = tmp_path / "src"
    if not root.exists():
        root.mkdir()
        _write_sources(root)
        _write_ragtruth(root / "rt.jsonl")
    paths = _source_paths(root)
    return GroundingPrepareConfig.model_validate({
        "seed": 5, "out_dir": str(tmp_path / out),
        "ragtruth": {"subset_path": str(root / "rt.jsonl") if ragtruth else None, "heldout_fraction": 0.5},
        "faithbench": {"path": None},
        "sources": paths,
        "splits": {"train": 0.5, "dev": 0.25, "test": 0.25},
        "max_nli_pairs": {"fever_nli": 100, "mnli": 100, "esnli": 100, "mctest_nli": 100},
        "max_claim_pairs": 1000,
    })


NLI_SOURCES = {"fever_nli", "mnli", "mctest_nli", "esnli"}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("grounding")
    config = _config(tmp_path)
    card = prepare(config)
    return Path(config.out_dir), card, config


def test_prepare_writes_every_output(prepared):
    out, card, _ = prepared
    for name in ("answers/train", "answers/dev", "answers/test", "pairs/train", "pairs/dev",
                 "heldout/ragtruth", "heldout/faithbench"):
        assert (out / f"{name}.jsonl").is_file(), name
    assert (out / "data_card.json").is_file() and (out / "DATA_CARD.md").is_file()
    on_disk = json.loads((out / "data_card.json").read_text())
    assert on_disk["task"] == "grounding"
    for name in ("answers/train", "answers/dev", "answers/test", "pairs/train", "pairs/dev"):
        assert on_disk["splits"][name]["rows"] == len(list(read_jsonl(out / f"{name}.jsonl")))
    assert on_disk["splits"]["answers/train"]["rows"] > 0 and on_disk["splits"]["pairs/train"]["rows"] > 0


def test_prepare_splits_are_grouped_and_heldout_stays_out(prepared):
    out, _, _ = prepared
    answers = {s: list(read_jsonl(out / "answers" / f"{s}.jsonl")) for s in ("train", "dev", "test")}
    groups = {s: {r["group"] for r in rows} for s, rows in answers.items()}
    assert not groups["train"] & groups["dev"] and not groups["train"] & groups["test"]
    assert not groups["dev"] & groups["test"]
    heldout = list(read_jsonl(out / "heldout" / "ragtruth.jsonl"))
    assert heldout, "half the RAGTruth documents are held out"
    held_groups = {r["group"] for r in heldout}
    assert not held_groups & set().union(*groups.values())
    assert {r["source"] for r in heldout} == {"ragtruth"}
    trained_ragtruth = [r for rows in answers.values() for r in rows if r["source"] == "ragtruth"]
    assert trained_ragtruth and not any(r["id"] in {h["id"] for h in heldout} for r in trained_ragtruth)
    # RAGTruth rows only go to train/dev (ragtruth_splits), never to test.
    assert not any(r["source"] == "ragtruth" for r in answers["test"])


def test_prepare_answers_hold_judged_texts_never_nli(prepared):
    out, _, _ = prepared
    rows = [r for s in ("train", "dev", "test") for r in read_jsonl(out / "answers" / f"{s}.jsonl")]
    sources = {r["source"] for r in rows}
    assert not sources & NLI_SOURCES
    assert {"xsumfaith", "wice", "summedits", "fib", "begin", "faithdial", "ragtruth"} <= sources
    for r in rows:
        assert set(r) >= {"id", "source", "group", "granularity", "context", "text", "label", "unsupported"}
        assert r["label"] in (0, 1)
        if r["granularity"] != "span":
            assert r["unsupported"] == []
        for start, end in r["unsupported"]:
            assert 0 <= start < end <= len(r["text"])
    # Generic BEGIN/FaithDial rows are skipped; the span-granular label follows its ranges.
    assert all((r["label"] == 0) == bool(r["unsupported"]) for r in rows if r["granularity"] == "span")


def test_prepare_pairs_are_labelled_grouped_and_balanced(prepared):
    out, _, config = prepared
    pairs = {s: list(read_jsonl(out / "pairs" / f"{s}.jsonl")) for s in ("train", "dev")}
    for rows in pairs.values():
        for r in rows:
            assert set(r) == {"evidence", "claim", "label", "source", "group"}
            assert r["label"] in (0, 1) and r["claim"].strip()
    assert {r["source"] for r in pairs["train"]} & NLI_SOURCES, "NLI sets feed the cross-encoder"
    assert not {r["group"] for r in pairs["train"]} & {r["group"] for r in pairs["dev"]}
    answer_groups = {s: {r["group"] for r in read_jsonl(out / "answers" / f"{s}.jsonl")} for s in ("train", "dev", "test")}
    judged_train = {r["group"] for r in pairs["train"] if r["source"] not in NLI_SOURCES}
    assert judged_train <= answer_groups["train"]
    assert not {r["group"] for rows in pairs.values() for r in rows} & answer_groups["test"]
    for source in {r["source"] for r in pairs["train"]} - NLI_SOURCES:
        labels = [r["label"] for r in pairs["train"] if r["source"] == source]
        positive, negative = labels.count(1), labels.count(0)
        if positive and negative:
            assert max(positive, negative) <= config.max_majority_ratio * min(positive, negative), source


def test_prepare_reports_bad_rows_without_failing(prepared):
    _, card, _ = prepared
    assert any("xsum.jsonl:4:" in e for e in card["errors"])
    assert any("source rows skipped" in note for note in card["notes"])


def test_prepare_is_deterministic(tmp_path):
    first, second = _config(tmp_path, "a", ragtruth=False), _config(tmp_path, "b", ragtruth=False)
    prepare(first)
    prepare(second)
    for name in ("answers/train.jsonl", "answers/dev.jsonl", "answers/test.jsonl", "pairs/train.jsonl",
                 "pairs/dev.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert list(read_jsonl(tmp_path / "a" / "heldout" / "ragtruth.jsonl")) == []


def test_prepare_missing_source_names_its_key(tmp_path):
    config = _config(tmp_path, ragtruth=False)
    broken = config.model_copy(update={"sources": config.sources.model_copy(
        update={"fib": str(tmp_path / "nowhere")})})
    with pytest.raises(DataError, match="sources.fib"):
        prepare(broken)
    assert not (tmp_path / "out" / "answers").exists()
