"""Paraphrase families for the abstention data (en, ru), written for this project.

Each refusal template is one *family*: the split holds families out whole, so the held-out score
says how the model does on wordings it never saw. Slots: `{topic}` (a noun phrase), `{clause}`
(an indirect question), `{docs}` (a plural source: "the provided documents"), `{doc}` (a singular
one: "the context"); Russian uses `{topic_prep}` (prepositional case: "о доставке на Марс"),
`{docs_in}` ("в предоставленных документах") and `{docs_nom}` ("предоставленные документы").

Hard negatives assert something: hedged claims (HEDGES), refusal + claim (CONTRASTS) and plain
claims (CLAIMS, plus real answers read from the datasets).
"""

from __future__ import annotations

TOPICS = {
    "en": [
        ("the Mars office", "when the Mars office opens"), ("the refund policy", "how refunds work"),
        ("the launch date", "when the product launches"), ("the CEO's salary", "how much the CEO earns"),
        ("delivery to Mars", "how much delivery to Mars costs"), ("the warranty", "how long the warranty lasts"),
        ("the new branch", "where the new branch will be"), ("the 2024 budget", "what the 2024 budget was"),
        ("parking", "whether parking is free"), ("the password reset", "how to reset the password"),
        ("the merger", "whether the merger went ahead"), ("the author", "who wrote the report"),
        ("the museum's opening hours", "when the museum is open"), ("the side effects", "what the side effects are"),
        ("the population", "how many people live there"), ("the train schedule", "when the last train leaves"),
        ("the company's founder", "who founded the company"), ("the API rate limit", "what the API rate limit is"),
        ("the exam results", "when the exam results come out"), ("the office address", "where the office is"),
        ("the release notes", "what changed in the release"), ("the treaty", "when the treaty was signed"),
        ("the vaccine", "whether the vaccine is approved"), ("the project's deadline", "when the project is due"),
    ],
    "ru": [
        ("офис на Марсе", "об офисе на Марсе", "когда откроется офис на Марсе"),
        ("политика возврата", "о политике возврата", "как оформить возврат"),
        ("дата запуска", "о дате запуска", "когда выйдет продукт"),
        ("зарплата директора", "о зарплате директора", "сколько получает директор"),
        ("доставка на Марс", "о доставке на Марс", "сколько стоит доставка на Марс"),
        ("гарантия", "о гарантии", "какой срок гарантии"),
        ("новый филиал", "о новом филиале", "где откроется новый филиал"),
        ("бюджет на 2024 год", "о бюджете на 2024 год", "каким был бюджет на 2024 год"),
        ("парковка", "о парковке", "бесплатна ли парковка"),
        ("сброс пароля", "о сбросе пароля", "как сбросить пароль"),
        ("слияние компаний", "о слиянии компаний", "состоялось ли слияние"),
        ("автор отчёта", "об авторе отчёта", "кто написал отчёт"),
        ("часы работы музея", "о часах работы музея", "когда открыт музей"),
        ("побочные эффекты", "о побочных эффектах", "какие есть побочные эффекты"),
        ("население города", "о населении города", "сколько людей живёт в городе"),
        ("расписание поездов", "о расписании поездов", "когда уходит последний поезд"),
        ("основатель компании", "об основателе компании", "кто основал компанию"),
        ("лимит запросов к API", "о лимите запросов к API", "какой лимит запросов к API"),
        ("результаты экзамена", "о результатах экзамена", "когда будут результаты экзамена"),
        ("адрес офиса", "об адресе офиса", "где находится офис"),
        ("договор", "о договоре", "когда был подписан договор"),
        ("вакцина", "о вакцине", "одобрена ли вакцина"),
        ("срок проекта", "о сроке проекта", "когда сдавать проект"),
        ("стоимость подписки", "о стоимости подписки", "сколько стоит годовая подписка"),
    ],
}

SOURCES = {
    "en": {
        "docs": ["the provided documents", "the documents", "the sources", "the given passages", "the passages",
                 "the retrieved documents", "the materials", "the search results", "the available records",
                 "the texts you shared", "the reference documents"],
        "doc": ["the context", "the provided text", "the article", "the knowledge base", "the given passage",
                "the document", "the retrieved context", "the source material", "the information provided"],
    },
    "ru": {
        "docs_in": ["в предоставленных документах", "в документах", "в источниках", "в материалах",
                    "в контексте", "в найденных текстах", "в базе знаний", "в приведённых отрывках",
                    "в предоставленном тексте", "в справочных материалах"],
        "docs_nom": ["предоставленные документы", "документы", "источники", "материалы", "найденные тексты",
                     "приведённые отрывки", "справочные материалы"],
    },
}

