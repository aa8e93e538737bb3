"""Tiny tone-labelling fixtures: source files in the shape of OLID, Davidson, Jigsaw and ru_toxic."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

LABELS = {
    "toxicity": {"description": "Rude or hostile content.", "kappa_floor": 0.6, "min_assessed": 4},
    "obscenity": {"description": "Profanity or vulgar words.", "kappa_floor": 0.6, "min_assessed": 4},
    "insult": {"description": "Insulting someone.", "kappa_floor": 0.5, "min_assessed": 4},
    "threat": {"description": "Threatening harm.", "kappa_floor": 0.5, "min_assessed": 4},
    "identity_hate": {"description": "Hate against a group.", "kappa_floor": 0.5, "min_assessed": 4},
    "politics": {"description": "Talks about politics.", "kappa_floor": 0.5, "min_assessed": 4},
}

OLID_ROWS = [
    ("1", "@USER you are a stupid idiot", "OFF", "TIN", "IND"),
    ("2", "what a shit day honestly", "OFF", "UNT", "NULL"),
    ("3", "lovely weather in the park today", "NOT", "NULL", "NULL"),
] + [(str(10 + i), f"a calm friendly tweet number {i} about gardens", "NOT", "NULL", "NULL") for i in range(30)] + [
    (str(100 + i), f"you are a fucking clown number {i}", "OFF", "TIN", "IND") for i in range(15)]


def write_sources(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "olid.tsv", "w", encoding="utf-8", newline="") as handle:
        handle.write("id\ttweet\tsubtask_a\tsubtask_b\tsubtask_c\n")
        for row in OLID_ROWS:
            handle.write("\t".join(row) + "\n")
    with open(root / "davidson.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", "count", "hate_speech", "offensive_language", "neither", "class", "tweet"])
        writer.writerow([0, 3, 3, 0, 0, 0, "go back to your country you people"])
        writer.writerow([1, 3, 0, 3, 0, 1, "that bitch is crazy"])
        writer.writerow([2, 3, 0, 0, 3, 2, "just had a great coffee"])
        # A duplicate of an OLID text (different case and spacing): collapses into one record.
        writer.writerow([3, 3, 0, 0, 3, 2, "Lovely  weather in the park TODAY"])
        # Gold "neither" although the lexicon sees profanity: gold must win, the clash be counted.
        writer.writerow([4, 3, 0, 0, 3, 2, "this shitty game again lol"])
    with open(root / "jigsaw.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["comment_text", "toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"])
        writer.writerow(["i will kill you", 1, 0, 0, 1, 0, 0])
        writer.writerow(["thanks for the edit,\nsee you", 0, 0, 0, 0, 0, 0])
        writer.writerow(["severe but not marked toxic", 0, 1, 0, 0, 0, 0])
    with open(root / "ru_val.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["comment", "labels"])
        writer.writerow(["ну ты и дебил, блять", "1.0"])
        writer.writerow(["хорошая статья, спасибо", "0.0"])


def write_config(path: Path, data_root: Path, **overrides) -> Path:
    config = {
        "version": "test-v1",
        "data_root": str(data_root),
        "labels": LABELS,
        "sources": {
            "olid": {"paths": ["olid.tsv"], "format": "tsv", "text_column": "tweet", "id_column": "id",
                     "language": "en", "licence": "test", "holdout_fraction": 0.3,
                     "labels": {"toxicity": [{"column": "subtask_a", "positive": ["OFF"], "negative": ["NOT"]}],
                                "insult": [{"column": "subtask_b", "positive": ["TIN"], "negative": ["UNT"]},
                                           {"column": "subtask_a", "negative": ["NOT"]}],
                                "threat": [{"column": "subtask_a", "negative": ["NOT"]}]}},
            "davidson": {"paths": ["davidson.csv"], "text_column": "tweet", "language": "en", "licence": "MIT",
                         "labels": {"toxicity": [{"column": "class", "positive": ["0", "1"], "negative": ["2"]}],
                                    "identity_hate": [{"column": "class", "positive": ["0"], "negative": ["1", "2"]}]}},
            "jigsaw": {"paths": ["jigsaw.csv"], "text_column": "comment_text", "language": "en", "licence": "CC0",
                       "labels": {"toxicity": [{"column": "toxic", "threshold": 0.5},
                                               {"column": "severe_toxic", "threshold": 0.5}],
                                  "obscenity": [{"column": "obscene", "threshold": 0.5}],
                                  "threat": [{"column": "threat", "threshold": 0.5}]}},
            "ru_val": {"paths": ["ru_val.csv"], "text_column": "comment", "language": "ru", "licence": "none",
                       "role": "benchmark", "labels": {"toxicity": [{"column": "labels", "threshold": 0.5}]}},
        },
        "lexicon": {"enabled": True, "exclude": ["stupid", "idiot"]},
        "splits": {"fractions": {"train": 0.6, "dev": 0.2, "test": 0.2}, "seed": 3},
        "review": {"positives_per_label": 3, "negatives_per_label": 3, "seed": 1},
    }
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path
