"""The heuristic fallback: the known traps (digits, Cyrillic, shared vocabulary, P != R)."""

from __future__ import annotations

import pytest

from autovalidators.inference import heuristics
from autovalidators.inference.config import GateConfig
from autovalidators.inference.text import language_of, split_sentences, tokenize


def test_tokens_keep_digits_and_numbers_are_distinct_claims():
    stems = [t.stem for t in tokenize("Revenue was 67 million, not 69 million; 1,000 units at 3.5 each.")]
    assert "67000000" in stems and "69000000" in stems  # a number with its scale word is one claim
    assert "1000" in stems  # "1,000" and "1000" are one number
    assert "3.5" in stems


@pytest.mark.parametrize("text, numbers", [
    ("Население 1 350 000 человек.", ["1350000"]),
    ("Население 1\u00a0350\u00a0000 человек.", ["1350000"]),  # a no-break space, as Wikipedia writes it
    ("Длина 11\u202f164 мм, площадь 1 350,5 км².", ["11164", "1350.5"]),
    ("В 1941 году 12 танков, в 1941 200 самолётов.", ["1941", "12", "1941", "200"]),  # not thousands
    ("Около 2 500 млн рублей.", ["2500000000"]),
])
def test_thousands_set_apart_by_a_space_are_one_number(text, numbers):
    assert [t.stem for t in tokenize(text) if t.is_number] == numbers


def test_a_number_written_with_spaced_thousands_meets_its_other_spellings():
    context = "По переписи 2010 года в городе проживали 1350000 человек."
    same = heuristics.sentence_support("В городе проживали 1 350 000 человек.", context)[0]
    changed = heuristics.sentence_support("В городе проживали 1 360 000 человек.", context)[0]
    assert same.support == 1.0 and not same.unsupported_numbers
    assert changed.support <= heuristics.MISSING_CLAIM_CAP and changed.unsupported_numbers == ("1 360 000",)


def test_changed_number_is_not_supported():
    context = "The metropolitan area has a population of 67 million people."
    same = heuristics.sentence_support("The metropolitan area has 67 million people.", context)[0]
    changed = heuristics.sentence_support("The metropolitan area has 69 million people.", context)[0]
    assert same.support >= 0.9
    assert changed.support <= 0.3
    assert changed.unsupported_numbers == ("69 million",)


def test_a_name_the_context_never_uses_is_not_supported_however_long_the_sentence():
    context = ("The bridge was designed by John Bradfield and opened in Sydney in 1932, after eight years of "
               "construction by a workforce of about 1,400 men.")
    same = heuristics.sentence_support("The bridge was designed by John Bradfield and opened in Sydney in 1932, "
                                       "after eight years of construction.", context)[0]
    swapped = heuristics.sentence_support("The bridge was designed by John Bradfield and opened in Perth in 1932, "
                                          "after eight years of construction.", context)[0]
    assert same.support >= 0.9 and same.unsupported_names == ()
    # one word of fifteen, but the claim it makes is wrong: capped like a wrong number
    assert swapped.support <= 0.3 and swapped.unsupported_names == ("perth",)
    russian = "Мост спроектировал Джон Брэдфилд, и его открыли в Сиднее в 1932 году после восьми лет работ."
    moved = heuristics.sentence_support(russian.replace("Сиднее", "Перми"), russian)[0]
    assert heuristics.sentence_support(russian, russian)[0].support == pytest.approx(1.0)
    assert moved.support <= 0.3 and moved.unsupported_names == ("перми",)


@pytest.mark.parametrize("answer", [
    "Venezuelan officials attended the summit in Panama.",          # a form of a context word
    'To save them, select the files and click "Export" at once.',   # a capital after a quote
    "Collect your data: Ensure that it compares categories.",       # a capital after a colon
    "Officials of Prince George’s County attended the summit.",     # a typographic apostrophe
])
def test_forms_of_context_words_and_clause_openers_are_not_invented_names(answer):
    context = ("Officials of Prince George's County and of Venezuela attended the summit in Panama. To save "
               "them, select the files and click export at once. Collect your data and ensure that it compares "
               "categories.")
    support = heuristics.sentence_support(answer, context)[0]
    assert support.unsupported_names == () and support.support > 0.6


