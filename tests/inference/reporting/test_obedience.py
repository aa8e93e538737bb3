"""The obedience test: pairs built from counterfactual records, scoring on hand-made validators."""

from __future__ import annotations

import json
from typing import Sequence

import pytest
from typer.testing import CliRunner

from autovalidators.data_prep.fact_spans.converters import ReadingItem
from autovalidators.data_prep.fact_spans.schema import Provenance
from autovalidators.data_prep.obedience import build_pairs
from autovalidators.inference.case import Case
from autovalidators.inference.cli import _register_commands, app
from autovalidators.inference.gate import Gate
from autovalidators.inference.reporting.obedience import obedience_section, read_pairs, score_obedience, side
from autovalidators.inference.reporting.schema import Provenance as ReportProvenance
from autovalidators.inference.results import FactSpansOutput, Span, SpanLabel
from autovalidators.inference.validators.base import ValidatorInfo

CONTEXT = "The tower opened in 1925 in Paris. It is 300 metres tall."  # the world says 1889


def pair(pid: str, language: str = "en", world: str = "1889", follows: str = "1925") -> dict:
    answer_world = f"The tower opened in {world}."
    start = answer_world.index(world)
    return {"id": pid, "language": language, "question": "When did the tower open?", "context": CONTEXT,
            "answer_context": f"The tower opened in {follows}.", "answer_world": answer_world,
            "changed": f"{world} -> {follows}",
            "world_spans": [{"start": start, "end": start + len(world), "label": "HALLUCINATION"}]}


class FlagsWords:
    """A fact-span validator that flags an answer containing any of `words` (the span is the word)."""

    def __init__(self, *words: str) -> None:
        self.words = words
        self.info = ValidatorInfo("fact_spans", "fake", "test")

    def predict(self, cases: Sequence[Case]) -> list[FactSpansOutput]:
        outputs = []
        for case in cases:
            hits = [(case.answer.index(w), w) for w in self.words if w in case.answer]
            spans = tuple(Span(i, i + len(w), SpanLabel.HALLUCINATION, 0.9, w) for i, w in hits)
            outputs.append(FactSpansOutput(applies=True, hallucinated=bool(hits),
                                           hallucination_score=0.9 if hits else 0.1,
                                           precision=0.5 if hits else 1.0, spans=spans, source="fake"))
        return outputs


def score(validator, pairs: list[dict]) -> dict:
    gate = Gate(validators=["fact_spans"], instances={"fact_spans": validator})
    return score_obedience(gate, pairs, batch_size=2)


def test_a_validator_that_flags_the_world_value_sides_with_the_context():
    result = score(FlagsWords("1889"), [pair("a"), pair("b"), pair("c", "ru")])
    fact = result["validators"]["fact_spans"]
    assert (fact["pairs"], fact["sides_context"], fact["sides_world"], fact["no_preference"]) == (3, 3, 0, 0)
    assert fact["world_flagged_rate"] == 1.0 and fact["context_flagged_rate"] == 0.0
    assert (fact["precision"], fact["recall"], fact["f1"], fact["span_hit_rate"]) == (1.0, 1.0, 1.0, 1.0)
    assert result["by_language"]["ru"]["fact_spans"]["pairs"] == 1
    assert [d["fact_spans"]["side"] for d in result["pairs_detail"]] == ["context"] * 3


def test_a_validator_that_knows_the_world_sides_with_it_and_is_reported_as_such():
    result = score(FlagsWords("1925"), [pair("a"), pair("b")])
    fact = result["validators"]["fact_spans"]
    assert (fact["sides_context"], fact["sides_world"], fact["world_flagged"], fact["context_flagged"]) == (0, 2, 0, 2)
    assert fact["precision"] == 0.0 and fact["recall"] == 0.0 and fact["f1"] == 0.0
    section = obedience_section(result, ReportProvenance(command="x", command_recorded=True), _config(), [])
    assert [e.error for e in section.errors] == ["world answer not flagged"] * 2
    example = section.errors[0]
    assert example.text == "The tower opened in 1889." and example.gold == "changed 1889 -> 1925"
    assert [(h.start, h.end, h.label) for h in example.highlights] == [(20, 24, "gold HALLUCINATION")]


