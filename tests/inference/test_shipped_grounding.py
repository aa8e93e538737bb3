"""The shipped fact-span model (`models/fact_spans`, task fact_spans_grounding) on hand-made cases:
what a user sees first. Real model, real cross-encoder, no torch."""

from __future__ import annotations

from pathlib import Path

import pytest

from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.results import SpanLabel
from autovalidators.inference.validators import load_validator

MODELS = Path(__file__).resolve().parents[2] / "models"
CONTEXT = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall and was "
           "designed by the engineering company of Gustave Eiffel. About 7 million people visit it every year."]
QUESTION = "Tell me about the Eiffel Tower."

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def validator():
    if load_manifest(MODELS / "fact_spans").task != "fact_spans_grounding":
        pytest.skip("models/fact_spans is not the grounding model")
    return load_validator("fact_spans", MODELS)


def _hallucinated_text(output) -> list[str]:
    return [s.text for s in output.spans if s.label is SpanLabel.HALLUCINATION]


def test_a_swapped_number_is_flagged_narrowly(validator):
    answer = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall. "
              "About 9 million people visit it every year.")
    output, = validator.predict([Case(id="n", question=QUESTION, context=CONTEXT, answer=answer)])
    assert output.source == "onnx" and output.hallucinated and output.hallucination_score >= 0.5
    marked = _hallucinated_text(output)
    assert any("9" in text for text in marked)
    assert sum(map(len, marked)) < len(answer) / 3  # the claim, not the answer
    assert not any("1889" in text or "330" in text for text in marked)


def test_a_faithful_answer_with_a_preamble_is_accepted(validator):
    answer = "Here is a summary of the text in 30 words:\nThe Eiffel Tower, completed in 1889 in Paris, is 330 metres tall."
    output, = validator.predict([Case(id="f", question=QUESTION, context=CONTEXT, answer=answer)])
    assert not output.hallucinated and output.hallucination_score < 0.5
    assert [s.label for s in output.spans][0] is SpanLabel.NOISE
    assert output.precision == pytest.approx(1.0)


def test_russian_answers_go_to_the_heuristic(validator):
    case = Case(id="ru", question="Когда построили башню?", context=["Эйфелева башня построена в 1889 году в Париже."],
                answer="Эйфелева башня построена в 1925 году.")
    output, = validator.predict([case])
    assert output.source == "heuristic" and output.hallucinated


PARAPHRASES = [
    "Finished in 1889 for the World's Fair, the Paris tower stands 330 metres high; Gustave Eiffel's engineering "
    "company designed it.",
    "Gustave Eiffel's engineering firm designed the tower, which stands 330 metres high and was finished in 1889 in "
    "Paris.",
    pytest.param("Each year roughly 7 million people visit the tower, which was completed in 1889 in Paris.",
                 marks=pytest.mark.xfail(strict=True, reason="the model flags this reordered, hedged restatement "
                                                             "(0.63); the heuristic does not: one reason it stays "
                                                             "the default")),
]


@pytest.mark.parametrize("answer", PARAPHRASES)
def test_a_faithful_paraphrase_is_not_flagged(validator, answer):
    output, = validator.predict([Case(id="p", question=QUESTION, context=CONTEXT, answer=answer)])
    assert not output.hallucinated, _hallucinated_text(output)


@pytest.mark.parametrize("answer", [p if isinstance(p, str) else p.values[0] for p in PARAPHRASES])
def test_the_shipped_default_passes_faithful_paraphrases(answer):
    """What the shipped gate config runs as fact_spans (the heuristic, `heuristics.prefer`)."""
    from autovalidators.inference.gate import Gate

    fact_spans = Gate.from_config_file(validators=["fact_spans"]).validators["fact_spans"]
    assert fact_spans.info.kind == "heuristic"
    output, = fact_spans.predict([Case(id="p", question=QUESTION, context=CONTEXT, answer=answer)])
    assert output.applies and not output.hallucinated


SWAPPED_NAMES = [
    # (context, faithful answer, the same answer with one name swapped)
    (CONTEXT, "The Eiffel Tower was designed by the engineering company of Gustave Eiffel and completed in 1889.",
     "The Eiffel Tower was designed by the engineering company of Gustave Eiffel and completed in 1889 in Lyon."),
    (["Эйфелева башня построена в 1889 году в Париже по проекту инженерной компании Гюстава Эйфеля."],
     "Эйфелева башня построена в 1889 году в Париже по проекту компании Гюстава Эйфеля.",
     "Эйфелева башня построена в 1889 году в Лионе по проекту компании Гюстава Эйфеля."),
]


@pytest.mark.parametrize("context, faithful, swapped", SWAPPED_NAMES, ids=["en", "ru"])
def test_the_shipped_gate_stops_a_swapped_name_and_serves_the_faithful_answer(context, faithful, swapped):
    """One wrong name in a sentence whose other words all stand in the context (the swapped answers of
    `prepare gate-sets`): the shipped default flags it and the shipped gate does not serve it."""
    from autovalidators.inference.gate import Gate

    gate = Gate.from_config_file()
    question = "Where and when was the Eiffel Tower built?" if context is CONTEXT else "Где и когда построили Эйфелеву башню?"
    good, bad = (gate.validate(Case(id=kind, question=question, context=context, answer=answer))
                 for kind, answer in (("good", faithful), ("bad", swapped)))
    assert good.decision == "ACCEPT", good.reason
    assert bad.decision != "ACCEPT" and bad.failure_type == "confident_hallucination", bad.reason
    flagged = [s["text"] for s in bad.to_dict()["validators"]["fact_spans"]["spans"] if s["label"] == "HALLUCINATION"]
    assert flagged and any(("Lyon" in text or "Лионе" in text) for text in flagged)
    if context is not CONTEXT:  # a Russian answer's span is the unsupported phrase, not its sentence
        assert flagged == ["Лионе"], flagged


