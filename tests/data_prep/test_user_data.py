"""`autovalidators prepare <task> --data FILE`: your own data for every task, through `datasets`.

Per task a tiny file written here (fact spans JSONL, QA relevance CSV, tone CSV with blank cells,
abstention Parquet) with one bad row: the good rows are kept, the bad one is named (row, field),
the Arrow DatasetDict and the JSONL the trainers read are written. Then, marked slow, each task
end to end through the CLI on a tiny offline encoder: prepare -> train -> export -> benchmark.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("datasets")

from autovalidators.data_prep import user_data  # noqa: E402
from autovalidators.data_prep.fact_spans.schema import SpanRecord  # noqa: E402
from autovalidators.data_prep.io import read_jsonl  # noqa: E402
from autovalidators.data_prep.user_data import USER_DATA_TASKS  # noqa: E402
from autovalidators.inference import cli  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
cli._register_commands()
ROWS = 40  # distinct groups: enough for a non-empty 80/10/10 grouped split


def invoke(*args: object):
    result = CliRunner().invoke(cli.app, [str(a) for a in args])
    result.text = " ".join(result.output.split())  # rich wraps long lines
    return result


# ---- tiny files, one bad row each -------------------------------------------------------------

TRUE, MADE_UP = "Paris is the capital of France.", "The moon is made of cheese."


def fact_rows() -> list[dict]:
    """Spans, sentence labels (split by the project's splitter or given) and whole-answer labels;
    row 5 has a span past the answer's end."""
    rows = []
    for i in range(ROWS):
        context = f"Paris is the capital of France. The Nile flows through Egypt. Fact {i}."
        row = {"passage": context, "reply": f"{TRUE} {MADE_UP}", "question": f"what is true {i}"}
        if i % 3 == 0:
            row["spans"] = [{"start": len(TRUE) + 1, "end": len(TRUE) + 1 + len(MADE_UP), "label": "HALLUCINATION"}]
        elif i % 3 == 1:
            row["sentence_labels"] = ["FACT", "HALLUCINATION" if i % 2 else "FACT"]
            if i % 2:
                row["sentences"] = [TRUE, MADE_UP]
        else:
            row.update(reply=TRUE, label=0)
        rows.append(row)
    rows[4] = {**rows[4], "spans": [{"start": 0, "end": 500, "label": "FACT"}], "sentence_labels": None}
    return rows


def qa_rows() -> list[list]:
    """CSV rows with their column names; row 3 has label 'maybe'."""
    from autovalidators.training.tiny import tiny_qa_records

    rows = [["user_msg", "bot_reply", "ok", "ticket"]]
    for r in tiny_qa_records(repeats=5):
        rows.append([r["question"], r["answer"], "relevant" if r["label"] else "irrelevant", "t1"])
    rows[3][2] = "maybe"
    return rows


TONE_TEXTS = {"toxic": "you are an idiot", "clean": "thanks for asking", "political": "vote in the election"}


def tone_rows() -> list[dict]:
    """Blank cells are unlabelled; row 2 has toxicity 2."""
    rows = []
    for i in range(ROWS):
        kind = ("toxic", "clean", "political")[i % 3]
        rows.append({"comment": f"{TONE_TEXTS[kind]} {i}", "toxicity": int(kind == "toxic"),
                     "insult": int(kind == "toxic") if i % 2 else "", "politics": int(kind == "political")})
    rows[1]["toxicity"] = 2
    return rows


def abstention_rows() -> list[dict]:
    """Refusals and answers; row 6 has no answer."""
    rows = []
    for i in range(ROWS):
        if i % 2:
            rows.append({"response": f"sorry, i cannot answer that question {i}", "refused": 1, "prompt": "q"})
        else:
            rows.append({"response": f"the tower opened in {1800 + i}", "refused": 0, "prompt": "q"})
    rows[5]["response"] = None
    return rows


def write_file(folder: Path, task: str) -> tuple[Path, str]:
    """The tiny file of `task` and its --columns mapping."""
    folder.mkdir(parents=True, exist_ok=True)
    if task == "fact_spans":
        path = folder / "answers.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in fact_rows()))
        return path, "passage=context,reply=answer"
    if task == "qa_relevance":
        path = folder / "chats.csv"
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows(qa_rows())
        return path, "user_msg=question,bot_reply=answer,ok=label"
    if task == "tone":
        path = folder / "comments.csv"
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["comment", "toxicity", "insult", "politics"])
            writer.writeheader()
            writer.writerows(tone_rows())
        return path, "comment=text"
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "replies.parquet"
    pq.write_table(pa.Table.from_pylist(abstention_rows()), path)
    return path, "response=answer,refused=label,prompt=question"