def test_flagging_both_answers_is_no_preference_and_lowers_precision():
    result = score(FlagsWords("1889", "1925"), [pair("a"), pair("b")])
    fact = result["validators"]["fact_spans"]
    assert fact["no_preference"] == 2 and fact["sides_context"] == 0
    assert fact["world_flagged"] == 2 and fact["context_flagged"] == 2
    assert fact["precision"] == 0.5 and fact["recall"] == 1.0
    # The gate's decision is scored too: both answers fail the same way, so it has no preference.
    assert result["validators"]["gate"]["no_preference"] == 2


def test_side_compares_verdicts_then_scores_and_skips_what_does_not_apply():
    assert side((True, True, 0.2), (True, False, 0.9)) == "context"
    assert side((True, False, 0.9), (True, True, 0.2)) == "world"
    assert side((True, True, 0.8), (True, True, 0.3)) == "context"
    assert side((True, True, 0.3), (True, True, 0.3 + 1e-9)) == "none"
    assert side((False, True, 0.8), (True, False, 0.1)) is None


def _config():
    from autovalidators.inference.config import CONFIG_DIR, load_config
    from autovalidators.inference.reporting.schema import ReportConfig

    return load_config(CONFIG_DIR / "report.yaml", ReportConfig)


def test_pairs_come_from_the_counterfactual_builder_with_exact_world_spans():
    provenance = Provenance(dataset="test", file="hand-made", row="1", licence="CC0")
    contexts = [
        "The Eiffel Tower was completed in 1889 in Paris. It was designed by the company of Gustave Eiffel.",
        "The Golden Gate Bridge opened in 1937. Its main span is 1280 metres long and it links San Francisco.",
        "Лев Толстой родился в 1828 году в Ясной Поляне. Он написал роман Война и мир.",
    ]
    items = [ReadingItem(id=f"i{n}", context=c, question="When?", answer=c.split()[5 if n < 2 else 3].strip("."),
                         answer_start=c.index(c.split()[5 if n < 2 else 3].strip(".")),
                         language="ru" if n == 2 else "en", source="test", provenance=provenance,
                         group_keys=(f"g{n}",)) for n, c in enumerate(contexts)]
    pairs = build_pairs(items, per_language=5, seed=1)
    assert {p["language"] for p in pairs} == {"en", "ru"}
    for p in pairs:
        original = next(c for c in contexts if c[:10] == p["context"][:10])
        world_value, new_value = p["changed"].split(" -> ")
        assert p["context"] != original and new_value in p["context"] and world_value in original
        assert p["answer_context"] != p["answer_world"]
        [span] = p["world_spans"]
        assert p["answer_world"][span["start"]:span["end"]] == world_value
        assert p["answer_context"].replace(new_value, world_value, 1) == p["answer_world"]


def test_bad_pair_lines_are_reported_and_the_rest_scored(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join([json.dumps(pair("a")), "{oops", json.dumps({"id": "b", "question": "q"}),
                               json.dumps(pair("c"))]) + "\n", encoding="utf-8")
    pairs, errors = read_pairs(path)
    assert [p["id"] for p in pairs] == ["a", "c"]
    assert errors[0].startswith(f"{path}:2: malformed JSON")
    assert errors[1].startswith(f"{path}:3: missing or non-text field(s) context, answer_context, answer_world")
    _register_commands()
    out = tmp_path / "obedience.json"
    result = CliRunner().invoke(app, ["benchmark", "obedience", "--pairs", str(path), "--json", str(out),
                                      "--validators", "fact_spans"])
    assert result.exit_code == 1, result.output  # scored, but some lines were bad
    written = json.loads(out.read_text())
    assert written["pairs"] == 2 and len(written["bad_lines"]) == 2
    assert written["command"].startswith(f"autovalidators benchmark obedience --pairs {path} --json {out}")
    assert len(written["data_sha256"]["pairs"]) == 64
    # The shipped heuristic checks numbers against the context, so it flags the world year.
    assert written["validators"]["fact_spans"]["world_flagged"] == 2


@pytest.mark.parametrize("missing", ["--pairs"])
def test_a_missing_pairs_file_is_a_clear_error(tmp_path, missing):
    _register_commands()
    result = CliRunner().invoke(app, ["benchmark", "obedience", missing, str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "autovalidators prepare obedience" in " ".join(result.output.split())