def test_a_typographic_apostrophe_is_an_apostrophe():
    assert [t.stem for t in tokenize("George’s, don’t")] == [t.stem for t in tokenize("George's, don't")]
    context = "The office is open on Mondays."
    assert heuristics.sentence_support("The office doesn’t open on Mondays.", context)[0].negation_mismatch


def test_cyrillic_is_tokenised_and_identical_russian_texts_are_identical():
    text = "Москва впервые упоминается в летописи в 1147 году."
    assert [t.text for t in tokenize(text)][:3] == ["москва", "впервые", "упоминается"]
    assert heuristics.sentence_support(text, text)[0].support == pytest.approx(1.0)
    assert heuristics.lexical_relevance(text, text) == pytest.approx(1.0)
    assert language_of(text) == "ru"


def test_russian_inflections_share_stems():
    context = "Основателем города считается князь Юрий Долгорукий."
    answer = "Основатель города — князь Юрий Долгорукий."
    assert heuristics.sentence_support(answer, context)[0].support >= 0.8


def test_negation_the_context_never_makes_is_not_supported():
    context = "Context engineering is used to build applications with language models."
    answer = "Context engineering has nothing to do with language models."
    assert heuristics.sentence_support(answer, context)[0].support <= 0.4


def test_long_texts_are_tokenised_once_and_no_caller_can_change_the_next_callers_tokens():
    context = "The tower opened in 1889 and is 330 metres tall. " * 10
    first = tokenize(context)
    first.clear()
    again = tokenize(context)
    assert again and again == tokenize(context) and again is not tokenize(context)
    assert [t.stem for t in again if not t.is_stopword][:4] == ["tower", "open", "1889", "330"]


def test_noise_sentences_are_recognised_in_both_languages():
    for filler in ("Dear customer, thank you for your question!", "Спасибо за ваш вопрос!", "I hope this helps!"):
        assert heuristics.sentence_support(filler, "unrelated context")[0].is_noise, filler


@pytest.mark.parametrize("preamble", [
    "Here is a summary of the article in 74 words:", "Here's the summary within 84 words:",
    "Sure! Here is the article summarized in 200 words:", "Вот краткое содержание статьи в 50 словах:"])
def test_preambles_that_announce_the_answer_are_noise(preamble):
    # LLM answers open with them; they claim nothing about the source, however many words they have
    supports = heuristics.sentence_support(preamble + "\nThe tower opened in 1889.", "The tower opened in 1889.")
    assert supports[-2].is_noise and not supports[-1].is_noise


@pytest.mark.parametrize("claim", ["Here is the answer: the office opens in 2027.", "Вот ответ: офис откроется в 2027 году.",
                                   "Here are the three factors: genetics, hormones and diet."])
def test_a_preamble_followed_by_its_claim_is_not_noise(claim):
    assert not heuristics.sentence_support(claim, "unrelated context")[0].is_noise


def test_precision_and_recall_are_different_quantities():
    context = "The tower is 330 metres tall. It opened in 1889. It was designed by Gustave Eiffel."
    answer = "The tower opened in 1889."
    recall = heuristics.fact_recall(answer, context)
    assert recall == pytest.approx(1 / 3)
    support = heuristics.sentence_support(answer, context)[0].support
    assert support == pytest.approx(1.0)  # everything said is supported, little of the context is said


def test_relevance_shares_one_vocabulary_and_detects_off_topic():
    question = "How do I reset my password?"
    on_topic = "Open Settings and choose Reset password; a link is sent to you."
    off_topic = "Our office is open from nine to five and parking is free."
    assert heuristics.lexical_relevance(question, on_topic) > heuristics.lexical_relevance(question, off_topic)
    assert heuristics.lexical_relevance(question, off_topic) < 0.5


def test_specificity_separates_concrete_from_hedged():
    concrete = "Context engineering was invented at MIT in 1987 by John Smith."
    vague = "It might possibly be something about computers, generally speaking."
    assert heuristics.specificity(concrete) > 0.5 > heuristics.specificity(vague)


@pytest.mark.parametrize("answer, expected", [
    ("I don't have enough information to answer that.", True),
    ("The context does not mention the Mars office.", True),
    ("К сожалению, у меня нет информации об этом.", True),
    ("Недостаточно данных, чтобы ответить.", True),
    ("В отрывке не назван конкретный изобретатель гранаты.", True),
    ("Yes, the Mars office opens in 2027.", False),
    ("I don't know for sure, but the Mars office opens on 12 May 2027 in Olympus Mons.", False),
])
def test_abstention_detection(answer, expected):
    assert heuristics.abstains(answer) is expected


