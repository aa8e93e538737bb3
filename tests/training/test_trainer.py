"""The shared training loop on a tiny random BERT: smoke run, resume, batching, freezing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autovalidators.training.config import TrainConfig
from autovalidators.training.tasks import get_task
from autovalidators.training.tasks.base import TaskSpec
from autovalidators.training.trainer import build_model, collate, epoch_batches, train

SPEC = get_task("qa_relevance")


def test_two_batch_smoke_run_saves_best_and_checkpoint(tiny_run):
    config, run_dir = tiny_run
    run = json.loads((run_dir / "best" / "run.json").read_text())
    assert run["task"] == "qa_relevance"
    assert {"f1", "map", "roc_auc"} <= set(run["dev_metrics"])
    assert (run_dir / "best" / "model.safetensors").is_file()
    assert (run_dir / "best" / "tokenizer.json").is_file()
    state = json.loads((run_dir / "last" / "trainer_state.json").read_text())
    assert state["step"] == 2
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2]


def test_training_changes_the_weights(tiny_run, tiny_encoder):
    _, run_dir = tiny_run
    before = build_model(SPEC, TrainConfig(), str(tiny_encoder)).state_dict()
    after = SPEC.model_class().from_pretrained(str(run_dir / "best")).state_dict()
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.allclose(before[key], after[key])


def test_resume_continues_from_the_last_step(tiny_encoder, tiny_data, tmp_path, make_config):
    run_dir = tmp_path / "run"
    config = make_config(tiny_encoder, tiny_data, run_dir, max_steps=2, eval_every=2)
    train(SPEC, config.train)
    with pytest.raises(FileExistsError, match="--resume"):
        train(SPEC, config.train)
    longer = config.train.model_copy(update={"max_steps": 3})
    result = train(SPEC, longer, resume=True)
    assert result["steps"] == 3
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [2, 3]  # no step was trained twice


def test_early_stopping_stops_after_patience(tiny_encoder, tiny_data, tmp_path, make_config):
    # A learning rate of 1e-9 cannot move dev MAP, so the second evaluation is no improvement.
    config = make_config(tiny_encoder, tiny_data, tmp_path / "run", max_steps=6, learning_rate=1e-9,
                              early_stopping={"patience": 1, "metric": "map", "mode": "max"})
    result = train(SPEC, config.train)
    assert result["stopped_early"] and result["steps"] < 6


def test_an_early_stopping_metric_the_task_does_not_compute_is_a_clear_error(tiny_encoder, tiny_data, tmp_path,
                                                                            make_config):
    # A misspelt metric used to read as NaN at every evaluation: no best model, no early stop.
    config = make_config(tiny_encoder, tiny_data, tmp_path / "run", max_steps=2,
                         early_stopping={"patience": 1, "metric": "map_wikiqa", "mode": "max"})
    with pytest.raises(ValueError, match=r"early_stopping.metric 'map_wikiqa' is not among the dev metrics.*map"):
        train(SPEC, config.train)


def test_epoch_batches_cover_every_example_once_and_are_seeded():
    lengths = list(np.random.default_rng(0).integers(5, 100, size=103))
    batches = epoch_batches(lengths, batch_size=8, seed=1, bucket=3)
    assert sorted(i for b in batches for i in b) == list(range(103))
    assert batches == epoch_batches(lengths, batch_size=8, seed=1, bucket=3)
    assert batches != epoch_batches(lengths, batch_size=8, seed=2, bucket=3)


def test_freeze_and_keep_layers(tiny_encoder):
    config = TrainConfig(freeze={"embeddings": True, "first_layers": 1, "keep_layers": 2})
    model = build_model(SPEC, config, str(tiny_encoder))
    assert all(not p.requires_grad for p in model.bert.embeddings.parameters())
    assert all(not p.requires_grad for p in model.bert.encoder.layer[0].parameters())
    assert all(p.requires_grad for p in model.bert.encoder.layer[1].parameters())
    kept = build_model(SPEC, TrainConfig(freeze={"keep_layers": 1}), str(tiny_encoder))
    assert len(kept.bert.encoder.layer) == 1 and kept.config.num_hidden_layers == 1


def test_multi_label_loss_masks_missing_labels():
    spec = TaskSpec(name="t", labels=("a", "b"), problem_type="multi_label", prepare_schema=TrainConfig,
                    prepare_fn=lambda c: {}, main_metric="f1")
    logits = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    full = spec.loss(logits, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    masked = spec.loss(logits, torch.tensor([[1.0, -1.0], [-1.0, -1.0]]))
    only_first = torch.nn.functional.binary_cross_entropy_with_logits(logits[0, 0], torch.tensor(1.0))
    assert torch.isclose(masked, only_first)
    assert not torch.isclose(full, masked)
    # A batch whose labels are all missing contributes 0, not NaN.
    assert spec.loss(logits, torch.full((2, 2), -1.0)).item() == 0.0


def test_collate_batches_labels_by_problem_type_not_by_shape():
    # Three tokens and three labels: only the problem type can tell the two label kinds apart.
    features = [{"input_ids": [1, 2, 3], "attention_mask": [1, 1, 1], "token_type_ids": [0, 0, 0], "labels": [1, 0, 2]},
                {"input_ids": [1, 2, 3, 4], "attention_mask": [1] * 4, "token_type_ids": [0] * 4, "labels": [0, 1, 0]}]
    token = collate(features, problem_type="token")
    assert token["labels"].tolist() == [[1, 0, 2, -100], [0, 1, 0, -100]]
    multi = collate(features, problem_type="multi_label")
    assert multi["labels"].dtype == torch.float and tuple(multi["labels"].shape) == (2, 3)
    single = collate([dict(f, labels=1) for f in features], problem_type="single_label")
    assert single["labels"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="problem type"):
        collate(features)


def test_a_warm_start_from_another_runs_best_records_that_run(tiny_run, tiny_data, tmp_path, make_config):
    first_config, first_dir = tiny_run
    second = make_config(str(first_dir / "best"), tiny_data, tmp_path / "second", max_steps=1, eval_every=1)
    train(SPEC, second.train)
    run = json.loads((tmp_path / "second" / "best" / "run.json").read_text())
    warm = run["warm_start"]
    assert warm["config"]["output_dir"] == first_config.train.output_dir
    assert warm["best_step"] == json.loads((first_dir / "best" / "run.json").read_text())["best_step"]
    assert warm["data"]["train"]["sha256"] == run["data"]["train"]["sha256"]
    assert warm["warm_start"] is None  # the first run started from the plain encoder


def test_a_plain_encoder_records_no_warm_start(tiny_run):
    _, run_dir = tiny_run
    assert json.loads((run_dir / "best" / "run.json").read_text())["warm_start"] is None