RECORD = ('{"name": "Maeda", "address": "5 Hollister Ave", "city": "Goleta", "state": "CA", '
          '"categories": "Japanese, Sushi Bars", "stars": 4.5, "attributes": {"OutdoorSeating": false, '
          '"RestaurantsTakeOut": true}, "review_info": [{"review_stars": 5, "review_text": "The staff were '
          'friendly and the fish was fresh."}, {"review_stars": 4, "review_text": "Cozy place, a bit pricey."}]}')


def test_the_shipped_gate_serves_a_faithful_record_description_and_stops_a_wrong_attribute():
    """A data-to-text answer in the words people describe a record with ("customers praised",
    "located in ... California" for "CA"): served; the same answer claiming outdoor seating the record
    sets false, or a rating it never gives: not served, with the wrong sentence flagged. Before the
    framing words its sentences were flagged; before relevance stopped reading data-to-text requests
    it went to REVIEW validator_disagreement (grounding 1.0 against a relevance near zero)."""
    from autovalidators.inference.gate import Gate

    faithful = ("Maeda is a Japanese sushi bar located in Goleta, California, rated 4.5 stars. "
                "Customers praised the friendly staff and the fresh fish, and it offers take-out.")
    gate = Gate.from_config_file()
    question = "Write an objective overview of the business from the structured data."  # RAGTruth's request
    good = gate.validate(Case(id="good", question=question, context=[RECORD], answer=faithful))
    spans = good.to_dict()["validators"]["fact_spans"]["spans"]
    grounding = next(c for c in good.checks if c.name == "grounding")
    assert not [s for s in spans if s["label"] == "HALLUCINATION"] and grounding.passed, good.reason
    # The shipped relevance model scores this faithful overview near zero against the generic request,
    # so relevance does not judge data-to-text requests, and no agreement spread sends the grounded
    # answer to review.
    assert gate.validators["qa_relevance"].scores([(question, faithful)])[0] < 0.1
    assert not good.validators["qa_relevance"].applies
    assert good.decision == "ACCEPT", good.reason
    for wrong in ("It also offers outdoor seating.", "Reviewers rated it 2 stars on average."):
        bad = gate.validate(Case(id="bad", question=question, context=[RECORD], answer=f"{faithful} {wrong}"))
        assert bad.decision != "ACCEPT", (wrong, bad.reason)
        flagged = [s["text"] for s in bad.to_dict()["validators"]["fact_spans"]["spans"] if s["label"] == "HALLUCINATION"]
        assert flagged == [wrong], flagged


RAILWAY = ["The Trans-Siberian Railway connects Moscow with Vladivostok on the Pacific coast. Construction began in "
           "1891 under Tsar Alexander III and the main line was completed in 1916.",
           "The line is about 9,289 kilometres long, the longest railway line in the world. A journey from Moscow to "
           "Vladivostok takes about seven days and crosses eight time zones.",
           "The railway passes Lake Baikal, whose southern shore the Circum-Baikal section follows. It was electrified "
           "along its whole length in 2002."]
RAILWAY_ANSWER = (
    "The Trans-Siberian Railway links Moscow with Vladivostok on the Pacific coast. Work on it began in 1891 under "
    "Tsar Alexander III, and the main line was completed in 1916. At about 9,289 kilometres, it is the longest "
    "railway line in the world. The whole journey takes about seven days and crosses eight time zones. Along the "
    "way the line follows the southern shore of Lake Baikal. The railway was fully electrified in 2002.")


def test_the_shipped_gate_stops_a_long_answer_with_one_wrong_year_and_serves_the_faithful_one():
    """Six sentences, one of them with a wrong year: the length-weighted grounding stays above the QA
    minimum, so the shipped config's specifics_grounding (config 23 of inference/GATE_HISTORY.md) is
    what stops it; the same answer with every figure right is served."""
    from autovalidators.inference.config import load_gate_config
    from autovalidators.inference.gate import Gate

    question = "What is the Trans-Siberian Railway, and when and how was it built?"
    wrong_year = RAILWAY_ANSWER.replace("completed in 1916", "completed in 1905")
    gate = Gate.from_config_file()
    good, bad = (gate.validate(Case(id=kind, question=question, context=RAILWAY, answer=answer))
                 for kind, answer in (("good", RAILWAY_ANSWER), ("bad", wrong_year)))
    assert good.decision == "ACCEPT", good.reason
    assert (bad.decision, bad.failure_type) == ("REJECT", "confident_hallucination"), bad.reason
    assert "specifics_grounding" in bad.reason and bad.scores["grounding"] >= 0.75
    shipped = load_gate_config()
    assert shipped.tasks["QA"].minimums["specifics_grounding"] == 1.0
    without = shipped.model_copy(update={"tasks": {**shipped.tasks, "QA": shipped.tasks["QA"].model_copy(
        update={"minimums": {k: v for k, v in shipped.tasks["QA"].minimums.items() if k != "specifics_grounding"}})}})
    assert Gate(config=without).validate(Case(id="bad", question=question, context=RAILWAY,
                                              answer=wrong_year)).decision == "ACCEPT"