def test_context_quality_measures_question_coverage():
    assert heuristics.context_quality("refund policy annual subscriptions", "") == 0.0
    assert heuristics.context_quality("What is the refund policy?", "Refund policy: 30 days.") == pytest.approx(1.0)
    assert heuristics.context_quality("What is the refund policy?", "We moved to Berlin.") == 0.0


def test_sentence_offsets_point_into_the_text():
    text = "First one. Второе предложение!  Third?"
    for sentence in split_sentences(text):
        assert text[sentence.start:sentence.end] == sentence.text
    assert len(split_sentences(text)) == 3


@pytest.mark.parametrize("text, sentences", [
    # Initials, titles and Latin abbreviations do not end a sentence before a capital...
    ("J. R. R. Tolkien wrote it. He was British.", ["J. R. R. Tolkien wrote it.", "He was British."]),
    ("Поэт А. С. Пушкин родился в Москве. Он писал стихи.",
     ["Поэт А. С. Пушкин родился в Москве.", "Он писал стихи."]),
    ("Dr. Smith works at Google. He is 40.", ["Dr. Smith works at Google.", "He is 40."]),
    ("Fruit, e.g. Apples, helps. Eat it.", ["Fruit, e.g. Apples, helps.", "Eat it."]),
    ("Он живёт в г. Москва. Это город.", ["Он живёт в г. Москва.", "Это город."]),
    ("See Fig. 2 for details. Then stop.", ["See Fig. 2 for details.", "Then stop."]),
    ("Ada Lovelace (b. 1815, d. 1852) wrote notes. They survive.",
     ["Ada Lovelace (b. 1815, d. 1852) wrote notes.", "They survive."]),
    ("Эво Моралес (род. 26 октября 1959) — политик. Он был президентом.",
     ["Эво Моралес (род. 26 октября 1959) — политик.", "Он был президентом."]),
    ("Мелек Ахмед-паша (ум. 1662) был визирем. Его знали все.",
     ["Мелек Ахмед-паша (ум. 1662) был визирем.", "Его знали все."]),
    ("Parks are free during Park Week (Apr. 18-26). Book early.",
     ["Parks are free during Park Week (Apr. 18-26).", "Book early."]),
    # ...but a sentence that starts after a letter, a year or a word that is also an abbreviation does.
    ("Take vitamin C. It helps.", ["Take vitamin C.", "It helps."]),
    ("В 1812 г. Наполеон вошёл в Москву.", ["В 1812 г.", "Наполеон вошёл в Москву."]),
    ("No. The answer is Paris.", ["No.", "The answer is Paris."]),
    ("He ate a lot of food. 3 days later he was ill.", ["He ate a lot of food.", "3 days later he was ill."]),
    ("He lives in the U.S. He works.", ["He lives in the U.S.", "He works."]),
    # A numbered list item is one sentence, its marker left out; a number ending a sentence stays.
    ("Follow these steps:\n1. Preheat the oven.\n12) Peel it. Step 3: Serve.",
     ["Follow these steps:", "Preheat the oven.", "Peel it.", "Serve."]),
    ("Шаг 3. Налейте воду. Do this. 2. Then that.", ["Налейте воду.", "Do this.", "Then that."]),
    ("It opened in 1990. See chapter 2. Then go.", ["It opened in 1990.", "See chapter 2.", "Then go."]),
])
def test_sentences_end_at_full_stops_not_at_initials_or_titles(text, sentences):
    found = split_sentences(text)
    assert [s.text for s in found] == sentences
    assert all(text[s.start:s.end] == s.text for s in found)


