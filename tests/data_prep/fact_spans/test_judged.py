"""The judged-text converters (issue 12) on tiny files in each set's real layout: labels, spans,
groups, skipped rows and the "a bad row is one error naming file:line, the rest is read" rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autovalidators.data_prep.fact_spans.judged import (XSUM_MIN_VOTES, faithdial_label, read_begin,
                                                        read_binary_nli, read_esnli, read_faithdial, read_fib,
                                                        read_summedits, read_wice_claims, read_wice_tokens,
                                                        read_xsumfaith, xsum_unsupported)


def _write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- XSumFaith

SUMMARY = "rory mcilroy will take a lead"  # "mcilroy" is 5..12


def _span(worker: str, start: int | None, end: int | None) -> dict:
    if start is None:
        return {"worker_id": worker, "type": "NULL", "text": "NULL", "start_raw": None, "end_raw": None,
                "start": None, "end": None}
    return {"worker_id": worker, "type": "extrinsic", "text": SUMMARY[start:end], "start_raw": start + 1,
            "end_raw": end + 1, "start": start, "end": end}


def test_xsum_needs_two_of_three_annotators():
    assert XSUM_MIN_VOTES == 2
    spans = [_span("wid_0", 0, 12), _span("wid_1", 5, 17), _span("wid_2", None, None)]
    assert xsum_unsupported(SUMMARY, spans) == [(5, 12)]
    assert SUMMARY[5:12] == "mcilroy"
    # One annotator alone is not enough; three agreeing are.
    assert xsum_unsupported(SUMMARY, [_span("wid_0", 0, 12)]) == []
    assert xsum_unsupported(SUMMARY, [_span(w, 0, 4) for w in ("wid_0", "wid_1", "wid_2")]) == [(0, 4)]


def test_xsum_one_annotator_marking_twice_is_one_vote():
    spans = [_span("wid_0", 0, 12), _span("wid_0", 5, 12), _span("wid_1", None, None)]
    assert xsum_unsupported(SUMMARY, spans) == []


def test_xsum_all_null_spans_mean_supported():
    assert xsum_unsupported(SUMMARY, [_span(w, None, None) for w in ("wid_0", "wid_1", "wid_2")]) == []


def test_xsum_ranges_trim_whitespace_and_clip_to_the_summary():
    # Both mark " mcilroy " (with spaces around): the range is the word only.
    spans = [_span("wid_0", 4, 13), _span("wid_1", 4, 13)]
    assert xsum_unsupported(SUMMARY, spans) == [(5, 12)]
    # Offsets past the end are clipped, negative starts too.
    far = [{"worker_id": "a", "start": -3, "end": 999}, {"worker_id": "b", "start": 25, "end": 999}]
    assert xsum_unsupported(SUMMARY, far) == [(25, len(SUMMARY))]
    # Two separate agreed stretches stay two ranges.
    two = [_span("a", 0, 4), _span("b", 0, 4), _span("a", 18, 22), _span("b", 18, 22)]
    assert xsum_unsupported(SUMMARY, two) == [(0, 4), (18, 22)]


def _xsum_row(bbcid: str, system: str, spans: list[dict], doc: str = "Rory McIlroy shot a 67.") -> dict:
    return {"bbcid": bbcid, "system": system, "summary": SUMMARY, "doc": doc, "spans": spans,
            "is_factual_votes": ["no", "no", "no"]}


def test_read_xsumfaith_labels_groups_and_bad_rows(tmp_path):
    path = _write_jsonl(tmp_path / "xsumfaith_joined_with_docs.jsonl", [
        _xsum_row("111", "BERTS2S", [_span("wid_0", 0, 12), _span("wid_1", 5, 17), _span("wid_2", None, None)]),
        _xsum_row("111", "TConvS2S", [_span(w, None, None) for w in ("wid_0", "wid_1", "wid_2")]),
        _xsum_row("222", "BERTS2S", [], doc=""),  # no source article: an error, not a record
        {"bbcid": "333", "system": "x", "doc": "d"},  # no summary
        _xsum_row("444", "Gold", []),
    ])
    judged = read_xsumfaith(path)
    by_id = {r.id: r for r in judged.records}
    assert set(by_id) == {"xsumfaith-111-BERTS2S", "xsumfaith-111-TConvS2S", "xsumfaith-444-Gold"}
    hallucinated = by_id["xsumfaith-111-BERTS2S"]
    assert (hallucinated.label, hallucinated.unsupported, hallucinated.granularity) == (0, [(5, 12)], "span")
    assert hallucinated.context == "Rory McIlroy shot a 67." and hallucinated.text == SUMMARY
    assert by_id["xsumfaith-111-TConvS2S"].label == 1 and by_id["xsumfaith-111-TConvS2S"].unsupported == []
    # Two systems' summaries of one article share a group: they must never straddle splits.
    assert hallucinated.group == by_id["xsumfaith-111-TConvS2S"].group != by_id["xsumfaith-444-Gold"].group
    assert len(judged.errors) == 2
    assert f"{path}:3:" in judged.errors[0] and f"{path}:4:" in judged.errors[1]


def test_read_xsumfaith_malformed_json_line_is_one_error_and_the_rest_is_read(tmp_path):
    path = _write_jsonl(tmp_path / "x.jsonl", [_xsum_row("1", "A", []), "{not json", _xsum_row("2", "A", [])])
    judged = read_xsumfaith(path)
    assert [r.id for r in judged.records] == ["xsumfaith-1-A", "xsumfaith-2-A"]
    assert len(judged.errors) == 1 and f"{path}:2:" in judged.errors[0]


# -------------------------------------------------------------------------------------------- WiCE

MEDIA_CLAIM = "Media Play News is the only one dedicated to the home entertainment sector."
MEDIA_TOKENS = ["Media", "Play", "News", "is", "the", "only", "one", "dedicated", "to", "the", "home",
                "entertainment", "sector", "."]
EVIDENCE = ["(meta data) TITLE: About Us - Media Play News", "Media Play News is the voice of home entertainment.",
            "It covers the industry."]


def _wice_token_row(claim: str, tokens: list[str], flags: list[bool], **extra) -> dict:
    return {"non_supported_spans": flags, "claim_tokens": tokens, "label": "partially_supported",
            "supporting_sentences": [[1]], "claim": claim, "evidence": EVIDENCE, **extra}


def test_read_wice_tokens_maps_flagged_tokens_to_character_ranges(tmp_path):
    flags = [False, False, False, True, True, True, True, True] + [False] * 6
    ex_claim = "He met the ex - pats there."
    ex_tokens = ["He", "met", "the", "ex", "-", "pats", "there", "."]
    rows = [
        _wice_token_row(MEDIA_CLAIM, MEDIA_TOKENS, flags, meta={"id": "dev1-0", "claim_title": "Media Play News"}),
        _wice_token_row(ex_claim, ex_tokens, [False, False, False, True, True, True, False, False],
                        meta={"id": "dev2-0", "claim_title": "Expats"}),
        # Some exports write the lists as Python reprs.
        _wice_token_row(MEDIA_CLAIM, repr(MEDIA_TOKENS), repr([False] * 14),
                        meta={"id": "dev1-1", "claim_title": "Media Play News"}),
        _wice_token_row(MEDIA_CLAIM, MEDIA_TOKENS, [True]),  # length mismatch
        _wice_token_row("Short claim.", ["Other", "."], [True, False]),  # token not in the claim
        [1, 2, 3],  # not an object
    ]
    path = _write_jsonl(tmp_path / "dev.jsonl", rows)
    judged = read_wice_tokens(path)
    by_id = {r.id: r for r in judged.records}
    assert set(by_id) == {"wice-dev1-0", "wice-dev2-0", "wice-dev1-1"}
    media = by_id["wice-dev1-0"]
    (start, end), = media.unsupported
    assert MEDIA_CLAIM[start:end] == "is the only one dedicated"
    assert media.label == 0 and media.granularity == "span"
    # Adjacent unsupported tokens form one range, the spaces between them included.
    (start, end), = by_id["wice-dev2-0"].unsupported
    assert ex_claim[start:end] == "ex - pats"
    assert by_id["wice-dev1-1"].label == 1 and by_id["wice-dev1-1"].unsupported == []
    # Evidence drops the "(meta data)" line; claims about one article share a group.
    assert "(meta data)" not in media.context and "the voice of home entertainment" in media.context
    assert media.group == by_id["wice-dev1-1"].group != by_id["wice-dev2-0"].group
    assert [e.split(": skipped")[0] for e in judged.errors] == [f"{path}:{n}" for n in (4, 5, 6)]


def test_read_wice_claims_labels(tmp_path):
    rows = [{"label": label, "supporting_sentences": [], "claim": f"Claim {i}.", "evidence": EVIDENCE,
             "meta": {"id": f"c{i}", "claim_title": "T"}}
            for i, label in enumerate(["supported", "partially_supported", "not_supported", "maybe"])]
    path = _write_jsonl(tmp_path / "claim" / "dev.jsonl", rows)
    judged = read_wice_claims(path)
    assert [(r.id, r.label, r.granularity) for r in judged.records] == [
        ("wice-claim-c0", 1, "claim"), ("wice-claim-c1", 0, "claim"), ("wice-claim-c2", 0, "claim")]
    assert all(r.unsupported == [] for r in judged.records)
    assert len(judged.errors) == 1 and f"{path}:4:" in judged.errors[0]


# ------------------------------------------------------------------------- response-level summaries


def test_read_summedits_labels_domains_and_groups(tmp_path):
    doc = "Activists in London dumped paint in front of the embassy."
    rows = [{"id": "a_og", "doc": doc, "summary": "Activists dumped paint.", "label": "1", "edit_types": "[]"},
            {"id": "a_e1", "doc": doc, "summary": "Activists dumped water.", "label": "0", "edit_types": "[]"},
            {"id": "b_og", "doc": "Another document.", "summary": "Bad label.", "label": "2"},
            {"id": "c_og", "summary": "No doc."}]
    (tmp_path / "summedits_news.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    (tmp_path / "summedits_podcast.json").write_text(json.dumps([rows[0]]), encoding="utf-8")
    (tmp_path / "unrelated.json").write_text("[]", encoding="utf-8")
    judged = read_summedits(tmp_path)
    assert [(r.id, r.label) for r in judged.records] == [("summedits-news-a_og", 1), ("summedits-news-a_e1", 0),
                                                          ("summedits-podcast-a_og", 1)]
    news_og, news_edit, podcast = judged.records
    assert news_og.group == news_edit.group != podcast.group  # same document, other domain
    assert {r.granularity for r in judged.records} == {"response"}
    news = tmp_path / "summedits_news.json"
    assert [e.split(": skipped")[0] for e in judged.errors] == [f"{news}:3", f"{news}:4"]


def test_read_fib_gives_a_faithful_and_a_distractor_sharing_one_group(tmp_path):
    folder = tmp_path / "multiple_choice-dataset"
    faithful = "Passengers will face longer crossings because of new safety measures."
    distractor = "A new ferry service has been launched after a complaint."
    rows = [{"id": "321", "input": "Vehicles and pedestrians will now embark separately.", "correct_choice": faithful,
             "list_choices": [" " + distractor, faithful], "lbl": "1"},
            {"id": "322", "input": "Doc.", "correct_choice": "Not a choice.", "list_choices": ["x", "y"], "lbl": "0"},
            {"id": "323", "input": "Doc.", "correct_choice": "x", "list_choices": ["x", "y", "z"], "lbl": "0"}]
    path = _write_jsonl(folder / "xsum" / "fib" / "binary_choice-using_bart-base_distractors.jsonl", rows)
    judged = read_fib(folder)
    assert [(r.text, r.label) for r in judged.records] == [(distractor, 0), (faithful, 1)]
    assert len({r.group for r in judged.records}) == 1 and len({r.id for r in judged.records}) == 2
    assert all(r.context.startswith("Vehicles") and r.granularity == "response" for r in judged.records)
    assert [e.split(": skipped")[0] for e in judged.errors] == [f"{path}:2", f"{path}:3"]


# -------------------------------------------------------------------------- knowledge-grounded dialogue

BEGIN_HEADER = "model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\n"


def test_read_begin_labels_skips_generic_and_reports_bad_rows(tmp_path):
    path = tmp_path / "wow" / "begin_dev_wow.tsv"
    path.parent.mkdir()
    path.write_text(BEGIN_HEADER
                    + "ctrl\twow\tBlue is a primary colour.\thi\tBlue is a primary colour.\tFully attributable\n"
                    + 'ctrl\twow\tThe "Royal Blue was a train.\thi\tIt was a "ship.\tNot fully attributable\n'
                    + "ctrl\twow\tBlue skies.\thi\tGood.\tGeneric\n"
                    + "ctrl\twow\tK.\thi\tR.\tsomething else\n", encoding="utf-8")
    judged = read_begin(tmp_path)
    assert [(r.text, r.label) for r in judged.records] == [("Blue is a primary colour.", 1),
                                                          ('It was a "ship.', 0)]  # quotes kept literally
    assert judged.records[1].context == 'The "Royal Blue was a train.'
    assert [r.id for r in judged.records] == ["begin-begin_dev_wow-1", "begin-begin_dev_wow-2"]
    assert len(judged.errors) == 1 and f"{path}:4:" in judged.errors[0]


def test_read_begin_short_row_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "tc" / "begin_dev_tc.tsv"
    path.parent.mkdir()
    path.write_text(BEGIN_HEADER + "ctrl\ttc\ttruncated row\n"
                    + "ctrl\ttc\tK.\thi\tR.\tFully attributable\n", encoding="utf-8")
    judged = read_begin(tmp_path)
    assert [r.label for r in judged.records] == [1]
    assert len(judged.errors) == 1 and f"{path}:1:" in judged.errors[0]


@pytest.mark.parametrize("raw, expected", [
    ("entailment", 1), ("Entailment", 1), ("entailment,uncooperative", 1), ("entailment. uncooperative", 1),
    ("entailmentt,uncooperative", 1), ("hallucination", 0), ("Hallucination", 0), ("hallucinated", 0),
    ("entailment,hallucination", 0), ("Partial Hallucination", 0), ("generic", None), ("Generic", None),
    ("Uncooperative", None), ("", None),
])
def test_faithdial_label(raw, expected):
    assert faithdial_label(raw) == expected


def test_read_faithdial_reads_gold_and_model_layouts(tmp_path):
    gold = tmp_path / "gold" / "wow.csv"
    gold.parent.mkdir()
    gold.write_text("evidence,history,response,BEGIN,VRM\n"
                    '"Lawyers apply legal theories, and knowledge.","what else?",Lawyers apply legal theories,Entailment,Edification\n'
                    '"Blue is a colour.",hi,Blue was invented in 1990,Hallucination,Edification\n'
                    '"Blue is a colour.",hi,Nice,Generic,Ack\n', encoding="utf-8")
    model = tmp_path / "GPT2" / "gpt2_processed_wow.csv"
    model.parent.mkdir()
    model.write_text("knowledge,history,gpt2,begin_label,vrm_label\n"
                     '"Blue is a primary colour.",,"Maybe blue. It is a primary colour.","entailment,hallucination",x\n'
                     '"Royal Blue was a train.",,It was a train,"entailment,uncooperative",x\n'
                     ',,No knowledge at all,entailment,x\n'
                     '"K.",,,entailment,x\n', encoding="utf-8")
    judged = read_faithdial(tmp_path)
    assert [(r.text, r.label) for r in judged.records] == [
        ("Maybe blue. It is a primary colour.", 0), ("It was a train", 1),  # GPT2/ sorts before gold/
        ("Lawyers apply legal theories", 1), ("Blue was invented in 1990", 0)]
    assert judged.records[2].context == "Lawyers apply legal theories, and knowledge."
    assert judged.records[1].id == "faithdial-GPT2-gpt2_processed_wow-2"
    assert judged.errors == []


# ---------------------------------------------------------------------------------------------- NLI


def test_read_binary_nli_labels_and_bad_lines(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("entailment\tThe cat sat on the mat.\tA cat sat.\n"
                    "not_entailment\tThe cat sat on the mat.\tA dog sat.\n"
                    "non_entailment\tJessie had a party.\tJessie had no party.\n"
                    "neutral\tP.\tH.\n"
                    "entailment\tonly two fields\n", encoding="utf-8")
    judged = read_binary_nli(path, "mnli")
    assert [(r.text, r.label) for r in judged.records] == [("A cat sat.", 1), ("A dog sat.", 0),
                                                          ("Jessie had no party.", 0)]
    assert {(r.source, r.granularity) for r in judged.records} == {("mnli", "nli")}
    assert judged.records[0].group == judged.records[1].group != judged.records[2].group  # same premise
    assert len({r.id for r in judged.records}) == 3
    assert [e.split(": skipped")[0] for e in judged.errors] == [f"{path}:4", f"{path}:5"]


def test_read_esnli_labels_and_length_mismatch(tmp_path):
    premise = "Two women are embracing while holding to go packages . "
    (tmp_path / "s1.dev").write_text("\n".join([premise] * 4) + "\n", encoding="utf-8")
    (tmp_path / "s2.dev").write_text("Sisters hug . \nTwo woman are holding packages . \nMen fight . \nX . \n",
                                     encoding="utf-8")
    (tmp_path / "labels.dev").write_text("neutral\nentailment\ncontradiction\nunknown\n", encoding="utf-8")
    judged = read_esnli(tmp_path, "dev")
    assert [(r.text, r.label) for r in judged.records] == [("Sisters hug .", 0), ("Two woman are holding packages .", 1),
                                                          ("Men fight .", 0)]
    assert judged.records[0].context == premise.strip() and len({r.group for r in judged.records}) == 1
    assert len(judged.errors) == 1 and ":4:" in judged.errors[0]

    for name, text in (("s1.test", "a\nb\n"), ("s2.test", "c\n"), ("labels.test", "entailment\nneutral\n")):
        (tmp_path / name).write_text(text, encoding="utf-8")
    mismatched = read_esnli(tmp_path, "test")
    assert mismatched.records == [] and len(mismatched.errors) == 1 and "differ in length" in mismatched.errors[0]


def test_a_summedits_edit_becomes_the_unsupported_span_when_asked(tmp_path):
    from autovalidators.data_prep.fact_spans.judged import edited_ranges, read_summedits

    original = "The mayor opened the bridge in 2019."
    edited = "The governor opened the bridge in 2021."
    assert [edited[a:b] for a, b in edited_ranges(original, edited)] == ["governor", "2021."]
    rows = [{"id": "a", "doc": "The mayor opened the bridge in 2019.", "summary": edited, "label": "0",
             "original_summary": original},
            {"id": "b", "doc": "The mayor opened the bridge in 2019.", "summary": "The mayor opened a bridge in 2019.",
             "label": "1", "original_summary": original}]
    (tmp_path / "summedits_news.json").write_text(json.dumps(rows), encoding="utf-8")
    inconsistent, consistent = read_summedits(tmp_path, spans=True).records
    assert inconsistent.granularity == "span" and inconsistent.unsupported == edited_ranges(original, edited)
    assert consistent.granularity == "response" and consistent.unsupported == []  # a faithful paraphrase
    assert all(r.granularity == "response" for r in read_summedits(tmp_path).records)  # the default keeps labels only
