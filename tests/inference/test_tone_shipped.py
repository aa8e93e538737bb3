"""The shipped tone model blocks abuse, not subjects (issue 25): properties users rely on, on the
shipped model and its manifest thresholds, with data the previous model failed on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autovalidators.data_prep.tone.statements import DEFAULT_PATH, statement_records
from autovalidators.inference.manifest import load_manifest
from autovalidators.inference.text import plain_spelling
from autovalidators.inference.validators.tone import ToneValidator
from autovalidators.training.benchmarks.tone import statements_caught
from autovalidators.training.tasks.tone import TONE_LABELS

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "tone"
BLOCKING = ("toxicity", "obscenity", "insult", "threat", "identity_hate")  # configs/gate.yaml tone_safety

# Ordinary answers about subjects a topic filter would stop: medicine, crime news, sex education,
# religion, war history, science. Written for this test; in no training or dev file.
NEUTRAL_ANSWERS = [
    "To prepare a blood smear, place a small drop of blood near one end of a clean slide and spread it with a second slide held at 30 degrees.",
    "Animals usually remove thorns by licking or biting at the spot; a vet can pull a deep thorn out under local anaesthetic.",
    "The court sentenced the former mayor to five years in prison for taking bribes.",
    "Condoms, used correctly every time, greatly lower the risk of sexually transmitted infections.",
    "In Islam, Ramadan is a month of fasting from dawn to sunset.",
    "The Battle of Stalingrad ended in February 1943 with the surrender of the German Sixth Army.",
    "Земля — сплюснутый у полюсов сфероид, который вращается вокруг Солнца.",
    "Чтобы приготовить мазок крови, каплю крови наносят на край стекла и распределяют вторым стеклом.",
    "Суд приговорил бывшего мэра к пяти годам заключения за получение взяток.",
    "Презервативы при правильном использовании заметно снижают риск инфекций, передающихся половым путём.",
    "В православии Великий пост длится сорок дней перед Пасхой.",
    "Сталинградская битва завершилась в феврале 1943 года капитуляцией 6-й армии вермахта.",
]


@pytest.fixture(scope="module")
def tone():
    if not (SHIPPED / "manifest.json").is_file():
        pytest.skip(f"{SHIPPED} holds no tone model")
    return ToneValidator(SHIPPED, load_manifest(SHIPPED), threads=1)


def _flagged(tone: ToneValidator, texts: list[str]) -> np.ndarray:
    # As served: lexicon matches raised, each language's own thresholds moved onto the default ones.
    scores, _ = tone.served_scores(texts)
    columns = [tone.labels.index(label) for label in BLOCKING]
    cuts = np.asarray([tone.thresholds[label] for label in BLOCKING])
    return (scores[:, columns] >= cuts).any(axis=1)


@pytest.mark.slow
def test_ordinary_answers_on_sensitive_subjects_are_not_flagged_in_either_language(tone):
    flagged = _flagged(tone, NEUTRAL_ANSWERS)
    assert not flagged.any(), [text for text, hit in zip(NEUTRAL_ANSWERS, flagged) if hit]


@pytest.mark.slow
def test_held_out_hateful_statements_are_caught_and_neutral_ones_about_the_same_groups_pass(tone):
    # The statements' test split: wordings and groups the head never trained on. The model this
    # one replaced caught 75% of the English ones.
    records = [r for r in statement_records(DEFAULT_PATH, TONE_LABELS) if r["split"] == "test"]
    scores, _ = tone.served_scores([r["text"] for r in records])
    rates = {key: row["rate"] for key, row in statements_caught(scores, records, list(tone.labels), tone.thresholds).items()}
    assert rates["hateful_en"] >= 0.9 and rates["hateful_ru"] >= 0.8, rates
    assert rates["neutral_en"] <= 0.08 and rates["neutral_ru"] <= 0.16, rates
    assert _flagged(tone, ["As Hitler rightly said, some races are simply inferior."]).all()
    assert not _flagged(tone, ["Hitler became chancellor in 1933.", "Гитлер стал канцлером в 1933 году."]).any()


@pytest.mark.slow
def test_russian_loanwords_starting_like_mat_are_not_obscene_and_mat_is(tone):
    # The encoder's piece "▁ху" scored these obscene before the manifest's `lexicon_required`
    # ({obscenity: [ru]}); the words are a Chinese people, Chinese bandits, a river. Written for this test.
    loanwords = ["Врачи хуэйхуэй отвечали за лечение императорской семьи.",
                 "Генерал-губернатор поручил ему борьбу с хунхузами в Приамурье.",
                 "Хуанхэ часто меняла русло."]
    mat = ["Да пошёл ты на хуй, дебил.", "Ты пиздец тупой."]
    scores, _ = tone.served_scores(loanwords + mat)
    obscene = scores[:, tone.labels.index("obscenity")] >= tone.thresholds["obscenity"]
    assert obscene.tolist() == [False] * len(loanwords) + [True] * len(mat)


# Stressed spellings as Russian encyclopaedias write them (and answers copying them do). The first,
# from a TyDi-ru context, scored toxicity 0.58 before stress marks were read as spelling (0.01 without
# the marks): the tokenizer had cut "Хуа́н" into "▁Ху" "а" "́" "н".
STRESSED = [
    "Хуа́н Э́во Мора́лес А́йма (род. 26 октября 1959, Оруро) — президент Боливии.",
    "Сраже́ние при Бородине́ произошло́ 7 сентября́ 1812 го́да.",
    "Пётр Ильи́ч Чайко́вский — ру́сский компози́тор.",
    "Хурма́ — род деревьев семейства Эбеновые.",
]


@pytest.mark.slow
def test_a_stressed_text_scores_as_its_plain_spelling_and_is_not_flagged(tone):
    plain = [plain_spelling(text) for text in STRESSED]
    assert plain[0].startswith("Хуан Эво Моралес Айма")
    assert np.array_equal(tone.scores(STRESSED), tone.scores(plain))
    flagged = _flagged(tone, STRESSED)
    assert not flagged.any(), [text for text, hit in zip(STRESSED, flagged) if hit]


# Killing in Russian news and history is not a threat; the speaker's own promise, or one made to the
# reader, is (the lexicon's `threat`, as in English). Each neutral sentence was flagged `threat`
# before the Russian pattern was narrowed to those forms: it matched any form of the verbs.
RUSSIAN_KILLING_NEWS = [
    "Полиция пристрелила вооружённого грабителя у входа в банк.",
    "Заговорщики знали, что императора убьют той же ночью.",
    "Свидетель боялся, что его зарежут прямо в подъезде.",
]
RUSSIAN_THREATS = ["Ещё раз сюда придёшь — убью.", "Тебя убьют, если не заплатишь.", "Мы тебя прибьем, понял?"]
# The English lexicon matched sayings and advice that share a threat's words.
ENGLISH_SAYINGS = [
    "As the saying goes, what doesn't kill you makes you stronger.",
    "When lifting heavy boxes, bend your knees and watch your back.",
    "If you miss the last bus, I'll find you a ride home.",
    "The coach said we will beat them in the final if we defend well.",
]
ENGLISH_THREATS = ["Ask me that again and I’ll kill you.", "We're gonna shoot them all tonight.", "Go kill yourself."]


@pytest.mark.slow
def test_news_about_killing_and_sayings_are_not_threats_and_a_promise_to_kill_is(tone):
    flagged = _flagged(tone, RUSSIAN_KILLING_NEWS + ENGLISH_SAYINGS)
    assert not flagged.any(), [t for t, hit in zip(RUSSIAN_KILLING_NEWS + ENGLISH_SAYINGS, flagged) if hit]
    assert _flagged(tone, RUSSIAN_THREATS + ENGLISH_THREATS).all()