BAD = {"fact_spans": (5, "spans[0]"), "qa_relevance": (3, "label"), "tone": (2, "toxicity"), "abstention": (6, "answer")}
TOTAL = {"fact_spans": ROWS, "qa_relevance": 2 * ROWS, "tone": ROWS, "abstention": ROWS}  # rows in each file


# ---- prepare ------------------------------------------------------------------------------------

@pytest.mark.parametrize("task", USER_DATA_TASKS)
def test_prepare_keeps_good_rows_names_the_bad_one_and_writes_arrow_and_jsonl(task, tmp_path):
    from datasets import load_from_disk

    data, columns = write_file(tmp_path / "in", task)
    out = tmp_path / "prepared"
    result = invoke("prepare", task.replace("_", "-"), "--data", data, "--columns", columns, "--out", out)
    assert result.exit_code == 1, result.output  # prepared, but a row was bad
    row, field = BAD[task]
    assert f"row {row}: {field}:" in result.text
    bad = list(read_jsonl(out / "bad_rows.jsonl"))
    assert [(b["row"], b["field"]) for b in bad] == [(row, field)]

    splits = {name: list(read_jsonl(out / f"{name}.jsonl")) for name in ("train", "dev", "test")}
    assert sum(map(len, splits.values())) == TOTAL[task] - 1 and all(splits.values())
    arrow = load_from_disk(str(out / "dataset"))
    assert {name: arrow[name].num_rows for name in arrow} == {name: len(rows) for name, rows in splits.items()}
    card = json.loads((out / "data_card.json").read_text())
    assert card["config"]["rows_bad"] == 1 and card["config"]["rows_kept"] == TOTAL[task] - 1
    assert card["sources"]["user"] == str(data) and card["config"]["columns"]
    assert any(f"row {row}: {field}" in note for note in card["notes"])
    # The config written beside the data points train/benchmark at it.
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["prepare"][user_data.SCHEMAS[task].data_key] == str(out)


def test_fact_span_rows_become_the_span_records_the_trainer_reads(tmp_path):
    data, columns = write_file(tmp_path / "in", "fact_spans")
    out = tmp_path / "prepared"
    assert invoke("prepare", "fact-spans", "--data", data, "--columns", columns, "--out", out).exit_code == 1
    records = {r["id"]: r for name in ("train", "dev", "test") for r in read_jsonl(out / f"{name}.jsonl")}
    for record in records.values():
        SpanRecord.model_validate({k: v for k, v in record.items() if k != "split"})
    by_spans, by_label = records["1"], records["3"]
    assert by_spans["spans"] == [{"start": 0, "end": 31, "label": "FACT", "kind": ""},
                                 {"start": 32, "end": 59, "label": "HALLUCINATION", "kind": "user"}]
    assert [s["label"] for s in records["2"]["spans"]] == ["FACT", "HALLUCINATION"]  # sentences given
    assert records["11"]["spans"] == [{"start": 0, "end": 59, "label": "FACT", "kind": ""}]  # split here
    assert by_label["spans"] == [{"start": 0, "end": 31, "label": "FACT", "kind": "answer_label"}]
    assert by_spans["context"].startswith("Paris") and by_spans["question"] == "what is true 0"
    assert {r["meta"]["labelled_by"] for r in records.values()} == {"spans", "sentence_labels", "label"}
    assert list(read_jsonl(out / "heldout" / "user.jsonl")) == list(read_jsonl(out / "test.jsonl"))


def test_tone_blank_cells_stay_unlabelled_and_labels_are_counted(tmp_path):
    data, columns = write_file(tmp_path / "in", "tone")
    out = tmp_path / "prepared"
    assert invoke("prepare", "tone", "--data", data, "--columns", columns, "--out", out).exit_code == 1
    records = {r["id"]: r for name in ("train", "dev", "test") for r in read_jsonl(out / f"{name}.jsonl")}
    assert records["1"]["labels"] == {"toxicity": 1, "obscenity": None, "insult": None, "threat": None,
                                      "identity_hate": None, "politics": 0}
    assert records["4"]["labels"]["insult"] == 1
    card = json.loads((out / "data_card.json").read_text())
    assert sum(card["splits"][s]["toxicity"].get("1", 0) for s in card["splits"]) == 14