def test_a_list_items_number_is_no_claim_but_its_text_still_is():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    context = ["Preheat the oven to 200 degrees. Peel the garlic. Cut the tops off. Drizzle olive oil over them. "
               "Wrap them in foil. Roast for 40 minutes."]
    steps = ["Preheat the oven to 200 degrees.", "Peel the garlic.", "Cut the tops off.",
             "Drizzle olive oil over them.", "Wrap them in foil.", "Roast for 40 minutes."]
    faithful = "Here is how:\n" + "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
    [output] = HeuristicFactSpans().predict([Case(id="list", question="How to roast garlic?", context=context,
                                                   answer=faithful)])
    assert not output.hallucinated, [s.text for s in output.spans if s.label.value == "HALLUCINATION"]
    wrong = faithful.replace("40 minutes", "90 minutes")
    [output] = HeuristicFactSpans().predict([Case(id="list", question="How to roast garlic?", context=context,
                                                   answer=wrong)])
    assert [s.text for s in output.spans if s.label.value == "HALLUCINATION"] == ["Roast for 90 minutes."]


@pytest.mark.slow
def test_embedding_relevance_separates_answers_that_share_no_words():
    pytest.importorskip("sentence_transformers")
    from autovalidators.inference.embeddings import load_embedder
    from autovalidators.inference.validators.heuristic import HeuristicQARelevance
    from autovalidators.inference import Case

    validator = HeuristicQARelevance(load_embedder("required"))
    question = "When did the Eiffel Tower open?"
    on_topic = Case(id="a", question=question, context="", answer="Its doors first welcomed visitors in spring 1889.")
    off_topic = Case(id="b", question=question, context="", answer="Parking is free for visitors on weekdays.")
    lexical = HeuristicQARelevance()
    with_embeddings = validator.predict([on_topic, off_topic])
    assert with_embeddings[0].score > with_embeddings[1].score
    assert with_embeddings[0].score > lexical.predict([on_topic])[0].score
    assert validator.info.version.endswith("+minilm-embeddings")


@pytest.mark.parametrize("answer, question, expected", [
    ("I don't have information about the two main risks.", "What are the two main risks?", True),
    ("I don't have information about the two main risks.", "What are the main risks?", False),
    ("Я не знаю, каковы два главных риска.", "Каковы два главных риска?", True),
    ("Я не знаю, каковы три главных риска.", "Каковы два главных риска?", False),
    ("I don't know when the office opens in 2027.", "Does the office open in 2027?", True),
])
def test_an_abstention_may_restate_the_questions_numbers_but_not_add_one(answer, question, expected):
    assert heuristics.abstains(answer, question) is expected


def test_specificity_counts_dates_and_technical_terms_not_only_digits_and_names():
    vague = heuristics.specificity("The revolution began when people stormed the fortress, and the king lost power.")
    dated = heuristics.specificity("The king was executed in January, and the terror lasted until the summer.")
    technical = heuristics.specificity("Aspirin irreversibly inhibits cyclooxygenase, reducing thromboxane synthesis.")
    russian = heuristics.specificity("Король был казнён в январе, а террор продолжался до лета.")
    confident_at = GateConfig().specificity.confident_at
    assert vague < confident_at
    assert min(dated, technical, russian) >= confident_at
    # "may" the modal verb is not the month; "среди" (among) is not Wednesday.
    assert heuristics.specificity("It may rain, and it may not.") < confident_at
    assert not heuristics._DATE_WORD.match("среди") and not heuristics._DATE_WORD.match("маяк")


def test_a_stress_mark_does_not_split_a_russian_word():
    # TyDi's Russian questions carry stress marks ("Сраже́ние"); split, the word matched nothing and
    # a well-covered question read as a retrieval miss.
    words = [t.text for t in tokenize("Кто выиграл Сраже́ние при Энти́теме?")]
    assert words == ["кто", "выиграл", "сражение", "при", "энтитеме"]
    assert heuristics.context_quality("Кто выиграл Сраже́ние при Энти́теме?", "Сражение при Энтитеме выиграл Союз.") > 0.9


def test_a_soft_hyphen_or_zero_width_space_does_not_split_a_word_and_offsets_hold():
    # Web pages leave soft hyphens and zero-width spaces inside words; split there, the answer's
    # word read as two the context never uses.
    answer = "Инфор\u00adмация о прези\u200bденте"
    tokens = tokenize(answer)
    assert [t.text for t in tokens] == ["информация", "о", "президенте"]
    assert answer[tokens[0].start:tokens[0].end] == "Инфор\u00adмация"
    assert [t.stem for t in tokens] == [t.stem for t in tokenize("Информация о президенте")]


