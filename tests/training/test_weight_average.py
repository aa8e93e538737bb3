"""`autovalidators average <task>`: weight averaging of tiny runs, its record, its guards and its export."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

import autovalidators.training.cli  # noqa: F401  (registers the task commands)
from autovalidators.inference.cli import app
from autovalidators.inference.manifest import load_manifest
from autovalidators.training.export import export
from autovalidators.training.tasks import get_task
from autovalidators.training.trainer import train
from autovalidators.training.weight_average import AverageError, average_runs, lineage, mean_state

SPEC = get_task("qa_relevance")
KEY = "bert.encoder.layer.0.attention.self.query.weight"


@pytest.fixture(scope="module")
def second_run(tiny_encoder, tiny_data, tmp_path_factory, make_config):
    """Another run from the same tiny encoder, another seed: a second ingredient."""
    run_dir = tmp_path_factory.mktemp("runs") / "qa_seed7"
    train(SPEC, make_config(tiny_encoder, tiny_data, run_dir, seed=7).train)
    return run_dir


def weights(run_dir):
    return load_file(str(run_dir / "best" / "model.safetensors"))


def test_uniform_average_is_the_element_wise_mean_and_lists_its_ingredients(tiny_run, second_run, tmp_path):
    config, first = tiny_run
    record = average_runs(SPEC, [first, second_run], tmp_path / "soup", config.train, greedy=False)
    soup = weights(tmp_path / "soup")
    expected = (weights(first)[KEY] + weights(second_run)[KEY]) / 2
    assert torch.allclose(soup[KEY], expected, atol=1e-6)
    assert not torch.allclose(soup[KEY], weights(first)[KEY])
    average = record["weight_average"]
    assert average["method"] == "uniform" and [i["kept"] for i in average["ingredients"]] == [True, True]
    assert [i["run"] for i in average["ingredients"]] == [str(first), str(second_run)]
    assert average["ingredients"][0]["train_sha256"] == record["data"]["train"]["sha256"]
    assert json.loads((tmp_path / "soup" / "best" / "run.json").read_text()) == record


def test_greedy_keeps_the_best_ingredient_first_and_never_ends_below_it(tiny_run, second_run, tmp_path, monkeypatch):
    from autovalidators.training import weight_average

    config, first = tiny_run
    passes = []
    measure = weight_average.predict_logits
    monkeypatch.setattr(weight_average, "predict_logits", lambda *a, **k: passes.append(1) or measure(*a, **k))
    record = average_runs(SPEC, [first, second_run], tmp_path / "soup", config.train, greedy=True)
    # One dev pass per ingredient and one per soup tried; the chosen soup is not measured again.
    assert len(passes) == 2 + 1
    metric = f"dev_{SPEC.main_metric}"
    ingredients = record["weight_average"]["ingredients"]
    best = max(ingredients, key=lambda i: i[metric])
    other = next(i for i in ingredients if i is not best)
    assert best["kept"] and best["soup_dev_when_added"] is None
    assert other["soup_dev_when_added"] is not None
    assert other["kept"] == (other["soup_dev_when_added"] >= best[metric])
    assert record["dev_metrics"][SPEC.main_metric] >= best[metric] - 1e-9
    kept_soup = other["soup_dev_when_added"] if other["kept"] else best[metric]
    assert record["dev_metrics"][SPEC.main_metric] == pytest.approx(kept_soup)


def test_the_averaged_run_exports_and_its_manifest_records_the_ingredients(tiny_run, second_run, tmp_path):
    config, first = tiny_run
    average_runs(SPEC, [first, second_run], tmp_path / "soup", config.train, greedy=False)
    manifest = export(SPEC, tmp_path / "soup", tmp_path / "models" / "qa_relevance", config)
    recorded = load_manifest(tmp_path / "models" / "qa_relevance").training["weight_average"]
    assert manifest.training["weight_average"] == recorded
    assert [i["run"] for i in recorded["ingredients"]] == [str(first), str(second_run)]


def test_a_warm_started_descendant_averages_and_an_unrelated_run_is_refused(tiny_run, tiny_data, tmp_path,
                                                                          make_config):
    config, first = tiny_run
    warm = tmp_path / "warm"
    train(SPEC, make_config(str(first / "best"), tiny_data, warm, max_steps=1).train)
    # The warm start's record names the tiny encoder `first` started from: one basin.
    assert lineage(json.loads((warm / "best" / "run.json").read_text()))[1] == config.train.base_model
    average_runs(SPEC, [first, warm], tmp_path / "soup", config.train, greedy=False)
    stranger = tmp_path / "stranger"
    shutil.copytree(warm, stranger)
    run = json.loads((stranger / "best" / "run.json").read_text())
    (stranger / "best" / "run.json").write_text(json.dumps({**run, "base_model": "elsewhere", "warm_start": None}))
    with pytest.raises(AverageError, match="no common starting weights"):
        average_runs(SPEC, [first, stranger], tmp_path / "soup2", config.train)


def test_other_shapes_and_missing_files_are_named(tiny_run, second_run, tmp_path):
    config, first = tiny_run
    with pytest.raises(AverageError, match="at least two"):
        average_runs(SPEC, [first], tmp_path / "soup", config.train)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AverageError, match=r"best/model\.safetensors is missing"):
        average_runs(SPEC, [first, empty], tmp_path / "soup", config.train)
    cut = tmp_path / "cut"
    shutil.copytree(second_run / "best", cut / "best")
    state = weights(cut)
    state[KEY] = state[KEY][:, :-1].contiguous()
    from safetensors.torch import save_file
    save_file(state, str(cut / "best" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(AverageError, match=f"tensor {KEY} has shape"):
        average_runs(SPEC, [first, cut], tmp_path / "soup", config.train)
    with pytest.raises(AverageError, match="task 'qa_relevance', not 'tone'"):
        average_runs(get_task("tone"), [first, second_run], tmp_path / "soup", config.train)


def test_integer_buffers_are_not_averaged():
    states = [{"w": torch.tensor([1.0, 3.0]), "ids": torch.tensor([0, 1])},
              {"w": torch.tensor([3.0, 5.0]), "ids": torch.tensor([0, 1])}]
    averaged = mean_state(states)
    assert averaged["w"].tolist() == [2.0, 4.0] and averaged["ids"].dtype == torch.int64


def test_average_command_reports_kept_runs_and_refuses_a_full_target(tiny_run, second_run, tmp_path):
    config, first = tiny_run
    path = tmp_path / "qa.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    runner = CliRunner()
    arguments = ["average", "qa-relevance", "--config", str(path), "--run", str(first), "--run", str(second_run),
                 "--to", str(tmp_path / "soup")]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert "kept:" in result.output and str(tmp_path / "soup" / "best") in result.output.replace("\n", "")
    again = runner.invoke(app, arguments)
    assert again.exit_code == 2 and "is not empty" in again.output


def test_greedy_by_another_dev_metric_and_an_unknown_one_is_named(tiny_run, second_run, tmp_path):
    config, first = tiny_run
    record = average_runs(SPEC, [first, second_run], tmp_path / "soup", config.train, metric="roc_auc")
    assert record["weight_average"]["metric"] == "roc_auc"
    assert all("dev_roc_auc" in i for i in record["weight_average"]["ingredients"])
    with pytest.raises(AverageError, match="'bogus' is not a dev metric of qa_relevance"):
        average_runs(SPEC, [first, second_run], tmp_path / "soup2", config.train, metric="bogus")


def test_a_run_without_a_recorded_recipe_averages_in_but_the_recipe_comes_from_one_that_has_it(
        tiny_run, second_run, tmp_path):
    config, first = tiny_run
    by_hand = tmp_path / "shipped_read_back"
    shutil.copytree(second_run / "best", by_hand / "best")
    info = json.loads((by_hand / "best" / "run.json").read_text())
    info.pop("config")
    (by_hand / "best" / "run.json").write_text(json.dumps(info))
    record = average_runs(SPEC, [by_hand, first], tmp_path / "soup", config.train, greedy=False)
    assert record["config"] == json.loads((first / "best" / "run.json").read_text())["config"]
    assert [i["kept"] for i in record["weight_average"]["ingredients"]] == [True, True]
    only_by_hand = tmp_path / "second_by_hand"
    shutil.copytree(by_hand, only_by_hand)
    with pytest.raises(AverageError, match="records its recipe"):
        average_runs(SPEC, [by_hand, only_by_hand], tmp_path / "soup2", config.train, greedy=False)
    assert not (tmp_path / "soup2").exists()  # refused before any weights are written
