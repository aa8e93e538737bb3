"""The tone task spec: masked multi-label loss, class weights, per-label thresholds, metrics, data caps,
and a tiny train -> export round trip (ONNX parity, thresholds in the manifest)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from autovalidators.data_prep.io import read_jsonl, write_jsonl
from autovalidators.training.config import ExportConfig
from autovalidators.training.tasks import get_task
from autovalidators.training.tasks.tone import (
    TONE_LABELS,
    TonePrepareConfig,
    ToneSpec,
    choose_thresholds,
    compute_pos_weight,
    multilabel_report,
    sample_train,
    target_matrix,
)

torch = pytest.importorskip("torch")

SPEC = get_task("tone")


def record(text: str, **labels: int | None) -> dict:
    return {"id": text, "text": text, "source": "tiny", "labels": {name: labels.get(name) for name in TONE_LABELS}}


def test_registry_returns_the_multi_label_spec():
    assert isinstance(SPEC, ToneSpec) and SPEC.problem_type == "multi_label"
    assert SPEC.labels == TONE_LABELS and SPEC.main_metric == "macro_f1"


def test_missing_labels_are_minus_one_in_the_target_vector():
    targets = target_matrix([record("a", toxicity=1, insult=0), record("b")])
    assert targets[0].tolist() == [1.0, -1.0, 0.0, -1.0, -1.0, -1.0]
    assert (targets[1] == -1).all()


def test_a_record_with_all_labels_missing_contributes_nothing_to_the_loss():
    spec = dataclasses.replace(SPEC)  # a copy: the weights set below must not leak into SPEC
    spec.pos_weight = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    known = torch.tensor([[1.0, 0.0, -1.0, 1.0, 0.0, -1.0]])
    missing = torch.full((1, 6), -1.0)
    logits = torch.randn(2, 6, requires_grad=True)
    both = spec.loss(logits, torch.cat([known, missing]))
    alone = spec.loss(logits[:1], known)
    assert torch.allclose(both, alone)
    both.backward()
    assert torch.all(logits.grad[1] == 0)  # the all-missing row gets no gradient
    assert torch.any(logits.grad[0] != 0)
    only_missing = spec.loss(torch.randn(3, 6), torch.full((3, 6), -1.0))
    assert only_missing.item() == 0.0  # a batch with nothing known is 0, not NaN


def test_pos_weight_up_weights_the_positive_term():
    spec = dataclasses.replace(SPEC)
    labels = torch.tensor([[1.0, -1, -1, -1, -1, -1]])
    logits = torch.zeros(1, 6)
    plain = spec.loss(logits, labels)
    spec.pos_weight = np.array([3.0, 1, 1, 1, 1, 1])
    assert spec.loss(logits, labels).item() == pytest.approx(3 * plain.item())


def test_a_text_as_long_as_the_label_list_collates_as_one_target_row(tmp_path):
    # Regression: a 6-token text with 6 labels once collated as token labels (padded to the batch).
    from autovalidators.training.tiny import build_tokenizer
    from autovalidators.training.trainer import collate

    tokenizer = build_tokenizer(["you", "are", "an", "idiot", "hello"])
    six = SPEC.encode(tokenizer, record("you are an idiot", toxicity=1), 32)
    longer = SPEC.encode(tokenizer, record("you are an idiot hello hello hello", toxicity=0), 32)
    assert len(six["input_ids"]) == len(TONE_LABELS)
    batch = collate([six, longer], problem_type=SPEC.problem_type)
    assert tuple(batch["labels"].shape) == (2, len(TONE_LABELS))
    loss = SPEC.loss(torch.zeros(2, len(TONE_LABELS)), batch["labels"])
    assert loss.item() == pytest.approx(float(np.log(2)), rel=1e-5)


def test_pos_weight_is_negatives_over_positives_clipped():
    targets = np.array([[1, 0, 1, -1], [0, 0, -1, -1], [0, 0, 1, -1], [0, 1, 1, -1]] * 10, dtype=float)
    weights = compute_pos_weight(targets, cap=2.5)
    # label 0: 30 neg / 10 pos = 3 -> cap 2.5; label 1: 30/10 = 3 -> 2.5; label 2: 0 neg -> 1; label 3 unknown -> 1
    assert weights.tolist() == [2.5, 2.5, 1.0, 1.0]
    assert compute_pos_weight(np.array([[1, 0], [0, 0], [0, 0]], dtype=float)).tolist() == [2.0, 1.0]


def test_on_train_records_sets_weights_from_counts():
    spec = dataclasses.replace(SPEC)
    spec.on_train_records([record("a", toxicity=1), record("b", toxicity=0), record("c", toxicity=0), record("d")])
    assert spec.pos_weight[0] == pytest.approx(2.0)
    assert spec.extra["pos_weight"]["toxicity"] == pytest.approx(2.0)
    assert SPEC.pos_weight is None or SPEC.pos_weight is not spec.pos_weight


def test_thresholds_are_chosen_per_label_on_dev():
    rng = np.random.default_rng(0)
    n = 200
    y_a = rng.integers(0, 2, n)
    y_b = rng.integers(0, 2, n)
    targets = np.full((n, 6), -1.0)
    targets[:, 0], targets[:, 1] = y_a, y_b
    targets[:, 2] = 0  # insult: no positives -> default 0.5
    scores = np.full((n, 6), 0.5)
    scores[:, 0] = np.clip(0.2 + 0.2 * y_a + rng.normal(0, 0.05, n), 0, 1)  # separable around 0.3
    scores[:, 1] = np.clip(0.6 + 0.2 * y_b + rng.normal(0, 0.05, n), 0, 1)  # separable around 0.7
    thresholds = choose_thresholds(scores, targets, TONE_LABELS)
    assert 0.25 < thresholds["toxicity"] < 0.4
    assert 0.65 < thresholds["obscenity"] < 0.8
    assert thresholds["insult"] == 0.5 and thresholds["threat"] == 0.5
    strict = choose_thresholds(scores, targets, TONE_LABELS, "target_precision", 0.99)
    assert strict["toxicity"] >= thresholds["toxicity"] - 1e-9
    noisy = np.clip(0.5 + 0.1 * (y_a - 0.5) + rng.normal(0, 0.1, n), 0, 1)  # politics: weakly separable
    with_politics, politics_scores = targets.copy(), scores.copy()
    with_politics[:, 5], politics_scores[:, 5] = y_a, noisy
    mixed = choose_thresholds(politics_scores, with_politics, TONE_LABELS, rule_by_label={"politics": "target_precision"},
                              target_precision=0.8)
    plain = choose_thresholds(politics_scores, with_politics, TONE_LABELS)
    assert mixed["toxicity"] == plain["toxicity"]  # other labels keep the global rule
    flagged = noisy >= mixed["politics"]
    assert mixed["politics"] > plain["politics"] and y_a[flagged].mean() >= 0.8
    with pytest.raises(ValueError, match=r"threshold_rule_by_label: \['sarcasm'\] are not tone labels"):
        SPEC.thresholds(np.zeros((2, 6)), [record("a"), record("b")],
                        ExportConfig(threshold_rule_by_label={"sarcasm": "best_f1"}))
    report = multilabel_report(scores, targets, TONE_LABELS, thresholds)
    assert report["labels"]["toxicity"]["f1"] > 0.9
    assert report["macro_labels"] == ["toxicity", "obscenity"]  # only labels with both classes count
    assert report["macro_f1"] == pytest.approx((report["labels"]["toxicity"]["f1"]
                                                + report["labels"]["obscenity"]["f1"]) / 2)


def test_metrics_ignore_records_missing_the_label():
    records = [record("a", toxicity=1), record("b", toxicity=0), record("c")]
    logits = np.array([[3.0] * 6, [-3.0] * 6, [3.0] * 6])  # "c" would be a false positive if counted
    metrics = SPEC.metrics(logits, records, {label: 0.5 for label in TONE_LABELS})
    assert metrics["toxicity_precision"] == 1.0 and metrics["toxicity_f1"] == 1.0
    assert metrics["macro_f1"] == 1.0


def test_sample_train_caps_sources_deterministically(tmp_path):
    rows = [{**record(f"t{i}"), "source": "big" if i % 4 else "small"} for i in range(40)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    config = TonePrepareConfig(output_dir=str(tmp_path), max_train_per_source={"big": 10})
    assert sample_train(config) == {"train_sampled": 20}
    first = [r["id"] for r in read_jsonl(tmp_path / "train_sampled.jsonl")]
    sample_train(config)
    assert [r["id"] for r in read_jsonl(tmp_path / "train_sampled.jsonl")] == first
    assert sum(1 for i in first if int(i[1:]) % 4 == 0) == 10  # uncapped source kept whole


def test_dev_from_train_moves_whole_groups_of_a_source_into_the_dev_file(tmp_path):
    rows = [{**record(f"t{i}"), "source": "olid" if i % 2 else "other", "group": f"g{i // 4}"} for i in range(400)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "dev.jsonl", [{**record("d"), "source": "other", "group": "dev"}])
    config = TonePrepareConfig(output_dir=str(tmp_path), dev_from_train={"olid": 0.25})
    written = sample_train(config)
    train_rows = list(read_jsonl(tmp_path / "train_sampled.jsonl"))
    dev_rows = list(read_jsonl(tmp_path / "dev_sampled.jsonl"))
    moved = [r for r in dev_rows if r["source"] == "olid"]
    assert written == {"train_sampled": len(train_rows), "dev_sampled": len(dev_rows)}
    assert 20 < len(moved) < 80 and len(train_rows) + len(moved) == 400
    olid_train = {r["group"] for r in train_rows if r["source"] == "olid"}
    assert olid_train and not {r["group"] for r in moved} & olid_train  # a group is never on both sides
    assert all(r["source"] == "olid" for r in moved) and dev_rows[0]["id"] == "d"


def test_repeat_train_per_source_repeats_a_source_after_its_cap(tmp_path):
    rows = [{**record(f"t{i}"), "source": "olid" if i % 2 else "other"} for i in range(20)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    config = TonePrepareConfig(output_dir=str(tmp_path), max_train_per_source={"olid": 4},
                               repeat_train_per_source={"olid": 3})
    assert sample_train(config) == {"train_sampled": 10 + 4 * 3}
    ids = [r["id"] for r in read_jsonl(tmp_path / "train_sampled.jsonl")]
    olid = [i for i in ids if int(i[1:]) % 2]
    assert len(set(olid)) == 4 and all(olid.count(i) == 3 for i in set(olid))
    with pytest.raises(ValueError):
        TonePrepareConfig(repeat_train_per_source={"olid": 0})


def test_statements_join_the_sampled_train_file_with_their_train_split_only(tmp_path):
    statements = tmp_path / "statements.yaml"
    statements.write_text(
        "version: t\n"
        "groups: {en: {train: [Elves], dev: [Dwarves], test: [Orcs]}}\n"
        "hateful: {en: {train: ['{group} are vermin.'], test: ['{group} must be expelled.']}}\n"
        "neutral: {en: {train: ['{group} live in the hills.']}}\n"
        "sentences: {hateful: {en: {dev: ['Goblins should vanish.']}}, neutral: {en: {train: ['Trolls are tall.']}}}\n",
        "utf-8")
    write_jsonl(tmp_path / "train.jsonl", [{**record("t"), "source": "other"}])
    config = TonePrepareConfig(output_dir=str(tmp_path), statements=str(statements),
                               repeat_train_per_source={"identity_statements": 2})
    sample_train(config)
    rows = list(read_jsonl(tmp_path / "train_sampled.jsonl"))
    texts = [r["text"] for r in rows if r["source"] == "identity_statements"]
    # Only Elves with train templates are train; Dwarves (dev) and Orcs or the test template never are.
    assert sorted(set(texts)) == ["Elves are vermin.", "Elves live in the hills.", "Trolls are tall."]
    assert all(texts.count(t) == 2 for t in set(texts))
    hateful = next(r for r in rows if r["text"] == "Elves are vermin.")
    assert hateful["labels"]["identity_hate"] == 1 and hateful["labels"]["insult"] is None
    assert next(r for r in rows if r["text"] == "Elves live in the hills.")["labels"]["identity_hate"] == 0


def test_max_dev_per_source_caps_one_source_in_the_dev_file_and_keeps_the_rest(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{**record("t"), "source": "other"}])
    dev = [{**record(f"d{i}"), "source": "pairs" if i % 2 else "other"} for i in range(40)]
    write_jsonl(tmp_path / "dev.jsonl", dev)
    config = TonePrepareConfig(output_dir=str(tmp_path), max_dev_per_source={"pairs": 5})
    assert sample_train(config) == {"train_sampled": 1, "dev_sampled": 25}
    rows = list(read_jsonl(tmp_path / "dev_sampled.jsonl"))
    assert sum(r["source"] == "pairs" for r in rows) == 5 and sum(r["source"] == "other" for r in rows) == 20
    assert [r["id"] for r in rows] == [r["id"] for r in dev if r["id"] in {x["id"] for x in rows}]  # file order
    sample_train(config)
    assert [r["id"] for r in read_jsonl(tmp_path / "dev_sampled.jsonl")] == [r["id"] for r in rows]  # seeded


def test_model_languages_leave_other_languages_out_of_sampled_train_and_dev(tmp_path):
    rows = [{**record(f"t{i}"), "source": "mixed", "group": f"g{i}", "language": "ru" if i % 3 == 0 else "en"}
            for i in range(30)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "dev.jsonl", [{**record("d-en"), "language": "en"}, {**record("d-ru"), "language": "ru"}])
    config = TonePrepareConfig(output_dir=str(tmp_path), model_languages=["en"])
    assert sample_train(config) == {"train_sampled": 20, "dev_sampled": 1}
    assert {r["language"] for r in read_jsonl(tmp_path / "train_sampled.jsonl")} == {"en"}
    assert [r["id"] for r in read_jsonl(tmp_path / "dev_sampled.jsonl")] == ["d-en"]


def test_prepare_refuses_a_label_scheme_that_differs(tmp_path):
    from autovalidators.training.tasks.tone import prepare

    config_file = tmp_path / "tone.yaml"
    config_file.write_text("labels:\n  toxicity: {description: rude or hostile content}\n"
                           "  obscenity: {description: vulgar language or swearing}\n")
    with pytest.raises(ValueError, match="differ"):
        prepare(TonePrepareConfig(label_config=str(config_file), output_dir=str(tmp_path / "out")))


# ---- a tiny train -> export round trip -----------------------------------------------------------

WORDS = "you are an idiot stupid moron hate kill them thanks for asking the order shipped vote election " \
        "party government nice day hello friend".split()


def tiny_tone_records(n: int = 48) -> list[dict]:
    rng = np.random.default_rng(1)
    toxic = ["you are an idiot", "stupid moron", "i hate you idiot", "kill them"]
    clean = ["thanks for asking", "the order shipped", "nice day friend", "hello friend"]
    political = ["vote in the election", "the government party"]
    rows = []
    for i in range(n):
        kind = i % 3
        text = [toxic, clean, political][kind][int(rng.integers(0, 2 if kind == 2 else 4))] + f" {i % 5}"
        labels = {"toxicity": int(kind == 0), "insult": int(kind == 0) if i % 2 else None,
                  "politics": int(kind == 2) if i % 4 else None, "obscenity": 0 if kind else None}
        rows.append({**record(text, **labels), "id": f"r{i}"})
    return rows


@pytest.fixture(scope="module")
def tone_export(tmp_path_factory):
    from autovalidators.training.config import ExportConfig, TaskConfig, TrainConfig
    from autovalidators.training.export import export
    from autovalidators.training.tiny import build_tiny_encoder
    from autovalidators.training.trainer import train

    root = tmp_path_factory.mktemp("tone")
    encoder = build_tiny_encoder(root / "encoder", WORDS)
    rows = tiny_tone_records()
    write_jsonl(root / "train.jsonl", rows)
    write_jsonl(root / "dev.jsonl", rows[:24])
    config = TaskConfig[TonePrepareConfig](
        prepare=TonePrepareConfig(output_dir=str(root)),
        train=TrainConfig(base_model=str(encoder), max_length=32, batch_size=8, max_steps=3, eval_every=3,
                          learning_rate=1e-3, train_file=str(root / "train.jsonl"), dev_file=str(root / "dev.jsonl"),
                          output_dir=str(root / "run"), cpu_threads=1, early_stopping={"metric": "macro_f1"}),
        export=ExportConfig(max_dev_examples=None, int8_max_drop=1.0, optimize=False),
    )
    spec = dataclasses.replace(SPEC)
    result = train(spec, config.train)
    manifest = export(spec, root / "run", root / "models" / "tone", config)
    return root, result, manifest


@pytest.mark.slow
def test_tiny_run_trains_exports_and_stores_per_label_thresholds(tone_export):
    root, result, manifest = tone_export
    assert "macro_f1" in result["dev_metrics"]
    assert manifest.task == "tone" and manifest.labels == list(TONE_LABELS)
    assert set(manifest.thresholds) == set(TONE_LABELS)
    assert all(0.0 <= t <= 1.0 for t in manifest.thresholds.values())
    assert manifest.window.aggregation == "max" and manifest.window.stride == SPEC.window_stride
    report = json.loads((root / "run" / "onnx" / "export_report.json").read_text())
    assert report["parity_fp32"]["passed"] and report["parity_fp32"]["max_abs_diff"] < 1e-4
    assert report["int8_drop"]["metric"] == "macro_f1"


@pytest.mark.slow
def test_benchmark_reports_olid_rule_ru_toxicity_fp32_int8_and_predictions(tone_export):
    from autovalidators.training.benchmarks.tone import ABUSIVE_LABELS, benchmark, olid_level_a
    from autovalidators.training.config import TaskConfig

    root, _, _ = tone_export
    rows = tiny_tone_records(24)
    write_jsonl(root / "test.jsonl", rows)
    olid = [{**r, "votes": {"gold": {"toxicity": r["labels"]["toxicity"]}}} for r in rows]
    write_jsonl(root / "benchmark_olid.jsonl", olid)
    write_jsonl(root / "benchmark_ru_toxic_val.jsonl", rows[:9])
    config = TaskConfig[TonePrepareConfig](prepare=TonePrepareConfig(output_dir=str(root)))
    report = benchmark(SPEC, config, root / "models" / "tone", threads=1, torch_latency=False)
    assert set(report["quality"]) == {"int8", "fp32", "baseline: heuristic"}  # nothing routed: no "model only"
    baseline = report["quality"]["baseline: heuristic"]
    assert baseline["olid_level_a"]["examples"] == 24 and baseline["ru_toxic_val"]["known"] == 9
    int8 = report["quality"]["int8"]
    assert 0.0 <= int8["olid_level_a"]["macro_f1"] <= 1.0 and int8["olid_level_a"]["examples"] == 24
    assert set(int8["test_by_source"]) == {"tiny"}
    assert int8["ru_toxic_val"]["known"] == 9
    assert {"single_short", "batch_32_short"} <= set(report["latency"]["int8"])
    statements = report["data"]["statements"]  # the identity statements' test split, shipped with the code
    assert statements > 0 and set(int8["statements"]) == {"hateful_en", "neutral_en", "hateful_ru", "neutral_ru"}
    assert len(report["predictions"]) == 24 + 24 + 9 + statements
    assert set(report["predictions"][0]) >= {"id", "text", "gold", "scores"}
    json.dumps(report)  # the report must be writable as JSON

    # The OLID rule: OFF when any abusive label is flagged, not only toxicity.
    labels = list(TONE_LABELS)
    scores = np.zeros((2, len(labels)))
    scores[0, labels.index("insult")] = 0.9  # flagged by insult alone
    records = [{"labels": {"toxicity": 1}}, {"labels": {"toxicity": 0}}]
    result = olid_level_a(scores, records, labels, {label: 0.5 for label in labels})
    assert result["any_abusive"]["macro_f1"] == 1.0 and result["toxicity_only"]["macro_f1"] < 1.0
    assert "insult" in ABUSIVE_LABELS and "politics" not in ABUSIVE_LABELS


@pytest.mark.slow
def test_benchmark_scores_routed_languages_as_served_and_by_the_model_alone(tone_export, tmp_path):
    import shutil

    from autovalidators.inference.manifest import update_manifest
    from autovalidators.training.benchmarks.tone import benchmark, load_sets
    from autovalidators.training.config import TaskConfig

    root, _, _ = tone_export
    folder = tmp_path / "tone"
    shutil.copytree(root / "models" / "tone", folder)
    update_manifest(folder, fallback_languages=["ru"])
    data = tmp_path / "prepared"
    rows = tiny_tone_records(12)
    russian = [{**record("Да пошёл ты, мудак.", toxicity=1), "id": "ru1", "language": "ru"},
               {**record("Спасибо, заказ отправлен.", toxicity=0), "id": "ru2", "language": "ru"}]
    write_jsonl(data / "test.jsonl", rows)
    write_jsonl(data / "benchmark_ru_toxic_val.jsonl", russian)
    config = TaskConfig[TonePrepareConfig](prepare=TonePrepareConfig(output_dir=str(data)))
    report = benchmark(SPEC, config, folder, run_dir=root / "run", threads=1, torch_latency=False)
    russian_statements = sum(r["language"] == "ru" for r in load_sets(data)["statements"])
    assert report["routed_to_heuristic"] == {"ru_toxic_val": 2, "statements": russian_statements}
    assert report["fallback_languages"] == ["ru"]
    served, alone = report["quality"]["int8"]["ru_toxic_val"], report["quality"]["int8 model only"]["ru_toxic_val"]
    # As served, the lexicon decides the Russian rows: the obscene one is caught, the polite one is not.
    assert served["precision"] == 1.0 and served["recall"] == 1.0
    assert alone["known"] == served["known"] == 2
    assert "test_all" not in report["quality"]["int8 model only"]  # only sets with routed rows

    # The model it replaces, on the same rows: the lexicon-routed copy against the model alone.
    versus = benchmark(SPEC, config, root / "models" / "tone", run_dir=root / "run", threads=1, torch_latency=False,
                       previous=folder)
    assert versus["previous"]["fallback_languages"] == ["ru"]
    ru = versus["versus_previous"]["ru_toxic_val_toxicity_f1"]
    assert ru["theirs"] == 1.0 and ru["rows"] == 2  # the previous (routed) copy is scored as served
    assert ru["difference"] == ru["ours"] - 1.0 and ru["low"] <= ru["difference"] <= ru["high"]
    assert versus["quality"][f"previous: {versus['previous']['model_version']}"]["ru_toxic_val"]["f1"] == 1.0


def test_paired_f1_bootstrap_tells_a_better_predictor_from_an_equal_one():
    from autovalidators.training.benchmarks.tone import paired_f1_bootstrap

    rng = np.random.default_rng(0)
    gold = rng.random(400) < 0.4
    good = np.where(rng.random(400) < 0.9, gold, ~gold)  # 90% right
    poor = np.where(rng.random(400) < 0.6, gold, ~gold)  # 60% right
    better = paired_f1_bootstrap(gold, good, poor, macro=True)
    assert better["difference"] > 0.2 and better["low"] > 0 and better["p_not_better"] == 0.0
    same = paired_f1_bootstrap(gold, good, good, macro=False)
    assert same["difference"] == same["low"] == same["high"] == 0.0 and same["p_not_better"] == 1.0
    assert same["ours"] == same["theirs"] and same["rows"] == 400


def test_a_benchmark_option_the_task_lacks_is_a_clear_error():
    from autovalidators.training.benchmarks.common import run_benchmark
    from autovalidators.training.tasks import get_task

    with pytest.raises(ValueError, match=r"the qa_relevance benchmark has no option\(s\) \['previous'\]"):
        run_benchmark(get_task("qa_relevance"), None, Path("models/qa_relevance"), previous=Path("models/tone"))