def test_grouped_split_keeps_each_question_in_one_split(tmp_path):
    data, columns = write_file(tmp_path / "in", "qa_relevance")
    out = tmp_path / "prepared"
    invoke("prepare", "qa-relevance", "--data", data, "--columns", columns, "--out", out)
    where = {}
    for name in ("train", "dev", "test"):
        for record in read_jsonl(out / f"{name}.jsonl"):
            assert where.setdefault(record["question"], name) == name
    again = tmp_path / "again"
    invoke("prepare", "qa-relevance", "--data", data, "--columns", columns, "--out", again)
    assert (again / "test.jsonl").read_text() == (out / "test.jsonl").read_text()  # deterministic


def test_a_split_column_is_kept_and_split_puts_every_row_in_one(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"a{i}", "label": i % 2, "part": ["train", "validation"][i % 2]}
            for i in range(6)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = invoke("prepare", "qa-relevance", "--data", data, "--columns", "part=split", "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert len(list(read_jsonl(tmp_path / "a" / "dev.jsonl"))) == 3 and not (tmp_path / "a" / "test.jsonl").exists()
    assert "no test split" in result.text
    result = invoke("prepare", "qa-relevance", "--data", data, "--split", "test", "--out", tmp_path / "b")
    assert result.exit_code == 0, result.output
    assert len(list(read_jsonl(tmp_path / "b" / "test.jsonl"))) == 6 and not (tmp_path / "b" / "train.jsonl").exists()


@pytest.mark.parametrize(("columns", "message"), [
    ("user_msg=question,bot_reply=answer,okay=label", "column 'okay' is not in the data"),
    ("user_msg=question,bot_reply=answer,ok=verdict", "'verdict' is not a qa_relevance field"),
    ("user_msg=question,ok=label", "required column 'answer' is missing"),
    ("user_msg:question", "is not THEIRS=OURS"),
])
def test_a_wrong_mapping_is_one_clear_error(tmp_path, columns, message):
    data, _ = write_file(tmp_path / "in", "qa_relevance")
    result = invoke("prepare", "qa-relevance", "--data", data, "--columns", columns, "--out", tmp_path / "out")
    assert result.exit_code == 2 and message in result.text, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_unreadable_or_missing_files_are_clear_errors(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "q", "answer": "a", "label": 1}\n{"question": \n')
    result = invoke("prepare", "abstention", "--data", broken, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "could not be read" in result.text, result.output
    result = invoke("prepare", "tone", "--data", tmp_path / "absent.csv")
    assert result.exit_code == 2 and "no such file" in result.text, result.output
    result = invoke("prepare", "qa-relevance", "--columns", "a=question")
    assert result.exit_code == 2 and "only apply with --data" in result.text, result.output


def test_every_schema_field_is_documented():
    page = (Path(user_data.__file__).parent / "USER_DATA.md").read_text()
    sections = re.split(r"\n## ", page)
    for task, schema in user_data.SCHEMAS.items():
        section = next(s for s in sections if s.startswith(task))
        for name in schema.fields:
            assert f"| `{name}` |" in (page if name in user_data.COMMON else section), (task, name)
        assert f"autovalidators prepare {task.replace('_', '-')} --data" in section


# ---- end to end: prepare -> train -> export -> benchmark, each through the CLI -----------------

TINY_TRAIN = dict(max_length=64, batch_size=4, eval_batch_size=8, max_steps=2, eval_every=1, cpu_threads=1,
                  log_every=1, learning_rate=1e-3)
TINY_EXPORT = dict(max_dev_examples=None, int8_max_drop=1.0, optimize=False)
# Metrics that are a number on a tiny dev split (AUC is NaN when dev lacks a class).
EARLY_STOPPING = {"fact_spans": "example_f1", "qa_relevance": "f1", "tone": "macro_f1"}


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from autovalidators.training.tiny import build_tiny_encoder, tiny_words

    words = {*tiny_words(), *" ".join(TONE_TEXTS.values()).split(), *f"{TRUE} {MADE_UP}".lower().split(),
             "fact", "true", "sorry", "cannot", "answer", "that", "question", "tower", "opened"}
    return build_tiny_encoder(tmp_path_factory.mktemp("encoder"), sorted(words))


def tiny_recipe(task: str, encoder: Path, folder: Path) -> Path:
    """A task config with a 2-step training on the tiny encoder: prepare copies its recipe."""
    if task == "abstention":
        recipe = {"features": {"hash_dim": 4096}, "train": {"model": "logistic", "max_iter": 50}}
    else:
        recipe = {"prepare": {}, "train": {**TINY_TRAIN, "base_model": str(encoder),
                                           "early_stopping": {"metric": EARLY_STOPPING[task]}},
                  "export": TINY_EXPORT}
    path = folder / f"{task}_recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("task", USER_DATA_TASKS)
def test_prepare_train_export_benchmark_on_your_own_file(task, tiny_encoder, tmp_path, monkeypatch):
    from autovalidators.inference.manifest import load_manifest

    cli_name = task.replace("_", "-")
    data, columns = write_file(tmp_path / "in", task)
    out, run, models = tmp_path / "prepared", tmp_path / "run", tmp_path / "models" / task
    recipe = tiny_recipe(task, tiny_encoder, tmp_path)
    prepared = invoke("prepare", cli_name, "--data", data, "--columns", columns, "--out", out, "--config", recipe)
    assert prepared.exit_code == 1 and "1 bad row(s) skipped" in prepared.text, prepared.output
    config = out / "config.yaml"

    trained = invoke("train", cli_name, "--config", config, "--output-dir", run)
    assert trained.exit_code == 0, trained.output
    exported = invoke("export", cli_name, "--run", run, "--to", models, "--config", config)
    assert exported.exit_code == 0, exported.output
    manifest = load_manifest(models)
    assert manifest.task == task

    if task == "fact_spans":  # the tiny encoder has 128 positions: time one short window only
        from autovalidators.training.benchmarks import fact_spans as bench

        monkeypatch.setattr(bench, "LATENCY_TOKENS", (128,))
        monkeypatch.setattr(bench, "RUNS", {128: 2})
    report_path = tmp_path / "bench.json"
    options = ["--threads", "1"] + ([] if task == "abstention" else ["--no-torch-latency"])
    benchmarked = invoke("benchmark", cli_name, "--model", models, "--config", config, "--output", report_path,
                         *options)
    assert benchmarked.exit_code == 0, benchmarked.output
    report = json.loads(report_path.read_text())
    test_rows = len(list(read_jsonl(out / "test.jsonl")))
    if task == "qa_relevance":
        assert report["quality"]["int8"]["test"]["pairs"] == test_rows
    elif task == "tone":
        assert set(report["quality"]["int8"]["test_by_source"]) == {"user"}
    elif task == "fact_spans":
        assert report["quality"]["int8"]["user"]["examples"] == test_rows
    else:
        assert report["metrics"]["all"]["model"]["rows"] == test_rows


def test_a_hub_dataset_is_read_with_load_dataset_and_its_splits_pooled(tmp_path, monkeypatch):
    import datasets

    rows = [{"question": f"q{i}", "answer": f"a{i}", "label": i % 2} for i in range(ROWS)]
    hub = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:30]),
                                "validation": datasets.Dataset.from_list(rows[30:] + [{**rows[0], "label": 7}])})
    calls = []

    def load_dataset(name, split=None):
        calls.append((name, split))
        return hub[split] if split else hub

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    report = user_data.prepare_user_data("qa_relevance", "someone/pairs", tmp_path / "a")
    assert calls == [("someone/pairs", None)]
    assert sum(map(len, report.splits.values())) == ROWS and set(report.splits) == {"train", "dev", "test"}
    assert [str(b) for b in report.bad_rows] == ["row 11 of split 'validation': label: must be one of 0, 1, true, "
                                                 "false, relevant, irrelevant; got 7"]
    ids = [r["id"] for rows in report.splits.values() for r in rows]
    assert len(set(ids)) == len(ids) and "validation:1" in ids  # row ids stay unique across source splits

    report = user_data.prepare_user_data("qa_relevance", "someone/pairs", tmp_path / "b", split="validation")
    assert calls[-1] == ("someone/pairs", "validation") and list(report.splits) == ["dev"]