def test_the_tone_lexicon_reads_a_stressed_word_as_its_plain_spelling():
    from autovalidators.inference.validators.heuristic import normalize_for_lexicon, tone_lexicon

    assert tone_lexicon()["obscenity"].search(normalize_for_lexicon("Ну ты и ху́йло"))
    assert tone_lexicon()["insult"].search(normalize_for_lexicon("Ты иди́от"))


# Words that share a stem with abuse but name a liquid, a country, a dish, a composer, a folk art, a
# novel, a band, a fire-safety material, a blunt angle; adjectives said of things, not people. The heuristic tone validator (the fallback, and
# the lexicon the tone data prep labels with) flagged each of these before.
_NEUTRAL_HOMOGRAPHS = [
    "Ртуть — единственный металл, который при комнатной температуре остаётся жидкостью.",
    "Нигерия — самая населённая страна Африки; нигерийская нефть идёт на экспорт.",
    "Хачапури пекут с сулугуни; балет «Спартак» написал Арам Хачатурян.",
    "Хохломская роспись — народный промысел, хохлатая синица живёт в хвойных лесах.",
    "Иоганн Себастьян Бах родился в Эйзенахе; остров Себу лежит на Филиппинах.",
    "Тупой угол больше прямого; пациент жаловался на тупую боль, а тупая боль в боку прошла.",
    "В этом году хорошо уродилась пшеница; врождённое уродство стопы лечат ортопеды.",
    "Лохматый пёс выбежал к Лох-Несс; кретинизм вызван нехваткой йода.",
    "Малыш чмокнул маму в щёку.",
    "Moby-Dick is a novel by Herman Melville; Moby Dick is the whale.",
    "Treat the wood with a flame retardant; the Wankel engine has a rotor.",
    "Take out the trash on Tuesdays and put the trash bag in the trash can.",
    "A knee-jerk reaction; beef jerky; Coyote Ugly and Ugly Betty; a chink in the armour.",
    "Prick your finger with a sterile lancet to prepare the blood slide.",
    "Pussy Riot were sentenced in 2012; the Hui people live in Ningxia.",
    "The shares became worthless after the bankruptcy; it would be foolish to ignore the flood risk.",
    "The ugly truth about the deal; a disgusting smell from the drain; the pathetic fallacy in poetry.",
    "A dumb-bell press works the chest; the idiot box was invented in 1927.",
    "A pathetic assessment of the budget; the ugly Dickensian slums of London.",
]
_ABUSE = [
    "Ты тупой урод и лох.", "Да ты чмо, жиды и хачи виноваты.", "Сука, съебал отсюда!",
    "You are a jerk and a moron.", "You're trash, you prick.", "What a dick.", "Shut up, retard.",
    "u r pathetic", "What a worthless piece of garbage you are.", "She's so ugly.", "Stupid people everywhere.",
]


@pytest.mark.parametrize("text", _NEUTRAL_HOMOGRAPHS)
def test_the_heuristic_tone_validator_does_not_flag_words_that_only_share_a_stem_with_abuse(text):
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicTone

    [output] = HeuristicTone().predict([Case(id="t", question="", answer=text)])
    assert output.flagged == ()


@pytest.mark.parametrize("text", _ABUSE)
def test_the_heuristic_tone_validator_still_flags_the_abuse_those_stems_were_for(text):
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicTone

    [output] = HeuristicTone().predict([Case(id="t", question="", answer=text)])
    assert "toxicity" in output.flagged


def test_camel_case_keys_of_structured_context_read_as_words():
    # Data-to-text contexts are JSON ("RestaurantsTakeOut": true); answers say "offers take-out".
    assert [t.text for t in tokenize("RestaurantsTakeOut OutdoorSeating")] == ["restaurants", "take", "out",
                                                                              "outdoor", "seating"]
    assert [t.text for t in tokenize("NASA and Paris")] == ["nasa", "and", "paris"]  # no camel, no cut
    context = '{"OutdoorSeating": false, "RestaurantsReservations": true}'
    assert heuristics.context_quality("Is there outdoor seating?", context) == 1.0


def _labelled(spans):
    return [(s.label.value, s.text) for s in spans]


