"""The abstention signal: the shipped model, its featuriser, the phrase-list fallback and the gate's use of it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from autovalidators.inference import Case, Decision, FailureType, Gate, heuristics
from autovalidators.inference.abstention import (
    AbstentionModel, AbstentionOutput, PhraseListAbstention, load_abstention,
)
from autovalidators.inference.abstention_features import FeatureSpec, feature_strings, featurize, normalize
from autovalidators.inference.manifest import ManifestError
from autovalidators.inference.validators.base import ValidatorInfo

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "abstention"

# Refusals in wordings the phrase list does not know (the examples among them), en and ru.
REFUSALS = [
    "I don't have enough information in the provided documents to answer that.",
    "The provided documents do not say.",
    "That's not something I can find in the sources.",
    "The documents you gave me are about something else entirely, so I can't say.",
    "Unfortunately, the knowledge base has nothing about Mars offices.",
    "Данных для ответа недостаточно.",
    "В предоставленных материалах об этом ничего не сказано",
    "К сожалению, у меня нет информации о стоимости доставки на Марс.",
    "Этого я не нашёл в источниках 🙂",
]
# Answers that assert something, hedged or after a partial refusal, must not count as abstaining.
ASSERTING = [
    "I'm not sure, but it opens in 2027.",
    "There is no information on the date, but the office will have 12 floors.",
    "Yes, the Mars office opens in 2027.",
    "Paris.",
    "The Eiffel Tower opened on 31 March 1889.",
    "The museum is not open on Mondays.",
    "Не уверена, но, кажется, офис откроется в 2027 году.",
    "Нет данных о дате, но в офисе будет 12 этажей.",
    "Ответа в документах нет, однако известно, что офис откроется в 2027 году.",
    "Москва впервые упоминается в летописи в 1147 году.",
]


@pytest.fixture(scope="module")
def model() -> AbstentionModel:
    detector = load_abstention(ROOT / "models", threads=1)
    assert isinstance(detector, AbstentionModel), "models/abstention should hold the shipped model"
    return detector


def cases(texts, question=""):
    return [Case(id=str(i), question=question, answer=t) for i, t in enumerate(texts)]


@pytest.mark.parametrize("text", REFUSALS)
def test_paraphrased_refusals_abstain(model, text):
    (output,) = model.predict(cases([text]))
    assert output.abstains and output.source == "onnx" and 0.0 <= output.probability <= 1.0


@pytest.mark.parametrize("text", ASSERTING)
def test_hedged_and_partial_answers_assert(model, text):
    (output,) = model.predict(cases([text]))
    assert not output.abstains


def test_scores_do_not_depend_on_the_batch(model):
    texts = REFUSALS + ASSERTING
    together = model.probabilities(texts)
    alone = np.array([model.probabilities([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_empty_answer_declines_nothing(model):
    outputs = model.predict(cases(["", "   "]))
    assert [(o.abstains, o.probability) for o in outputs] == [(False, None), (False, None)]


@pytest.mark.parametrize("text", [
    "我不知道，文件里没有提到。", "لا أعرف، المستندات لا تذكر ذلك", "🤷🤷🤷", "\u200b\u200d\ufeff", "\x00\x07 control",
    "Mixed 中文 and русский and عربي 🙂", "a" * 10_000, "1" * 5000,
])
def test_odd_scripts_give_a_clear_result(model, text):
    (output,) = model.predict(cases([text]))
    assert isinstance(output.abstains, bool)
    assert output.probability is None or 0.0 <= output.probability <= 1.0


def test_look_alike_letters_and_invisible_characters_read_as_the_plain_text():
    spec = FeatureSpec()
    plain = feature_strings("нет данных, I don't know", spec, phrase_hit=True)
    # A Latin "a" inside Cyrillic, a Cyrillic "о" inside Latin, zero-width spaces.
    disguised = feature_strings("нет дaнных, I d\u200bоn't\u200b know", spec, phrase_hit=True)
    assert disguised == plain


def test_stress_marks_read_as_the_plain_text_and_accented_latin_letters_stay(model):
    spec = FeatureSpec()
    stressed = "Нет да\u0301нных: в предоставленных материа\u0301лах об этом ничего не ска\u0301зано."
    plain = "Нет данных: в предоставленных материалах об этом ничего не сказано."
    assert feature_strings(stressed, spec, phrase_hit=False) == feature_strings(plain, spec, phrase_hit=False)
    assert model.predict(cases([stressed])) == model.predict(cases([plain]))
    assert model.predict(cases([stressed]))[0].abstains
    # The phrase list (the fallback, and one of the model's features) reads the plain spelling too.
    assert heuristics.abstains("Не зна\u0301ю, в документах об этом ничего нет.")
    # "café" typed with a combining accent is the precomposed "café", not "cafe".
    assert (feature_strings("cafe\u0301", spec, phrase_hit=False) == feature_strings("caf\u00e9", spec, phrase_hit=False)
            != feature_strings("cafe", spec, phrase_hit=False))


def test_five_megabyte_answer_is_read_as_head_and_tail(model):
    huge = "I don't know. " + "The office opens in 2027 and has 12 floors. " * 120_000
    assert len(huge) > 5_000_000
    started = time.perf_counter()
    (output,) = model.predict(cases([huge]))
    assert time.perf_counter() - started < 5.0
    assert output.abstains is False
    text, long = normalize(huge, FeatureSpec().max_chars)
    assert long and len(text) <= FeatureSpec().max_chars + 1
    assert "#long" in feature_strings(huge, FeatureSpec(), phrase_hit=False)


def test_featurize_is_deterministic_and_normalised():
    spec = FeatureSpec(hash_dim=1 << 12)
    (ids, values), = featurize(["I don't have enough information."], spec, [True])
    (ids2, values2), = featurize(["I don't have enough information."], spec, [True])
    assert np.array_equal(ids, ids2) and np.array_equal(values, values2)
    assert ids.max() < spec.hash_dim and abs(float(np.linalg.norm(values)) - 1.0) < 1e-5


def test_featurizer_file_with_unknown_keys_is_refused():
    with pytest.raises(ValueError, match="unknown key"):
        FeatureSpec.from_dict({"hash_dim": 16, "tokenizer": "x"})


def test_latency_is_well_under_five_ms(model):
    text = [REFUSALS[0]]
    model.predict(cases(text))
    samples = []
    for _ in range(30):
        started = time.perf_counter()
        model.predict(cases(text))
        samples.append(time.perf_counter() - started)
    assert float(np.median(samples)) < 0.005


def test_manifest_describes_the_model():
    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    assert manifest["task"] == "abstention" and manifest["labels"] == ["abstains"]
    assert (SHIPPED / "model.onnx").stat().st_size < 40 * 2**20
    assert 0.0 < manifest["thresholds"]["abstains"] < 1.0


# ----- fallback and the gate ---------------------------------------------------------------------

def test_absent_model_falls_back_to_the_phrase_list(tmp_path):
    detector = load_abstention(tmp_path)
    assert isinstance(detector, PhraseListAbstention)
    (output,) = detector.predict(cases(["I don't know."]))
    assert output == AbstentionOutput(True, None, "heuristic")
    gate = Gate(models_dir=tmp_path)
    result = gate.validate(Case(id="1", question="q?", answer="I don't know."))
    assert "abstention" in result.meta["fallback"]
    assert result.meta["signals"]["abstains"] is True


def test_a_tampered_model_folder_is_refused(tmp_path):
    folder = tmp_path / "abstention"
    shutil.copytree(SHIPPED, folder)
    (folder / "featurizer.json").write_text('{"hash_dim": 16}')
    with pytest.raises(ManifestError, match="sha256"):
        load_abstention(tmp_path)


class Scripted:
    """An abstention detector that says what it is told: the gate must follow it on every path."""

    info = ValidatorInfo("abstention", "onnx", "scripted-1", "0" * 64)

    def __init__(self, abstains: bool):
        self.abstains = abstains

    def predict(self, batch):
        return [AbstentionOutput(self.abstains, 1.0 if self.abstains else 0.0, "onnx") for _ in batch]


@pytest.fixture(scope="module")
def heuristic_validators(tmp_path_factory):
    return Gate(models_dir=tmp_path_factory.mktemp("no-models")).validators


MARS_Q = "Will the company support the Mars office?"
REFUND_Q = "What is the refund policy for annual subscriptions?"
COVERING = "Annual subscriptions can be refunded within 30 days of purchase. Refunds go to the original card."


@pytest.mark.parametrize("abstains,context,question,expected", [
    (True, "", MARS_Q, (Decision.REVIEW, FailureType.POOR_RETRIEVAL)),             # no context
    (False, "", MARS_Q, (Decision.REJECT, FailureType.MISSING_ABSTENTION)),
    (True, "Our headquarters moved to Berlin in 2019.", REFUND_Q, (Decision.REVIEW, FailureType.POOR_RETRIEVAL)),
    (True, COVERING, REFUND_Q, (Decision.REVIEW, FailureType.INCOMPLETE)),         # needless abstention
], ids=["no-context-abstains", "no-context-asserts", "irrelevant-context-abstains", "needless-abstention"])
def test_the_gate_takes_abstains_from_the_detector(heuristic_validators, abstains, context, question, expected):
    gate = Gate(instances=heuristic_validators, abstention=Scripted(abstains))
    # The answer's words say nothing either way: the decision follows the detector alone.
    result = gate.validate(Case(id="x", question=question, context=context, answer="Hmm, well."))
    assert (result.decision, result.failure_type) == expected
    assert result.meta["signals"]["abstains"] is abstains
    assert gate.models["abstention"]["version"] == "scripted-1"


@pytest.mark.parametrize("answer,expected", [
    ("I don't have enough information in the provided documents to answer that.", FailureType.POOR_RETRIEVAL),
    ("Данных для ответа недостаточно.", FailureType.POOR_RETRIEVAL),
    ("I'm not sure, but it opens in 2027.", FailureType.MISSING_ABSTENTION),
    ("There is no information on the date, but the office will have 12 floors.", FailureType.MISSING_ABSTENTION),
])
def test_mars_office_paraphrases_with_the_shipped_model(heuristic_validators, model, answer, expected):
    gate = Gate(instances=heuristic_validators, abstention=model)
    result = gate.validate(Case(id="mars", question=MARS_Q, context="", answer=answer))
    assert result.failure_type is expected


def test_empty_question_is_fine(heuristic_validators, model):
    gate = Gate(instances=heuristic_validators, abstention=model)
    result = gate.validate(Case(id="e", question="", context="", answer="Данных для ответа недостаточно."))
    assert result.decision is Decision.REVIEW and result.meta["signals"]["abstains"] is True


def test_odd_inputs_through_the_whole_shipped_gate():
    """Mixed scripts, invisible characters, look-alikes and an empty question: one clear result each."""
    gate = Gate()
    odd = ["我不知道，文件里没有提到。", "لا أعرف، المستندات لا تذكر ذلك", "🤷 🙏 🙂", "\u200b\u200d\ufeff",
           "Нет дaнных (Latin a) \u200bдля ответа.", "Mixed 中文 русский عربي 2027 🙂"]
    batch = [Case(id=str(i), question="" if i % 2 else "Когда откроется офис?", context="" if i % 3 else "Офис.",
                  answer=text) for i, text in enumerate(odd)]
    results = gate.validate_batch(batch)
    assert [r.id for r in results] == [c.id for c in batch]
    for result in results:
        assert result.decision in set(Decision)
        assert isinstance(result.meta["signals"]["abstains"], bool)
        json.dumps(result.to_dict())  # always valid JSON