REFUSALS = {
    "en": [
        "I don't have enough information to answer that.",
        "I don't have enough information in {docs} to answer that.",
        "{docs_cap} do not say {clause}.",
        "There is no information about {topic} in {docs}.",
        "I can't answer that based on {docs}.",
        "Unable to answer based on {docs}.",
        "{docs_cap} don't mention {topic}.",
        "I couldn't find anything about {topic} in {docs}.",
        "That isn't covered by {docs}.",
        "I'm not able to determine {clause} from the information provided.",
        "Sorry, I don't know.",
        "I'm afraid the answer isn't in {doc}.",
        "Nothing in {docs} addresses {topic}.",
        "The answer to this question cannot be found in {doc}.",
        "Based on {docs}, it is not possible to say {clause}.",
        "I do not have access to information about {topic}.",
        "The information needed to answer this is missing from {doc}.",
        "This question cannot be answered with the available information.",
        "No details about {topic} were provided.",
        "I have no data on {topic}.",
        "{docs_cap} are silent on {topic}.",
        "I'm unable to find an answer to your question in {docs}.",
        "Unfortunately, {topic} is not something {docs} cover.",
        "There isn't enough context to answer this question.",
        "I can't tell from {doc} {clause}.",
        "{doc_cap} contains no details on {topic}.",
        "It is unclear from {docs} {clause}.",
        "I would need more information to answer this.",
        "I cannot provide an answer, as {docs} do not include anything about {topic}.",
        "Your question about {topic} goes beyond what {docs} describe.",
        "I don't know {clause}; {docs} don't say.",
        "{doc_cap} doesn't specify {clause}.",
        "Insufficient information to answer.",
        "I'm not in a position to answer that from {doc}.",
        "None of {docs} give {clause}.",
        "The requested information about {topic} is not available.",
        "I was not able to locate {topic} in {docs}.",
        "There's nothing on {topic} in what was retrieved.",
        "No answer can be given: {doc} does not cover {topic}.",
        "I can't confirm {clause} because {docs} don't discuss it.",
        "The answer is not in {doc}.",
        "I have no idea.",
    ],
    "ru": [
        "Данных для ответа недостаточно.",
        "В предоставленных материалах об этом ничего не сказано.",
        "У меня нет информации {topic_prep}.",
        "Я не могу ответить на этот вопрос на основе предоставленных документов.",
        "{docs_in_cap} нет сведений {topic_prep}.",
        "Ответа на этот вопрос {docs_in} нет.",
        "К сожалению, мне не удалось найти ответ {docs_in}.",
        "Информации недостаточно, чтобы ответить.",
        "{docs_nom_cap} не содержат ответа на ваш вопрос.",
        "Не знаю.",
        "{docs_in_cap} об этом не упоминается.",
        "Из текста невозможно понять, {clause}.",
        "Я не располагаю сведениями {topic_prep}.",
        "{docs_nom_cap} ничего не сообщают {topic_prep}.",
        "На основании имеющихся данных ответить нельзя.",
        "Этого {docs_in} нет.",
        "Мне неизвестно, {clause}.",
        "Затрудняюсь ответить: {docs_in} нет нужной информации.",
        "{docs_nom_cap} не дают ответа на этот вопрос.",
        "Сведений {topic_prep} {docs_in} не найдено.",
        "Для ответа нужно больше информации.",
        "Нет данных.",
        "{docs_in_cap} не указано, {clause}.",
        "Я не нашёл {docs_in} ничего {topic_prep}.",
        "Ответить не получится: {docs_in} это не описано.",
        "Вопрос выходит за рамки того, что есть {docs_in}.",
        "Точной информации {topic_prep} у меня нет.",
        "По имеющимся источникам определить, {clause}, невозможно.",
        "Я не могу сказать, {clause}: {docs_nom} об этом молчат.",
        "Увы, ответа {docs_in} я не нашла.",
        "Нельзя ответить, {clause}, — таких сведений {docs_in} нет.",
        "Здесь нет информации, чтобы ответить на вопрос.",
        "Ничего {topic_prep} {docs_in} не говорится.",
        "Подтвердить это {docs_in} невозможно.",
        "Не могу определить, {clause}.",
        "{docs_nom_cap} не затрагивают этот вопрос.",
        "Сведения {topic_prep} отсутствуют.",
        "Мне не хватает данных, чтобы ответить {topic_prep}.",
        "Это мне неизвестно.",
        "Информация {topic_prep} отсутствует.",
    ],
}

# Courtesy and next steps around a refusal: they add no claim.
WRAP_BEFORE = {
    "en": ["Thank you for your question. ", "Sorry, ", "Unfortunately, ", "Hello! ", "Great question. ",
           "I'm sorry, but ", "Apologies — ", "Based on the information I have, ", "Hmm. ", "Dear customer, "],
    "ru": ["Спасибо за вопрос. ", "К сожалению, ", "Извините, но ", "Здравствуйте! ", "Увы, ",
           "Прошу прощения, ", "Хороший вопрос. ", "Уважаемый клиент, ", "Хм. ", "Исходя из того, что у меня есть, "],
}
WRAP_AFTER = {
    "en": [" I hope this helps.", " Please check the official website.", " You may want to contact support.",
           " Let me know if you have other questions.", " Could you share more details?",
           " Try rephrasing the question or adding documents.", " Have a nice day!", " Sorry about that.",
           " Please provide more context.", " However, you can check the official website.",
           " You can, however, ask the support team.", " However, you may find it on the company's help page."],
    "ru": [" Надеюсь, это поможет.", " Уточните, пожалуйста, на официальном сайте.",
           " Обратитесь в службу поддержки.", " Если будут другие вопросы — пишите.",
           " Можете уточнить вопрос?", " Попробуйте добавить документы.", " Хорошего дня!",
           " Приношу извинения.", " Пришлите, пожалуйста, больше контекста.",
           " Однако вы можете уточнить это на официальном сайте.", " Но вы можете спросить в службе поддержки."],
}