def test_abbreviated_months_and_weekdays_meet_their_full_names_and_the_sun_stays_the_sun():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    # A good RAGTruth summary (dev) whose abbreviations read as words the context never uses.
    context = ["And for Saturday and Sunday, national parks are free. It's all part of National Park Week, "
               "happening April 18 through April 26."]
    answer = "National parks are free on Sat. & Sun. during National Park Week (Apr. 18-26)."
    output = HeuristicFactSpans("sentence").predict([Case(id="1", question="", context=context, answer=answer)])[0]
    assert not output.hallucinated and [label for label, _ in _labelled(output.spans)] == ["FACT"]
    words = [t.text for t in tokenize("Выставка откроется 5 апр. 2015 г. Jan. 5 she left.")]
    assert "апрель" in words and "january" in words and "апр" not in words and "jan" not in words
    # Not an abbreviation where the full stop ends a sentence, or lower-case.
    assert [t.text for t in tokenize("The Earth orbits the Sun. It is a star. He sat. then left")] == \
        ["the", "earth", "orbits", "the", "sun", "it", "is", "a", "star", "he", "sat", "then", "left"]


def test_heuristic_span_modes_mark_the_same_sentences_with_the_same_scores():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    case = Case(id="1", question="", context=["The tower was completed in 1889 in Paris by Gustave Eiffel."],
                answer="The tower was completed in 1925 in Berlin by Gustave Eiffel. It is in Paris.")
    whole, phrases, named = (HeuristicFactSpans(mode).predict([case])[0]
                             for mode in ("sentence", "phrases", "named_phrases"))
    assert _labelled(whole.spans) == [("HALLUCINATION", "The tower was completed in 1925 in Berlin by Gustave Eiffel."),
                                      ("FACT", "It is in Paris.")]
    assert [t for label, t in _labelled(phrases.spans) if label == "HALLUCINATION"] == ["1925 in Berlin"]
    assert [t for label, t in _labelled(named.spans) if label == "HALLUCINATION"] == ["1925 in Berlin"]
    # Narrowing moves characters, never a score: the gate decides the same.
    for other in (phrases, named):
        assert (other.precision, other.hallucination_score, other.hallucinated) == \
            (whole.precision, whole.hallucination_score, whole.hallucinated)


def test_named_phrases_keep_only_phrases_with_an_unsupported_number_or_name_else_the_sentence():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    context = ["The committee met on Monday and approved the budget."]
    invented = Case(id="1", question="", context=context,
                    answer="The committee met on Monday, praised Olga Petrova, and approved the budget quickly.")

    def flagged(mode: str, case: Case) -> list[str]:
        return [t for label, t in _labelled(HeuristicFactSpans(mode).predict([case])[0].spans) if label == "HALLUCINATION"]

    assert flagged("phrases", invented) == ["praised Olga Petrova", "quickly"]
    assert flagged("named_phrases", invented) == ["praised Olga Petrova"]
    unnamed = Case(id="2", question="", context=context,
                   answer="The committee quarrelled loudly, postponed voting indefinitely and disbanded.")
    spans = _labelled(HeuristicFactSpans("named_phrases").predict([unnamed])[0].spans)
    assert spans == [("HALLUCINATION", unnamed.answer)]


def test_an_unknown_span_mode_is_refused():
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    with pytest.raises(ValueError, match="span_mode 'words'"):
        HeuristicFactSpans("words")


def test_the_default_heuristic_marks_a_russian_swap_narrowly_and_an_english_sentence_whole():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    russian = Case(id="ru", question="", context=["Башня была построена в 1889 году в Париже по проекту Густава Эйфеля."],
                   answer="Башня была построена в 1925 году в Париже по проекту Густава Эйфеля.")
    english = Case(id="en", question="", context=["The tower was completed in 1889 in Paris by Gustave Eiffel."],
                   answer="The tower was completed in 1925 in Paris by Gustave Eiffel.")
    default = HeuristicFactSpans()
    ru, en = default.predict([russian, english])
    assert [t for label, t in _labelled(ru.spans) if label == "HALLUCINATION"] == ["1925"]
    assert [t for label, t in _labelled(en.spans) if label == "HALLUCINATION"] == [english.answer]
    # One mode everywhere on request; the scores never depend on the mode.
    whole = HeuristicFactSpans(language_modes={}).predict([russian])[0]
    assert _labelled(whole.spans) == [("HALLUCINATION", russian.answer)]
    assert (whole.precision, whole.hallucination_score) == (ru.precision, ru.hallucination_score)
    with pytest.raises(ValueError, match="span_mode 'words'"):
        HeuristicFactSpans(language_modes={"ru": ("words", 1)})


SANTA_PRASSEDE = ("Базилика Санта-Прасседе была построена папой Пасхалием I около 817 года и в общих чертах "
                  "сохранила свой первоначальный облик.")


@pytest.mark.parametrize("sentence, flagged", [
    ("В отрывке точная дата создания капеллы не указана.", False),
    # the question's name, restated: still only what the passage lacks
    ("В приведённом фрагменте капелла святого Зенона не упоминается.", False),
    # a name neither the passage nor the question holds is a claim, whatever the phrasing
    ("В отрывке не сказано, что капеллу расписал Микеланджело.", True),
    ("В тексте не говорится, что базилику перестроили в 1950 году.", True),
    # no phrase of a source lacking something: the unsupported claim is flagged as before
    ("Капелла была создана в 1950 году.", True),
])
def test_a_russian_sentence_that_only_says_what_the_passage_lacks_is_noise(sentence, flagged):
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    case = Case(id="ru", question="Когда была создана капелла святого Зенона в базилике Санта-Прасседе?",
                context=[SANTA_PRASSEDE], answer=f"{sentence} Базилика построена около 817 года.")
    output = HeuristicFactSpans().predict([case])[0]
    assert output.hallucinated is flagged
    if not flagged:
        assert _labelled(output.spans)[0] == ("NOISE", sentence) and output.precision == 1.0
    # English keeps reading such a sentence as a claim (measured held out; it did not carry there).
    english = Case(id="en", question="When was the chapel built?", context=["The basilica was built around 817."],
                   answer="The passage does not state when the chapel was built.")
    assert HeuristicFactSpans().predict([english])[0].hallucinated
    assert not HeuristicFactSpans(source_lacks_languages=frozenset({"en"})).predict([english])[0].hallucinated


def test_a_data_to_text_paraphrase_is_not_flagged_but_a_wrong_number_or_negation_still_is():
    from autovalidators.inference.case import Case
    from autovalidators.inference.validators.heuristic import TASK_SUPPORTED_AT, HeuristicFactSpans

    record = ('{"name": "Maeda", "categories": "Japanese, Sushi Bars", "city": "Portland", "ambience": "cozy, quiet", '
              '"stars": 4.5, "review": "The staff were friendly and the fish was fresh."}')
    paraphrase = "Expect a cozy sushi bar with attentive waiters and fresh fish."  # support 0.556
    # Structured context: Data2txt, flagged below TASK_SUPPORTED_AT's 0.45, so the paraphrase stands.
    data2txt = Case(id="d", question="", context=[record], answer=paraphrase)
    assert TASK_SUPPORTED_AT["Data2txt"] < 0.55
    default = HeuristicFactSpans()
    assert not default.predict([data2txt])[0].hallucinated
    uniform = HeuristicFactSpans(task_supported_at={}).predict([data2txt])[0]
    assert uniform.hallucinated and _labelled(uniform.spans) == [("HALLUCINATION", paraphrase)]
    # The threshold moves flags, never the answer's share of support.
    assert uniform.precision == default.predict([data2txt])[0].precision
    # The same sentence, with the same support, over prose (a summary) keeps SUPPORTED_AT and is flagged.
    prose = Case(id="s", question="", context=["Maeda is a Japanese sushi bar in Portland. The staff were friendly "
                                                 "and the fish was fresh; the ambience is cozy and quiet."],
                 answer=paraphrase)
    assert heuristics.sentence_support(paraphrase, prose.context_text)[0].support == pytest.approx(5 / 9)
    assert default.predict([prose])[0].hallucinated
    # A wrong rating (support capped at 0.3) and a negation the record never makes (0.4) still flag.
    for wrong in ("Maeda is a cozy Japanese sushi bar in Portland rated 3.5 stars.",
                  "Maeda in Portland never serves fresh fish."):
        assert default.predict([Case(id="w", question="", context=[record], answer=wrong)])[0].hallucinated, wrong