# Hedged claims assert something: "I'm not sure, but it opens in 2027".
HEDGES = {
    "en": ["I'm not sure, but {claim_lc}", "I think {claim_lc}", "Probably {claim_lc}", "I believe {claim_lc}",
           "If I remember correctly, {claim_lc}", "It seems that {claim_lc}", "I can't be certain, but {claim_lc}",
           "Not 100% sure, but {claim_lc}", "I don't know for sure, but {claim_lc}", "My best guess is that {claim_lc}",
           "As far as I know, {claim_lc}", "It's hard to say, but {claim_lc}", "Possibly {claim_lc}",
           "I might be wrong, but {claim_lc}"],
    "ru": ["Не уверен, но {claim_lc}", "Кажется, {claim_lc}", "Думаю, {claim_lc}", "Возможно, {claim_lc}",
           "Точно не знаю, но {claim_lc}", "Насколько я знаю, {claim_lc}", "Скорее всего, {claim_lc}",
           "Если не ошибаюсь, {claim_lc}", "Сложно сказать наверняка, но {claim_lc}", "Вероятно, {claim_lc}",
           "Могу ошибаться, но {claim_lc}", "По-моему, {claim_lc}"],
}
# A refusal about one thing and a claim about another: "no information on the date, but …".
CONTRASTS = {
    "en": ["{refusal_stem}, but {claim_lc}", "{refusal} However, {claim_lc}", "{refusal} That said, {claim_lc}",
           "{refusal} But {claim_lc}", "{claim} {refusal}", "{refusal_stem}; still, {claim_lc}",
           "{refusal} What I can say is that {claim_lc}", "{refusal} Still, {claim_lc}"],
    "ru": ["{refusal_stem}, но {claim_lc}", "{refusal} Однако {claim_lc}", "{refusal} Зато известно, что {claim_lc}",
           "{refusal} Но {claim_lc}", "{claim} {refusal}", "{refusal_stem}, однако {claim_lc}",
           "{refusal} Могу сказать лишь, что {claim_lc}", "{refusal} Тем не менее {claim_lc}"],
}
# Templated claims about the same topics (numbers and names make them checkable).
CLAIMS = {
    "en": ["{Topic} opens in {year}.", "{Topic} costs {n} dollars.", "Yes, {topic} is planned for {year}.",
           "{Topic} will have {small} floors.", "{Topic} is handled by {name}.", "It takes about {small} days.",
           "The answer is {n}.", "{Topic} was approved on {day} March {year}.", "{name} is responsible for {topic}.",
           "{Topic} changed in {year}, and now covers {small} countries.", "No, {topic} was cancelled in {year}.",
           "{Topic} is not free: it costs {n} euros.", "According to the documents, {topic} started in {year}.",
           "{Topic} is located on {name} Street.", "There are {n} employees working on {topic}.",
           # Negated claims assert too: "No, the company does not support the Mars office."
           "No, the company does not support {topic}.", "{Topic} is not included in the plan.",
           "The company has no plans for {topic}.", "{Topic} does not apply to customers outside the EU.",
           "There is no fee for {topic}.", "No, {topic} was never approved."],
    "ru": ["{Topic} откроется в {year} году.", "{Topic} стоит {n} рублей.", "Да, {topic} запланирован на {year} год.",
           "Здание будет иметь {small} этажей.", "Этим занимается {name_ru}.", "Это занимает около {small} дней.",
           "Ответ: {n}.", "Решение утвердили {day} марта {year} года.", "За это отвечает {name_ru}.",
           "В {year} году правила изменились и теперь действуют в {small} странах.",
           "Нет, проект закрыли в {year} году.", "Это не бесплатно: стоимость {n} рублей.",
           "Согласно документам, работа началась в {year} году.", "Офис находится на улице {street_ru}.",
           "Над этим работают {n} сотрудников.",
           "Нет, компания не поддерживает это направление.", "Это не входит в план на {year} год.",
           "Плата за это не взимается.", "Нет, такой проект никогда не утверждали.",
           "Компания не планирует открывать офис в {year} году.", "Это не распространяется на клиентов из ЕС."],
}
NAMES = ["Anna Schmidt", "John Carter", "Maria Lopez", "Wei Chen", "Olga Petrova", "David Kim"]
NAMES_RU = ["Анна Смирнова", "Иван Петров", "Мария Козлова", "Олег Соколов", "Дмитрий Волков"]
STREETS_RU = ["Ленина", "Тверской", "Садовой", "Гагарина", "Пушкина"]