@pytest.mark.parametrize("value", [0.3, 0.4, 1.5])
def test_a_support_threshold_at_or_below_a_cap_is_refused(value):
    from autovalidators.inference.validators.heuristic import HeuristicFactSpans

    with pytest.raises(ValueError, match="must lie in"):
        HeuristicFactSpans(supported_at=value)
    with pytest.raises(ValueError, match="must lie in"):
        HeuristicFactSpans(task_supported_at={"Data2txt": value})


def test_a_record_is_described_in_framing_words_and_its_state_code_by_name_but_claims_are_still_checked():
    record = ('{"name": "Maeda", "city": "Goleta", "state": "CA", "categories": "Japanese, Sushi Bars", '
              '"review_info": [{"review_text": "The staff were friendly and the fish was fresh."}]}')

    def support(answer: str, context: str = record) -> float:
        return heuristics.sentence_support(answer, context)[0].support

    # Who wrote the reviews and what they did with words: no claim of its own.
    assert support("Customers praised the friendly staff and mentioned the fresh fish.") == 1.0
    assert support("Maeda is a sushi bar located in Goleta, California.") == 1.0  # "CA"
    # The claims beside the framing: a rating the record never gives, a state it does not name.
    assert support("Customers praised the friendly staff and rated it 3.5 stars.") <= heuristics.MISSING_CLAIM_CAP
    assert support("Maeda is a sushi bar located in Goleta, Nevada.") <= heuristics.MISSING_CLAIM_CAP
    assert support("Customers praised the sushi chef's famous omakase.") < 0.6
    # Prose is not a record: the same framing words count as claims there.
    prose = "Maeda is a Japanese sushi bar in Goleta. The staff were friendly and the fish was fresh."
    assert support("Customers praised the friendly staff and mentioned the fresh fish.", prose) < 1.0


LONG_CONTEXT = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall. "
                "Gustave Eiffel's company designed and built it. About seven million people visit it each year.")


def test_specifics_grounding_reads_the_worst_sentence_not_the_average():
    faithful = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall. "
                "Gustave Eiffel's company designed and built it.")
    # Six faithful sentences' worth of support cannot hide one sentence's wrong year.
    one_wrong = faithful.replace("It is 330", "It is 300")
    assert heuristics.specifics_grounding(faithful, LONG_CONTEXT) == 1.0
    assert heuristics.specifics_grounding(one_wrong, LONG_CONTEXT) == 0.0
    # One of a sentence's four specifics unknown: a name the context never uses beside known ones.
    assert heuristics.specifics_grounding("Designed by Gustave Eiffel and Koechlin in 1889.", LONG_CONTEXT) \
        == pytest.approx(3 / 4)


def test_specifics_grounding_counts_what_the_question_named_as_known_and_skips_filler():
    answer = "Thank you for asking! The tower at the Champ de Mars is 330 metres tall."
    assert heuristics.specifics_grounding(answer, LONG_CONTEXT) < 1.0
    assert heuristics.specifics_grounding(answer, LONG_CONTEXT, "How tall is the tower on the Champ de Mars?") == 1.0
    # No number or name at all: nothing specific to get wrong.
    assert heuristics.specifics_grounding("It is very tall and popular.", LONG_CONTEXT) == 1.0


def test_specifics_grounding_of_russian_answers():
    context = "Эйфелева башня построена в 1889 году в Париже."
    answer = "Башня построена в 1889 году. В отрывке точная высота башни не указана."
    assert heuristics.specifics_grounding(answer, context, "Какая высота у башни?", frozenset({"ru"})) == 1.0
    assert heuristics.specifics_grounding(answer + " Она открылась в 1890 году.", context, "", frozenset({"ru"})) == 0.0


def test_sentence_support_read_twice_is_the_same_and_cannot_be_changed_by_a_caller():
    # The gate reads a case's support twice (fact spans, then specifics_grounding); the second read is
    # served from a cache, so what one caller does to its list must not reach the next.
    context = "The Eiffel Tower was completed in 1889. It is 330 metres tall."
    first = heuristics.sentence_support("It was completed in 1889. It is 300 metres tall.", context)
    first.clear()
    again = heuristics.sentence_support("It was completed in 1889. It is 300 metres tall.", context)
    assert [round(s.support, 3) for s in again] == [1.0, heuristics.MISSING_CLAIM_CAP]
    with pytest.raises(AttributeError):
        again[0].support = 1.0  # frozen records
